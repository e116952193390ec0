//! The gradient rules, in one table (`op_vjp`), plus the rules of the nodes
//! functionalization introduces (`regen_vjp`, `mutate_vjp`). Every
//! derivative of the project is written here, once.
//!
//! A rule does not compute: it asks a [`GradBuilder`] for each value it
//! needs. The joint graph's builder (`transform::emit::Emit`) appends nodes that
//! compute the vector-Jacobian product when the graph runs; the eager
//! engine's builder (`aot-runtime`'s `autograd::grad_eval`) computes each
//! value on tensors at once. Both therefore compute the same formulas, op
//! for op.
//!
//! Shapes are only known at run time (one graph serves every shape), so
//! anything shape-dependent goes through a small set of backward-only
//! primitives ([`Prim`]): `sum_to_like` undoes broadcasting, `keep_dims` and
//! `expand_like` undo reductions, `view_grad`/`view_scatter` move a gradient
//! between a view region and its root. Everything else is a DSL op.
//!
//! The rules are split by family: `elementwise` (binary, `where_`,
//! unary), `reductions` (with the softmaxes), `views` (views, copies,
//! casts and matrix products), `models` (the ops for models: scans,
//! masks, `max_dim`/`min_dim` and the losses), `index` (gathers,
//! scatters, `cat`, `stack`).

mod elementwise;
mod index;
mod models;
mod reductions;
pub mod saved;
mod views;

pub use crate::graph::{needs_geometry, Prim};

use super::functionalize::ChainStep;
use crate::graph::args::t;
use crate::op::OpKind;
use crate::types::{Arg, ScalarBinOp, ScalarExpr, ValueId};

/// Why no rule applies.
pub type RuleError = String;

/// Where a rule's values go. Tensor values are named by [`ValueId`]s the
/// builder hands out; scalars and dim lists are constant expressions.
pub trait GradBuilder {
    /// Why a value could not be built; a rule's own refusals convert into it.
    type Error: From<RuleError>;
    /// The value of a DSL op on `args`.
    fn op(&mut self, op: OpKind, args: Vec<Arg>) -> Result<ValueId, Self::Error>;
    /// The value of a backward-only primitive on `args`.
    fn prim(&mut self, p: Prim, args: Vec<Arg>) -> Result<ValueId, Self::Error>;
    /// The view `chain` regenerated from `root` (a non-empty chain).
    fn regen(&mut self, root: ValueId, chain: &[ChainStep]) -> Result<ValueId, Self::Error>;
}

/// Shorthands the rules are written with, for every builder.
trait RuleOps: GradBuilder {
    fn un(&mut self, op: OpKind, x: ValueId) -> Result<ValueId, Self::Error> {
        self.op(op, vec![t(x)])
    }
    fn bin(&mut self, op: OpKind, x: ValueId, y: Arg) -> Result<ValueId, Self::Error> {
        self.op(op, vec![t(x), y])
    }
    fn sum_to(&mut self, g: ValueId, like: ValueId) -> Result<ValueId, Self::Error> {
        self.prim(Prim::SumToLike, vec![t(g), t(like)])
    }
    fn cast_like(&mut self, x: ValueId, like: ValueId) -> Result<ValueId, Self::Error> {
        self.prim(Prim::CastLike, vec![t(x), t(like)])
    }
    /// `x` in its opmath dtype (f32 for f16/bf16; see [`Prim::OpMath`]).
    fn opmath(&mut self, x: ValueId) -> Result<ValueId, Self::Error> {
        self.prim(Prim::OpMath, vec![t(x)])
    }
    /// `1.0 - x`, written as eager writes `rsub` (`-(x - 1)` is exact).
    fn one_minus(&mut self, x: ValueId) -> Result<ValueId, Self::Error> {
        let d = self.bin(OpKind::Sub, x, crate::graph::args::f(1.0))?;
        self.un(OpKind::Neg, d)
    }
    /// A comparison made a float mask of `g`'s dtype.
    fn mask(&mut self, cmp: OpKind, x: ValueId, y: Arg, g: ValueId) -> Result<ValueId, Self::Error> {
        let c = self.bin(cmp, x, y)?;
        self.cast_like(c, g)
    }
}

impl<B: GradBuilder + ?Sized> RuleOps for B {}

/// The forward output a rule may use: a value, or a view to regenerate from
/// a mutated root (for in-place ops, whose result is a region of the root).
pub enum OutRef {
    /// A value of the forward.
    Value(ValueId),
    /// The region `chain` selects of root version `root`.
    Region {
        /// The root version holding the result.
        root: ValueId,
        /// The view chain from `root` to the result.
        chain: Vec<ChainStep>,
    },
}

impl OutRef {
    fn get<B: GradBuilder>(&self, e: &mut B) -> Result<ValueId, B::Error> {
        match self {
            OutRef::Value(v) => Ok(*v),
            OutRef::Region { root, chain } if chain.is_empty() => Ok(*root),
            OutRef::Region { root, chain } => e.regen(*root, chain),
        }
    }
}

/// One argument gradient per argument position (`None`: no gradient).
type Grads = Vec<Option<ValueId>>;

/// The call a rule differentiates: `op(args..) = out`, with output
/// gradient `g`; `needs[i]` says whether argument `i` wants a gradient.
struct Call<'a> {
    op: OpKind,
    args: &'a [Arg],
    /// The receiver (argument 0).
    x: ValueId,
    out: &'a OutRef,
    g: ValueId,
    needs: &'a [bool],
}

impl Call<'_> {
    fn tensor(&self, i: usize) -> Option<ValueId> {
        self.args.get(i).and_then(Arg::as_tensor)
    }
    fn need(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false) && self.tensor(i).is_some()
    }
    fn arg(&self, i: usize) -> Result<Arg, RuleError> {
        self.args.get(i).cloned().ok_or_else(|| format!("`{}` is missing argument {i}", self.op.name()))
    }
}

fn scalar_recip(s: &ScalarExpr) -> ScalarExpr {
    ScalarExpr::Bin(ScalarBinOp::Div, Box::new(ScalarExpr::F64(1.0)), Box::new(s.clone()))
}

fn scalar_minus_one(s: &ScalarExpr) -> ScalarExpr {
    ScalarExpr::Bin(ScalarBinOp::Sub, Box::new(s.clone()), Box::new(ScalarExpr::F64(1.0)))
}

/// The out-of-place op whose rule an in-place op uses for its written region.
pub fn out_of_place(op: OpKind) -> Option<OpKind> {
    match op {
        // clamp_'s rule is keyed on itself in the table (the rule predates
        // the out-of-place `clamp` op).
        OpKind::Clamp => Some(OpKind::Clamp),
        _ => op.out_of_place(),
    }
}

/// THE table: the gradients of `op(args..) = out` for output gradient `g`,
/// one per argument position (`None`: no gradient). `needs[i]` says whether
/// argument `i` wants one.
pub fn op_vjp<B: GradBuilder>(
    e: &mut B,
    op: OpKind,
    args: &[Arg],
    out: &OutRef,
    g: ValueId,
    needs: &[bool],
) -> Result<Vec<Option<ValueId>>, B::Error> {
    use OpKind as K;
    let x = args.first().and_then(Arg::as_tensor).ok_or_else(|| format!("`{}` has no tensor receiver", op.name()))?;
    let c = Call { op, args, x, out, g, needs };
    let mut r: Grads = vec![None; args.len()];
    match op {
        K::Add | K::Sub | K::Mul | K::Div | K::Pow | K::Maximum | K::Minimum | K::Where => elementwise::binary(e, &c, &mut r)?,
        K::Neg | K::Exp | K::Log | K::Sqrt | K::Rsqrt | K::Abs | K::Sin | K::Cos | K::Tanh | K::Sigmoid | K::Relu | K::Gelu => {
            r[0] = Some(elementwise::unary(e, &c)?)
        }
        K::Silu | K::Reciprocal | K::Square | K::Clamp | K::ClampOut => r[0] = Some(elementwise::unary(e, &c)?),
        K::Log1p | K::Expm1 | K::MaskedFill | K::Tril | K::Triu | K::Cumsum | K::MaxDim | K::MinDim | K::NllLoss | K::CrossEntropy => {
            r[0] = Some(models::vjp(e, &c)?)
        }
        K::Flatten | K::ViewAs => r[0] = Some(views::vjp(e, &c)?),
        K::Sum | K::Mean | K::SumDim | K::MeanDim | K::AmaxDim | K::VarDim | K::Softmax | K::LogSoftmax => {
            r[0] = Some(reductions::vjp(e, &c)?)
        }
        K::Matmul | K::Mm | K::Bmm => views::matmul(e, &c, &mut r)?,
        K::View | K::Reshape | K::Squeeze | K::T | K::Transpose | K::Unsqueeze | K::Expand | K::Permute => r[0] = Some(views::vjp(e, &c)?),
        K::Select | K::Slice | K::Narrow | K::Diagonal | K::AsStrided | K::Copy | K::Contiguous | K::ToDtype => {
            r[0] = Some(views::vjp(e, &c)?)
        }
        K::IndexSelect | K::Gather | K::ScatterAdd | K::Embedding | K::IndexCopy | K::IndexAdd | K::Cat | K::Stack => {
            index::vjp(e, &c, &mut r)?
        }
        K::Dropout => return Err(RuleError::from("dropout has no symbolic gradient yet (its mask is not a graph value)").into()),
        K::Eq | K::Ne | K::Lt | K::Le | K::Gt | K::Ge | K::ZerosLike | K::OnesLike | K::FullLike | K::RandLike | K::Detach => {}
        K::Argmax | K::Argmin | K::Arange => {}
        _ => return Err(format!("`{}` is in place; its rule is the scatter rule", op.name()).into()),
    }
    Ok(r)
}

/// `regen(root, chain)`: the view's gradient scattered into zeros of root's shape.
pub fn regen_vjp<B: GradBuilder>(e: &mut B, root: ValueId, chain: &[ChainStep], g: ValueId) -> Result<ValueId, B::Error> {
    if chain.is_empty() {
        return Ok(g);
    }
    e.prim(Prim::ViewGrad(chain.to_vec()), vec![t(root), t(g)])
}

/// One in-place op on the region `chain` of root version `root`, producing
/// root version `out`: `out = scatter(root, op_(view(root), args..))`.
pub struct MutateSite<'a> {
    /// The in-place op.
    pub op: OpKind,
    /// The root version written.
    pub root: ValueId,
    /// The root version the write produces.
    pub out: ValueId,
    /// The view chain from `root` to the written region.
    pub chain: &'a [ChainStep],
    /// The op's arguments: the written view (its old value) first.
    pub args: &'a [Arg],
}

/// The gradients of a data mutation, given the new root's gradient `g`:
/// `[root, args[1], args[2], ..]` (the view itself gets none: its
/// gradient is part of the root's). The root's gradient is `g` with the
/// written region replaced by the op's gradient w.r.t. its receiver (zero
/// for `copy_`, `fill_`, `zero_`, which overwrite); the other arguments get
/// the op's other gradients of `g`'s region.
pub fn mutate_vjp<B: GradBuilder>(e: &mut B, s: &MutateSite, g: ValueId, needs: &[bool]) -> Result<Vec<Option<ValueId>>, B::Error> {
    use OpKind as K;
    let need = |i: usize| needs.get(i).copied().unwrap_or(false);
    let region = if s.chain.is_empty() { g } else { e.prim(Prim::ViewOf(s.chain.to_vec()), vec![t(s.root), t(g)])? };
    let mut r: Grads = vec![None; s.args.len()];
    let self_grad = match s.op {
        K::CopyInplace => {
            if let (true, Some(src)) = (need(1), s.args.get(1).and_then(Arg::as_tensor)) {
                r[1] = Some(e.sum_to(region, src)?);
            }
            None
        }
        K::Fill | K::Zero => None,
        _ => {
            let base = out_of_place(s.op).ok_or_else(|| format!("`{}` is not a data mutation", s.op.name()))?;
            let out = OutRef::Region { root: s.out, chain: s.chain.to_vec() };
            let mut wants = vec![need(0)];
            wants.extend((1..s.args.len()).map(need));
            let mut g_args = op_vjp(e, base, s.args, &out, region, &wants)?;
            for (i, gi) in g_args.iter_mut().enumerate().skip(1) {
                r[i] = gi.take();
            }
            g_args.first().copied().flatten()
        }
    };
    if need(0) {
        let written = match self_grad {
            Some(v) => v,
            None => e.un(K::ZerosLike, region)?,
        };
        r[0] = Some(if s.chain.is_empty() {
            written
        } else {
            e.prim(Prim::ViewScatter(s.chain.to_vec()), vec![t(s.root), t(g), t(written)])?
        });
    }
    Ok(r)
}
