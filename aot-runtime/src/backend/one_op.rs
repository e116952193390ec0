//! One-op kernels of the kernel stage: the primitives that are one op
//! (an elementwise op, a cast, an eager reduction) as a [`Kernel`] of that
//! op alone. The CUDA backend renders and launches them (its elementwise
//! primitives and eager reductions), and `kernels_for` lists them: on
//! CUDA their rendered sources, on the CPU their listings. One builder
//! serves both, so a listing names the kernel that runs.

use crate::dtype::DType;
use aot_ir::kernel::render::KernelTypes;
use aot_ir::kernel::Kernel;
use aot_ir::{Arg, Node, Op, OpKind, ScalarExpr, ValueId};

/// An operand of the kernel's op after the loads: input `i`, or scalar
/// parameter slot `k`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Use {
    Input(u32),
    Scalar(usize),
}

/// One op over loaded inputs: `op(uses..)` computed in `compute`; `cast`
/// is `to_dtype`'s target.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OneOp<'a> {
    pub op: OpKind,
    pub uses: &'a [Use],
    pub cast: Option<DType>,
    pub compute: DType,
}

impl OneOp<'static> {
    /// `op(x)` computed in `compute`.
    pub(crate) fn unary(op: OpKind, compute: DType) -> OneOp<'static> {
        OneOp { op, uses: &[Use::Input(0)], cast: None, compute }
    }
    /// `op(a, b)` computed in `compute`.
    pub(crate) fn binary(op: OpKind, compute: DType) -> OneOp<'static> {
        OneOp { op, uses: &[Use::Input(0), Use::Input(1)], cast: None, compute }
    }
    /// `op(x, s)`, or `op(s, x)` if `scalar_first`, `s` in slot 0.
    pub(crate) fn with_scalar(op: OpKind, scalar_first: bool, compute: DType) -> OneOp<'static> {
        let uses: &'static [Use] = if scalar_first { &[Use::Scalar(0), Use::Input(0)] } else { &[Use::Input(0), Use::Scalar(0)] };
        OneOp { op, uses, cast: None, compute }
    }
    /// `x` converted to `to` (also a copy, when `to` is `x`'s dtype).
    pub(crate) fn cast(to: DType) -> OneOp<'static> {
        OneOp { op: OpKind::ToDtype, uses: &[Use::Input(0)], cast: Some(to), compute: to }
    }
    /// `a.where_(cond, b)`, loaded as (a, cond, b).
    pub(crate) fn where_cond(compute: DType) -> OneOp<'static> {
        OneOp { op: OpKind::Where, uses: &[Use::Input(0), Use::Input(1), Use::Input(2)], cast: None, compute }
    }
}

/// The kernel of `one` over inputs of `inputs`' dtypes into `out`, and its
/// types.
pub(crate) fn kernel(one: &OneOp<'_>, inputs: &[DType], out: DType) -> (Kernel, KernelTypes) {
    let n = inputs.len() as u32;
    let mut body: Vec<Node> = (0..n).map(|i| Node::new(Op::Load(i as usize), vec![], Some(ValueId(i)))).collect();
    let mut args: Vec<Arg> = one
        .uses
        .iter()
        .map(|u| match u {
            Use::Input(i) => Arg::Tensor(ValueId(*i)),
            Use::Scalar(k) => Arg::Scalar(ScalarExpr::Param(*k)),
        })
        .collect();
    if let Some(d) = one.cast {
        args.push(Arg::DType(d));
    }
    body.push(Node::new(one.op, args, Some(ValueId(n))));
    let num_values = n as usize + 1;
    let name = match one.cast {
        Some(d) => format!("aot_to_{}", d.name()),
        None => format!("aot_{}", one.op.name()),
    };
    let k = Kernel {
        name,
        body,
        num_values,
        out: ValueId(n),
        extra_outs: Vec::new(),
        stage_values: (0..num_values as u32).map(ValueId).collect(),
    };
    let values: Vec<DType> = inputs.iter().copied().chain([out]).collect();
    let mut compute = values.clone();
    compute[n as usize] = one.compute;
    (k, KernelTypes { values, compute })
}

/// An eager reduction's op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EagerRow {
    Reduce(OpKind),
    Var { correction: i64 },
    Softmax { log: bool },
}

/// The one-op reduction kernel of `row` for an operand of `dtype`, its
/// types and its slots' values; `None` where eager refuses that dtype
/// (the CUDA backend's host path reports it).
pub(crate) fn row_kernel(row: EagerRow, dtype: DType) -> Option<(Kernel, KernelTypes, Vec<f64>)> {
    let t = Arg::Tensor(ValueId(0));
    let no_dims = Arg::Ints(vec![]);
    let keep = Arg::Scalar(ScalarExpr::Bool(false));
    let (op, args, slots) = match row {
        EagerRow::Reduce(op) if op.is_fold_reduction() => (op, vec![t, no_dims, keep], vec![]),
        // Not a reduction: the host path reports it.
        EagerRow::Reduce(_) => return None,
        // The correction is a slot, so one compiled kernel serves them all.
        EagerRow::Var { correction } => {
            (OpKind::VarDim, vec![t, no_dims, Arg::Scalar(ScalarExpr::Param(0)), keep], vec![correction as f64])
        }
        EagerRow::Softmax { log } => {
            let op = if log { OpKind::LogSoftmax } else { OpKind::Softmax };
            (op, vec![t, Arg::Scalar(ScalarExpr::I64(-1))], vec![])
        }
    };
    let body = vec![Node::new(Op::Load(0), vec![], Some(ValueId(0))), Node::new(op, args, Some(ValueId(1)))];
    let k = Kernel {
        name: format!("aot_{}", op.name()),
        body,
        num_values: 2,
        out: ValueId(1),
        extra_outs: Vec::new(),
        stage_values: vec![ValueId(0), ValueId(1)],
    };
    let types = KernelTypes::infer(&k, &[dtype]).ok()?;
    Some((k, types, slots))
}
