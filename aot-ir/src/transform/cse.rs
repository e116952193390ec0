//! The value-numbering key of common-subexpression elimination: a node's
//! op and arguments as a structural value (floats by their bits), so that
//! identical pure nodes of the joint graph are emitted once
//! (`emit::cse_key` says which nodes may merge).

use super::grad_rules::Prim;
use super::ChainStep;
use crate::dtype::DType;
use crate::op::OpKind;
use crate::types::{Arg, ScalarBinOp, ScalarExpr, ScalarFn, ScalarTy, ValueId};
use std::mem::Discriminant;

/// A node's key; equal keys compute the same value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CseKey {
    Op(OpKind, Vec<ArgKey>),
    Prim(Discriminant<Prim>, PrimData, Vec<ArgKey>),
    Regen(Vec<StepKey>, Vec<ArgKey>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ArgKey {
    Tensor(ValueId),
    Scalar(ScalarKey),
    Ints(Vec<ScalarKey>),
    DType(DType),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ScalarKey {
    /// The bits: `0.0` and `-0.0` differ, as they may in a result.
    F64(u64),
    I64(i64),
    Bool(bool),
    Param(usize),
    Neg(Box<ScalarKey>),
    Bin(ScalarBinOp, Box<ScalarKey>, Box<ScalarKey>),
    Cast(ScalarTy, Box<ScalarKey>),
    Fn(ScalarFn, Vec<ScalarKey>),
    Size(usize),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StepKey {
    ArgGeometry(usize),
    View(OpKind, Vec<ArgKey>),
}

/// What tells two primitives of one kind apart, floats by their bits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PrimData {
    Unit,
    Bits(u64),
    Chain(Vec<StepKey>),
    Flag(bool),
    Pair(usize, usize),
}

/// The key of a source op on `args`.
pub(crate) fn op_key(op: OpKind, args: &[Arg]) -> CseKey {
    CseKey::Op(op, args.iter().map(arg_key).collect())
}

/// The key of a primitive on `args`; `None` for a random draw.
pub(crate) fn prim_node_key(p: &Prim, args: &[Arg]) -> Option<CseKey> {
    Some(CseKey::Prim(std::mem::discriminant(p), prim_data(p)?, args.iter().map(arg_key).collect()))
}

/// The key of a view chain regenerated on `args`.
pub(crate) fn regen_key(chain: &[ChainStep], args: &[Arg]) -> CseKey {
    CseKey::Regen(chain_key(chain), args.iter().map(arg_key).collect())
}

fn prim_data(p: &Prim) -> Option<PrimData> {
    Some(match p {
        Prim::SumToLike
        | Prim::CastLike
        | Prim::OpMath
        | Prim::ReshapeLike
        | Prim::ExpandLike
        | Prim::KeepDims
        | Prim::MetaOf
        | Prim::NllLossGrad
        | Prim::CumsumRev
        | Prim::EmbeddingGrad
        | Prim::ScatterSrcGrad => PrimData::Unit,
        Prim::InvCount(s) => PrimData::Bits(s.to_bits()),
        Prim::ViewGrad(c) | Prim::ViewOf(c) | Prim::ViewScatter(c) => PrimData::Chain(chain_key(c)),
        Prim::MatmulGrad { rhs } => PrimData::Flag(*rhs),
        Prim::CatGrad { k, n } => PrimData::Pair(*k, *n),
        // Each draw is its own value.
        Prim::RngTake | Prim::DropoutMask => return None,
    })
}

fn chain_key(chain: &[ChainStep]) -> Vec<StepKey> {
    chain
        .iter()
        .map(|s| match s {
            ChainStep::ArgGeometry(p) => StepKey::ArgGeometry(*p),
            ChainStep::View { op, args } => StepKey::View(*op, args.iter().map(arg_key).collect()),
        })
        .collect()
}

fn arg_key(a: &Arg) -> ArgKey {
    match a {
        Arg::Tensor(v) => ArgKey::Tensor(*v),
        Arg::Scalar(s) => ArgKey::Scalar(scalar_key(s)),
        Arg::Ints(items) => ArgKey::Ints(items.iter().map(scalar_key).collect()),
        Arg::DType(d) => ArgKey::DType(*d),
    }
}

fn scalar_key(s: &ScalarExpr) -> ScalarKey {
    match s {
        ScalarExpr::F64(v) => ScalarKey::F64(v.to_bits()),
        ScalarExpr::I64(v) => ScalarKey::I64(*v),
        ScalarExpr::Bool(v) => ScalarKey::Bool(*v),
        ScalarExpr::Param(p) => ScalarKey::Param(*p),
        ScalarExpr::Neg(e) => ScalarKey::Neg(Box::new(scalar_key(e))),
        ScalarExpr::Bin(op, a, b) => ScalarKey::Bin(*op, Box::new(scalar_key(a)), Box::new(scalar_key(b))),
        ScalarExpr::Cast(ty, e) => ScalarKey::Cast(*ty, Box::new(scalar_key(e))),
        ScalarExpr::Fn(f, args) => ScalarKey::Fn(*f, args.iter().map(scalar_key).collect()),
        ScalarExpr::Size { slot, .. } | ScalarExpr::ValueSize { slot, .. } => ScalarKey::Size(*slot),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_structure_and_float_bits() {
        let mul = |s: f64| op_key(OpKind::Mul, &[Arg::Tensor(ValueId(0)), Arg::Scalar(ScalarExpr::F64(s))]);
        assert_eq!(mul(2.0), mul(2.0));
        assert_ne!(mul(2.0), mul(3.0));
        assert_ne!(mul(0.0), mul(-0.0), "a sign can change a result (1 / x)");
        assert_eq!(mul(f64::NAN), mul(f64::NAN), "the same NaN literal merges");
        let chain = |d: i64| vec![ChainStep::View { op: OpKind::Select, args: vec![Arg::Scalar(ScalarExpr::I64(d))] }];
        let regen = |d: i64| regen_key(&chain(d), &[Arg::Tensor(ValueId(1))]);
        assert_eq!(regen(0), regen(0));
        assert_ne!(regen(0), regen(1));
        assert_eq!(prim_node_key(&Prim::DropoutMask, &[]), None, "random draws never merge");
        assert_eq!(prim_node_key(&Prim::InvCount(0.5), &[]), prim_node_key(&Prim::InvCount(0.5), &[]));
        assert_ne!(prim_node_key(&Prim::InvCount(0.5), &[]), prim_node_key(&Prim::InvCount(0.25), &[]));
        assert_ne!(prim_node_key(&Prim::ViewGrad(chain(0)), &[]), prim_node_key(&Prim::ViewOf(chain(0)), &[]), "the kind is keyed");
    }
}
