//! The symbolic gradient rules, in one table (`op_vjp`), plus the rules of
//! the nodes functionalization introduces (`regen_vjp`, `mutate_vjp`).
//!
//! A rule does not compute: it appends nodes to the joint graph that compute
//! the vector-Jacobian product when the graph runs. The formulas are the
//! eager ones (`aot-runtime`'s `BackwardOp` table) written as IR, so compiled
//! and eager gradients agree to the last bit where the op order allows.
//!
//! Shapes are only known at run time (one graph serves every shape), so
//! anything shape-dependent goes through a small set of backward-only
//! primitives ([`Prim`]): `sum_to_like` undoes broadcasting, `keep_dims` and
//! `expand_like` undo reductions, `view_grad`/`view_scatter` move a gradient
//! between a view region and its root. Everything else is a DSL op.

use super::functionalize::ChainStep;
use super::joint::{JNode, JOp};
use crate::graph::args::{f, t};
use crate::op::OpKind;
use crate::types::{Arg, ScalarBinOp, ScalarExpr, ValueId};
use std::collections::HashMap;
use std::fmt;

/// Backward-only primitives of the joint IR. Arguments are listed as
/// `[..]`; `like` is a forward value whose runtime shape/dtype is meant.
#[derive(Clone, Debug, PartialEq)]
pub enum Prim {
    /// `[g, like]`: `g` summed down to `like`'s shape (undoing broadcasting)
    /// and cast to its dtype.
    SumToLike,
    /// `[x, like]`: `x` cast to `like`'s dtype.
    CastLike,
    /// `[g, like]`: `g` reshaped to `like`'s shape.
    ReshapeLike,
    /// `[g, like]`: `g` expanded to `like`'s shape, materialized.
    ExpandLike,
    /// `[g, like, dims, keepdim]`: the output of a reduction of `like` over
    /// `dims` (empty: all) with the reduced dims put back as size 1 (none
    /// for a 0-d `like`, whose dim 0/-1 reduces nothing).
    KeepDims,
    /// `[like, dims, correction]`: a 0-dim tensor of `like`'s dtype holding
    /// `scale / max(count - correction, 0)`, count = elements reduced over
    /// `dims` (1 for a 0-d `like`).
    InvCount(f64),
    /// `[root, g]`: the gradient of `root` from the gradient `g` of the view
    /// `chain` replays on it: `g` scatter-added into zeros of root's shape.
    ViewGrad(Vec<ChainStep>),
    /// `[root, g]`: the region of `g` (shaped like `root`) that `chain`
    /// selects, materialized.
    ViewOf(Vec<ChainStep>),
    /// `[root, base, src]`: a copy of `base` (shaped like `root`) with the
    /// region `chain` selects replaced by `src`.
    ViewScatter(Vec<ChainStep>),
    /// `[g, a, b]`: the gradient of `a` (`rhs` false) or `b` of `a.matmul(b)`,
    /// with matmul's 1-D and batch-broadcasting rules.
    MatmulGrad { rhs: bool },
    /// `[x]`: a one-element stand-in with `x`'s shape and dtype (stride 0),
    /// saved for the backward when only `x`'s metadata is read there.
    MetaOf,
    /// `[x, p]`: dropout's mask for `x` (`1/(1-p)` where kept, 0 where
    /// dropped), drawn from the generator exactly as eager `dropout` draws
    /// it. Random: never recomputed, never merged with another.
    DropoutMask,
}

impl Prim {
    pub fn name(&self) -> &'static str {
        match self {
            Prim::SumToLike => "sum_to_like",
            Prim::CastLike => "cast_like",
            Prim::ReshapeLike => "reshape_like",
            Prim::ExpandLike => "expand_like",
            Prim::KeepDims => "keep_dims",
            Prim::InvCount(_) => "inv_count",
            Prim::ViewGrad(_) => "view_grad",
            Prim::ViewOf(_) => "view_of",
            Prim::ViewScatter(_) => "view_scatter",
            Prim::MatmulGrad { rhs: false } => "matmul_grad_a",
            Prim::MatmulGrad { rhs: true } => "matmul_grad_b",
            Prim::MetaOf => "meta_of",
            Prim::DropoutMask => "dropout_mask",
        }
    }

    /// Elementwise or layout-only: cheap to recompute in the backward.
    pub fn is_cheap(&self) -> bool {
        !matches!(self, Prim::MatmulGrad { .. } | Prim::DropoutMask)
    }

    /// Argument positions of which only the shape and dtype are read.
    pub fn meta_args(&self) -> &'static [usize] {
        match self {
            Prim::SumToLike | Prim::CastLike | Prim::ReshapeLike | Prim::ExpandLike | Prim::KeepDims => &[1],
            Prim::InvCount(_) | Prim::MetaOf | Prim::DropoutMask => &[0],
            // as_strided addresses root's storage: its geometry is needed
            Prim::ViewGrad(c) | Prim::ViewOf(c) | Prim::ViewScatter(c) if !needs_geometry(c) => &[0],
            _ => &[],
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prim::InvCount(s) => write!(fm, "inv_count[{s:?}]"),
            _ => fm.write_str(self.name()),
        }
    }
}

/// Whether a chain places its view by absolute storage geometry.
pub fn needs_geometry(chain: &[ChainStep]) -> bool {
    chain.iter().any(|s| matches!(s, ChainStep::ArgGeometry(_) | ChainStep::View { op: OpKind::AsStrided, .. }))
}

/// Appends nodes to the joint graph under construction.
/// Identical pure nodes are emitted once (rules often recompute the same
/// value, e.g. var's mean, or a forward value).
pub(crate) struct Emit<'a> {
    pub nodes: &'a mut Vec<JNode>,
    pub num_values: &'a mut usize,
    pub seen: HashMap<String, ValueId>,
}

/// The value-numbering key of a node, `None` for nodes that must not be
/// merged (inputs, random ops, mutations, copies of inputs).
pub(crate) fn cse_key(op: &JOp, args: &[Arg]) -> Option<String> {
    match op {
        JOp::Op { op, check_alias: None, .. } if !op.is_random() => Some(format!("{op:?}{args:?}")),
        JOp::Prim(Prim::DropoutMask) => None,
        JOp::Prim(p) => Some(format!("{p:?}{args:?}")),
        JOp::Regen(c) => Some(format!("regen{c:?}{args:?}")),
        _ => None,
    }
}

impl Emit<'_> {
    pub fn push(&mut self, op: JOp, args: Vec<Arg>) -> ValueId {
        let key = cse_key(&op, &args);
        if let Some(v) = key.as_ref().and_then(|k| self.seen.get(k)) {
            return *v;
        }
        let out = ValueId(*self.num_values as u32);
        *self.num_values += 1;
        self.nodes.push(JNode { op, args, out, is_backward: false });
        if let Some(k) = key {
            self.seen.insert(k, out);
        }
        out
    }
    pub fn op(&mut self, op: OpKind, args: Vec<Arg>) -> ValueId {
        self.push(JOp::Op { op, src_node: None, check_alias: None }, args)
    }
    pub fn prim(&mut self, p: Prim, args: Vec<Arg>) -> ValueId {
        self.push(JOp::Prim(p), args)
    }
    fn un(&mut self, op: OpKind, x: ValueId) -> ValueId {
        self.op(op, vec![t(x)])
    }
    fn bin(&mut self, op: OpKind, x: ValueId, y: Arg) -> ValueId {
        self.op(op, vec![t(x), y])
    }
    fn sum_to(&mut self, g: ValueId, like: ValueId) -> ValueId {
        self.prim(Prim::SumToLike, vec![t(g), t(like)])
    }
    fn cast_like(&mut self, x: ValueId, like: ValueId) -> ValueId {
        self.prim(Prim::CastLike, vec![t(x), t(like)])
    }
    /// `1.0 - x`, written as eager writes `rsub` (`-(x - 1)` is exact).
    fn one_minus(&mut self, x: ValueId) -> ValueId {
        let d = self.bin(OpKind::Sub, x, f(1.0));
        self.un(OpKind::Neg, d)
    }
    /// A comparison made a float mask of `g`'s dtype.
    fn mask(&mut self, cmp: OpKind, x: ValueId, y: Arg, g: ValueId) -> ValueId {
        let c = self.bin(cmp, x, y);
        self.cast_like(c, g)
    }
}

/// The forward output a rule may use: a value, or a view to regenerate from
/// a mutated root (for in-place ops, whose result is a region of the root).
pub(crate) enum OutRef {
    Value(ValueId),
    Region { root: ValueId, chain: Vec<ChainStep> },
}

impl OutRef {
    fn get(&self, e: &mut Emit) -> ValueId {
        match self {
            OutRef::Value(v) => *v,
            OutRef::Region { root, chain } if chain.is_empty() => *root,
            OutRef::Region { root, chain } => e.push(JOp::Regen(chain.clone()), vec![t(*root)]),
        }
    }
}

/// Why no rule applies.
pub(crate) type RuleError = String;

fn scalar_recip(s: &ScalarExpr) -> ScalarExpr {
    ScalarExpr::Bin(ScalarBinOp::Div, Box::new(ScalarExpr::F64(1.0)), Box::new(s.clone()))
}

fn scalar_minus_one(s: &ScalarExpr) -> ScalarExpr {
    ScalarExpr::Bin(ScalarBinOp::Sub, Box::new(s.clone()), Box::new(ScalarExpr::F64(1.0)))
}

/// The out-of-place op whose rule an in-place op uses for its written region.
pub(crate) fn out_of_place(op: OpKind) -> Option<OpKind> {
    Some(match op {
        OpKind::AddInplace => OpKind::Add,
        OpKind::SubInplace => OpKind::Sub,
        OpKind::MulInplace => OpKind::Mul,
        OpKind::DivInplace => OpKind::Div,
        OpKind::ReluInplace => OpKind::Relu,
        OpKind::SigmoidInplace => OpKind::Sigmoid,
        OpKind::ExpInplace => OpKind::Exp,
        OpKind::NegInplace => OpKind::Neg,
        // clamp_ has no out-of-place DSL op; its rule is keyed on itself.
        OpKind::Clamp => OpKind::Clamp,
        _ => return None,
    })
}

/// THE table: the gradients of `op(args..) = out` for output gradient `g`,
/// one per argument position (`None`: no gradient). `needs[i]` says whether
/// argument `i` wants one.
pub(crate) fn op_vjp(
    e: &mut Emit,
    op: OpKind,
    args: &[Arg],
    out: &OutRef,
    g: ValueId,
    needs: &[bool],
) -> Result<Vec<Option<ValueId>>, RuleError> {
    use OpKind as K;
    let tensor = |i: usize| args.get(i).and_then(Arg::as_tensor);
    let need = |i: usize| needs.get(i).copied().unwrap_or(false) && tensor(i).is_some();
    let x = tensor(0).ok_or_else(|| format!("`{}` has no tensor receiver", op.name()))?;
    let arg = |i: usize| args.get(i).cloned().ok_or_else(|| format!("`{}` is missing argument {i}", op.name()));
    let mut r: Vec<Option<ValueId>> = vec![None; args.len()];
    // The right operand of a binary op: a tensor or a scalar.
    let rhs = args.get(1).cloned();
    match op {
        K::Add | K::Sub => {
            if need(0) {
                r[0] = Some(e.sum_to(g, x));
            }
            if let (true, Some(b)) = (need(1), tensor(1)) {
                let gb = if op == K::Sub { e.un(K::Neg, g) } else { g };
                r[1] = Some(e.sum_to(gb, b));
            }
        }
        K::Mul => match rhs {
            Some(Arg::Tensor(b)) => {
                if need(0) {
                    let m = e.bin(K::Mul, g, t(b));
                    r[0] = Some(e.sum_to(m, x));
                }
                if need(1) {
                    let m = e.bin(K::Mul, g, t(x));
                    r[1] = Some(e.sum_to(m, b));
                }
            }
            Some(Arg::Scalar(s)) if need(0) => {
                let m = e.bin(K::Mul, g, Arg::Scalar(s));
                r[0] = Some(e.cast_like(m, x));
            }
            _ => {}
        },
        K::Div => match rhs {
            Some(Arg::Tensor(b)) => {
                if need(0) {
                    let d = e.bin(K::Div, g, t(b));
                    r[0] = Some(e.sum_to(d, x));
                }
                if need(1) {
                    let ng = e.un(K::Neg, g);
                    let num = e.bin(K::Mul, ng, t(x));
                    let b2 = e.un(K::Square, b);
                    let d = e.bin(K::Div, num, t(b2));
                    r[1] = Some(e.sum_to(d, b));
                }
            }
            Some(Arg::Scalar(s)) if need(0) => {
                // eager multiplies by the reciprocal
                let m = e.bin(K::Mul, g, Arg::Scalar(scalar_recip(&s)));
                r[0] = Some(e.cast_like(m, x));
            }
            _ => {}
        },
        K::Pow => match rhs {
            Some(Arg::Tensor(b)) => {
                if need(0) {
                    // b * x^(b-1), 0 where b == 0
                    let bm1 = e.bin(K::Sub, b, f(1.0));
                    let p = e.bin(K::Pow, x, t(bm1));
                    let d = e.bin(K::Mul, b, t(p));
                    let nz = e.bin(K::Ne, b, f(0.0));
                    let d = e.op(K::Where, vec![t(d), t(nz), f(0.0)]);
                    let m = e.bin(K::Mul, g, t(d));
                    r[0] = Some(e.sum_to(m, x));
                }
                if need(1) {
                    // out * log(x), 0 where x == 0 and b >= 0
                    let o = out.get(e);
                    let lx = e.un(K::Log, x);
                    let d = e.bin(K::Mul, o, t(lx));
                    let z = e.mask(K::Eq, x, f(0.0), g);
                    let nn = e.mask(K::Ge, b, f(0.0), g);
                    let both = e.bin(K::Mul, z, t(nn));
                    let keep = e.bin(K::Lt, both, f(0.5));
                    let d = e.op(K::Where, vec![t(d), t(keep), f(0.0)]);
                    let m = e.bin(K::Mul, g, t(d));
                    r[1] = Some(e.sum_to(m, b));
                }
            }
            Some(Arg::Scalar(s)) if need(0) => {
                r[0] = Some(if s.as_const() == Some(crate::types::ScalarValue::F64(0.0)) || s.as_const_int() == Some(0) {
                    e.bin(K::Mul, g, f(0.0))
                } else {
                    let p = e.bin(K::Pow, x, Arg::Scalar(scalar_minus_one(&s)));
                    let d = e.bin(K::Mul, p, Arg::Scalar(s));
                    e.bin(K::Mul, g, t(d))
                });
            }
            _ => {}
        },
        K::Maximum | K::Minimum => {
            let b = rhs.ok_or_else(|| format!("`{}` is missing its operand", op.name()))?;
            let win = if op == K::Maximum { K::Gt } else { K::Lt };
            let w = e.mask(win, x, b.clone(), g);
            let tie = e.mask(K::Eq, x, b.clone(), g);
            let half = e.bin(K::Mul, tie, f(0.5));
            let fa = e.bin(K::Add, w, t(half));
            if need(0) {
                let m = e.bin(K::Mul, g, t(fa));
                r[0] = Some(match b {
                    Arg::Tensor(_) => e.sum_to(m, x),
                    _ => m,
                });
            }
            if let (true, Some(bt)) = (need(1), tensor(1)) {
                let fb = e.one_minus(fa);
                let m = e.bin(K::Mul, g, t(fb));
                r[1] = Some(e.sum_to(m, bt));
            }
        }
        K::Where => {
            let cond = tensor(1).ok_or("`where_` needs a tensor condition")?;
            if need(0) {
                let w = e.op(K::Where, vec![t(g), t(cond), f(0.0)]);
                r[0] = Some(e.sum_to(w, x));
            }
            if let (true, Some(o)) = (need(2), tensor(2)) {
                let z = e.un(K::ZerosLike, g);
                let w = e.op(K::Where, vec![t(z), t(cond), t(g)]);
                r[2] = Some(e.sum_to(w, o));
            }
        }
        K::Neg => r[0] = Some(e.un(K::Neg, g)),
        K::Exp => {
            let o = out.get(e);
            r[0] = Some(e.bin(K::Mul, g, t(o)));
        }
        K::Log => r[0] = Some(e.bin(K::Div, g, t(x))),
        K::Sqrt => {
            let o = out.get(e);
            let d = e.bin(K::Mul, o, f(2.0));
            r[0] = Some(e.bin(K::Div, g, t(d)));
        }
        K::Rsqrt => {
            let o = out.get(e);
            let p = e.bin(K::Pow, o, f(3.0));
            let d = e.bin(K::Mul, p, f(-0.5));
            r[0] = Some(e.bin(K::Mul, g, t(d)));
        }
        K::Abs => {
            let pos = e.mask(K::Gt, x, f(0.0), g);
            let neg = e.mask(K::Lt, x, f(0.0), g);
            let sign = e.bin(K::Sub, pos, t(neg));
            r[0] = Some(e.bin(K::Mul, g, t(sign)));
        }
        K::Sin => {
            let c = e.un(K::Cos, x);
            r[0] = Some(e.bin(K::Mul, g, t(c)));
        }
        K::Cos => {
            let s = e.un(K::Sin, x);
            let n = e.un(K::Neg, s);
            r[0] = Some(e.bin(K::Mul, g, t(n)));
        }
        K::Tanh => {
            let o = out.get(e);
            let sq = e.un(K::Square, o);
            let d = e.one_minus(sq);
            r[0] = Some(e.bin(K::Mul, g, t(d)));
        }
        K::Sigmoid => {
            let o = out.get(e);
            let om = e.one_minus(o);
            let d = e.bin(K::Mul, o, t(om));
            r[0] = Some(e.bin(K::Mul, g, t(d)));
        }
        K::Relu => {
            let o = out.get(e);
            let m = e.mask(K::Gt, o, f(0.0), g);
            r[0] = Some(e.bin(K::Mul, g, t(m)));
        }
        K::Gelu => r[0] = Some(gelu_vjp(e, x, g)),
        K::Silu => {
            let s = e.un(K::Sigmoid, x);
            let om = e.one_minus(s);
            let xs = e.bin(K::Mul, x, t(om));
            let p1 = e.bin(K::Add, xs, f(1.0));
            let d = e.bin(K::Mul, s, t(p1));
            r[0] = Some(e.bin(K::Mul, g, t(d)));
        }
        K::Reciprocal => {
            let o = out.get(e);
            let sq = e.un(K::Square, o);
            let n = e.un(K::Neg, sq);
            r[0] = Some(e.bin(K::Mul, g, t(n)));
        }
        K::Square => {
            let d = e.bin(K::Mul, x, f(2.0));
            r[0] = Some(e.bin(K::Mul, g, t(d)));
        }
        K::Clamp => {
            // no gradient at the bounds themselves, as eager
            let lo = e.mask(K::Gt, x, arg(1)?, g);
            let hi = e.mask(K::Lt, x, arg(2)?, g);
            let keep = e.bin(K::Mul, lo, t(hi));
            r[0] = Some(e.bin(K::Mul, g, t(keep)));
        }
        K::Sum | K::Mean | K::SumDim | K::MeanDim => {
            let (dims, keepdim) = match op {
                K::Sum | K::Mean => (Arg::Ints(vec![]), crate::graph::args::b(false)),
                _ => (arg(1)?, arg(2)?),
            };
            let k = e.prim(Prim::KeepDims, vec![t(g), t(x), dims.clone(), keepdim]);
            let ex = e.prim(Prim::ExpandLike, vec![t(k), t(x)]);
            r[0] = Some(if matches!(op, K::Mean | K::MeanDim) {
                let c = e.prim(Prim::InvCount(1.0), vec![t(x), dims, crate::graph::args::i(0)]);
                e.bin(K::Mul, ex, t(c))
            } else {
                ex
            });
        }
        K::AmaxDim => {
            let (dims, keepdim) = (arg(1)?, arg(2)?);
            let o = out.get(e);
            let ok = e.prim(Prim::KeepDims, vec![t(o), t(x), dims.clone(), keepdim.clone()]);
            let gk = e.prim(Prim::KeepDims, vec![t(g), t(x), dims.clone(), keepdim]);
            let mask = e.mask(K::Eq, x, t(ok), g);
            let count = e.op(K::SumDim, vec![t(mask), dims, crate::graph::args::b(true)]);
            let share = e.bin(K::Div, mask, t(count));
            r[0] = Some(e.bin(K::Mul, share, t(gk)));
        }
        K::VarDim => {
            let (dims, corr, keepdim) = (arg(1)?, arg(2)?, arg(3)?);
            let mean = e.op(K::MeanDim, vec![t(x), dims.clone(), crate::graph::args::b(true)]);
            let gk = e.prim(Prim::KeepDims, vec![t(g), t(x), dims.clone(), keepdim]);
            let scale = e.prim(Prim::InvCount(2.0), vec![t(x), dims, corr]);
            let c = e.bin(K::Sub, x, t(mean));
            let c = e.bin(K::Mul, c, t(scale));
            r[0] = Some(e.bin(K::Mul, c, t(gk)));
        }
        K::Softmax => {
            let o = out.get(e);
            let dim = Arg::Ints(vec![arg(1)?.as_scalar().cloned().ok_or("softmax needs a dim")?]);
            let go = e.bin(K::Mul, g, t(o));
            let s = e.op(K::SumDim, vec![t(go), dim, crate::graph::args::b(true)]);
            let d = e.bin(K::Sub, g, t(s));
            r[0] = Some(e.bin(K::Mul, o, t(d)));
        }
        K::LogSoftmax => {
            let o = out.get(e);
            let dim = Arg::Ints(vec![arg(1)?.as_scalar().cloned().ok_or("log_softmax needs a dim")?]);
            let ex = e.un(K::Exp, o);
            let s = e.op(K::SumDim, vec![t(g), dim, crate::graph::args::b(true)]);
            let m = e.bin(K::Mul, ex, t(s));
            r[0] = Some(e.bin(K::Sub, g, t(m)));
        }
        K::Matmul | K::Mm | K::Bmm => {
            let b = tensor(1).ok_or_else(|| format!("`{}` needs a tensor operand", op.name()))?;
            for (i, rhs) in [(0, false), (1, true)] {
                if need(i) {
                    r[i] = Some(match op {
                        K::Mm => {
                            let (l, rt) = if rhs { (e.un(K::T, x), g) } else { (g, e.un(K::T, b)) };
                            e.bin(K::Mm, l, t(rt))
                        }
                        K::Bmm => {
                            let tr = |e: &mut Emit, v| e.op(K::Transpose, vec![t(v), crate::graph::args::i(1), crate::graph::args::i(2)]);
                            let (l, rt) = if rhs { (tr(e, x), g) } else { (g, tr(e, b)) };
                            e.bin(K::Bmm, l, t(rt))
                        }
                        _ => e.prim(Prim::MatmulGrad { rhs }, vec![t(g), t(x), t(b)]),
                    });
                }
            }
        }
        K::View | K::Reshape | K::Squeeze => r[0] = Some(e.prim(Prim::ReshapeLike, vec![t(g), t(x)])),
        K::T => r[0] = Some(e.un(K::T, g)),
        K::Transpose => r[0] = Some(e.op(K::Transpose, vec![t(g), arg(1)?, arg(2)?])),
        K::Unsqueeze => r[0] = Some(e.op(K::Squeeze, vec![t(g), arg(1)?])),
        K::Expand => r[0] = Some(e.sum_to(g, x)),
        K::Permute => {
            let perm = arg(1)?.const_ints();
            r[0] = Some(match perm.and_then(|p| inverse_permutation(&p)) {
                Some(inv) => e.op(K::Permute, vec![t(g), crate::graph::args::ints(&inv)]),
                None => view_grad(e, op, args, x, g),
            });
        }
        K::Select | K::Slice | K::Narrow | K::Diagonal | K::AsStrided => r[0] = Some(view_grad(e, op, args, x, g)),
        K::Copy | K::Contiguous => r[0] = Some(g),
        K::ToDtype => r[0] = Some(e.cast_like(g, x)),
        K::Dropout => return Err("dropout has no symbolic gradient yet (its mask is not a graph value)".into()),
        K::Eq | K::Ne | K::Lt | K::Le | K::Gt | K::Ge | K::ZerosLike | K::OnesLike | K::FullLike | K::RandLike | K::Detach => {}
        _ => return Err(format!("`{}` is in place; its rule is the scatter rule", op.name())),
    }
    Ok(r)
}

fn view_grad(e: &mut Emit, op: OpKind, args: &[Arg], x: ValueId, g: ValueId) -> ValueId {
    let chain = vec![ChainStep::View { op, args: args[1..].to_vec() }];
    e.prim(Prim::ViewGrad(chain), vec![t(x), t(g)])
}

fn inverse_permutation(p: &[i64]) -> Option<Vec<i64>> {
    let n = p.len() as i64;
    let mut inv = vec![-1i64; p.len()];
    for (i, &d) in p.iter().enumerate() {
        let d = if d < 0 { d + n } else { d };
        let slot = inv.get_mut(usize::try_from(d).ok()?)?;
        if *slot != -1 {
            return None;
        }
        *slot = i as i64;
    }
    Some(inv)
}

/// gelu's exact gradient, as eager computes it: the normal cdf recovered as
/// `gelu(x) / x` (0.5 at 0) plus `x * pdf(x)`.
fn gelu_vjp(e: &mut Emit, x: ValueId, g: ValueId) -> ValueId {
    use OpKind as K;
    let scaled = e.bin(K::Mul, x, f(std::f64::consts::FRAC_1_SQRT_2));
    let gelu = e.un(K::Gelu, x);
    let nz = e.bin(K::Ne, x, f(0.0));
    let safe = e.op(K::Where, vec![t(x), t(nz), f(1.0)]);
    let q = e.bin(K::Div, gelu, t(safe));
    let cdf = e.op(K::Where, vec![t(q), t(nz), f(0.5)]);
    let sq = e.un(K::Square, scaled);
    let nsq = e.un(K::Neg, sq);
    let ex = e.un(K::Exp, nsq);
    let pdf = e.bin(K::Mul, ex, f(1.0 / (2.0 * std::f64::consts::PI).sqrt()));
    let xp = e.bin(K::Mul, x, t(pdf));
    let d = e.bin(K::Add, cdf, t(xp));
    e.bin(K::Mul, g, t(d))
}

/// `regen(root, chain)`: the view's gradient scattered into zeros of root's shape.
pub(crate) fn regen_vjp(e: &mut Emit, root: ValueId, chain: &[ChainStep], g: ValueId) -> ValueId {
    if chain.is_empty() {
        return g;
    }
    e.prim(Prim::ViewGrad(chain.to_vec()), vec![t(root), t(g)])
}

/// One in-place op on the region `chain` of root version `root`, producing
/// root version `out`: `out = scatter(root, op_(view(root), args..))`.
pub(crate) struct MutateSite<'a> {
    pub op: OpKind,
    pub root: ValueId,
    pub out: ValueId,
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
pub(crate) fn mutate_vjp(e: &mut Emit, s: &MutateSite, g: ValueId, needs: &[bool]) -> Result<Vec<Option<ValueId>>, RuleError> {
    use OpKind as K;
    let need = |i: usize| needs.get(i).copied().unwrap_or(false);
    let region = if s.chain.is_empty() { g } else { e.prim(Prim::ViewOf(s.chain.to_vec()), vec![t(s.root), t(g)]) };
    let mut r: Vec<Option<ValueId>> = vec![None; s.args.len()];
    let self_grad = match s.op {
        K::CopyInplace => {
            if let (true, Some(src)) = (need(1), s.args.get(1).and_then(Arg::as_tensor)) {
                r[1] = Some(e.sum_to(region, src));
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
            None => e.un(K::ZerosLike, region),
        };
        r[0] =
            Some(if s.chain.is_empty() { written } else { e.prim(Prim::ViewScatter(s.chain.to_vec()), vec![t(s.root), t(g), t(written)]) });
    }
    Ok(r)
}
