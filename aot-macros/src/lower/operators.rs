//! Lowering of Rust's operators in the body: `+ - * /` on tensors and
//! scalars (a tensor op, or a scalar expression evaluated at call time),
//! unary `-`, `as` casts of scalars, and integer lists (`[2, -1]`).

use super::{Lower, Val};
use crate::ast::{BinOp, Expr};
use crate::diag::SpanRange;
use aot_ir::{Arg, OpKind, ScalarBinOp, ScalarExpr, ScalarTy};

impl Lower<'_> {
    /// `[a, b, ..]`: a list of integers (shapes, dims).
    pub(super) fn int_list(&mut self, items: &[Expr]) -> Val {
        let mut out = Vec::with_capacity(items.len());
        let mut poisoned = false;
        for it in items {
            match self.expr(it) {
                Val::Scalar(s, ScalarTy::Int) => out.push(s),
                Val::Poison => poisoned = true,
                other => {
                    self.errors.add(it.span(), format!("expected an integer in this list, found {}", other.describe()), None);
                    poisoned = true;
                }
            }
        }
        if poisoned {
            Val::Poison
        } else {
            Val::Ints(out)
        }
    }

    /// `-v`: the `neg` op of a tensor, or a negated scalar expression.
    pub(super) fn neg(&mut self, v: Val, span: SpanRange) -> Val {
        match v {
            Val::Tensor(t) => self.node(OpKind::Neg, vec![Arg::Tensor(t)], span),
            Val::Scalar(s, ty @ (ScalarTy::Float | ScalarTy::Int)) => Val::Scalar(ScalarExpr::Neg(Box::new(s)), ty),
            Val::Poison => Val::Poison,
            other => {
                self.errors.add(span, format!("cannot negate {}", other.describe()), None);
                Val::Poison
            }
        }
    }

    /// `v as ty` of a scalar; tensors convert with `to_dtype`.
    pub(super) fn cast(&mut self, v: Val, ty: ScalarTy, span: SpanRange) -> Val {
        match v {
            Val::Scalar(s, ScalarTy::Float | ScalarTy::Int) => Val::Scalar(ScalarExpr::Cast(ty, Box::new(s)), ty),
            Val::Poison => Val::Poison,
            other => {
                self.errors.add(
                    span,
                    format!("cannot cast {} with `as`", other.describe()),
                    Some("use `to_dtype(DType::..)` to convert a tensor".into()),
                );
                Val::Poison
            }
        }
    }

    pub(super) fn binary(&mut self, op: BinOp, l: Val, r: Val, span: SpanRange) -> Val {
        let (tensor_op, scalar_op, sym) = match op {
            BinOp::Add => (OpKind::Add, ScalarBinOp::Add, "+"),
            BinOp::Sub => (OpKind::Sub, ScalarBinOp::Sub, "-"),
            BinOp::Mul => (OpKind::Mul, ScalarBinOp::Mul, "*"),
            BinOp::Div => (OpKind::Div, ScalarBinOp::Div, "/"),
        };
        let num = |ty: ScalarTy| ty != ScalarTy::Bool;
        match (l, r) {
            (Val::Poison, _) | (_, Val::Poison) => Val::Poison,
            (Val::Tensor(a), Val::Tensor(b)) => self.node(tensor_op, vec![Arg::Tensor(a), Arg::Tensor(b)], span),
            (Val::Tensor(a), Val::Scalar(s, ty)) if num(ty) => self.node(tensor_op, vec![Arg::Tensor(a), Arg::Scalar(s)], span),
            // A scalar on the left, lowered as PyTorch's reflected operators do:
            // `s - t` is `-t + s` and `s / t` is `t.reciprocal() * s`.
            (Val::Scalar(s, ty), Val::Tensor(t)) if num(ty) => match op {
                BinOp::Add | BinOp::Mul => self.node(tensor_op, vec![Arg::Tensor(t), Arg::Scalar(s)], span),
                BinOp::Sub | BinOp::Div => {
                    let (first, then) = if op == BinOp::Sub { (OpKind::Neg, OpKind::Add) } else { (OpKind::Reciprocal, OpKind::Mul) };
                    match self.node(first, vec![Arg::Tensor(t)], span) {
                        Val::Tensor(u) => self.node(then, vec![Arg::Tensor(u), Arg::Scalar(s)], span),
                        other => other,
                    }
                }
            },
            (Val::Scalar(a, ta), Val::Scalar(b, tb)) if num(ta) && num(tb) => {
                let ty = if ta == ScalarTy::Int && tb == ScalarTy::Int { ScalarTy::Int } else { ScalarTy::Float };
                Val::Scalar(ScalarExpr::Bin(scalar_op, Box::new(a), Box::new(b)), ty)
            }
            (l, r) => {
                self.errors.add(span, format!("cannot apply `{sym}` to {} and {}", l.describe(), r.describe()), None);
                Val::Poison
            }
        }
    }
}
