//! Lowering of `Tensor::arange(..)`, a factory: a tensor made from
//! scalars alone. PyTorch's short forms fill in its defaults (start 0,
//! step 1; `I64` when every bound is an integer, else `F32`, as
//! `torch.arange` does with its default dtype); the device is the one of
//! `&x.device()` when given, else of the function's first tensor
//! parameter (a call's tensors share one device). The node's receiver is
//! that tensor, read for its device only (`Node::is_meta_arg`), so every
//! stage handles the node as it handles `zeros_like`.

use super::{Lower, Val};
use crate::ast::Expr;
use crate::diag::SpanRange;
use aot_ir::{Arg, DType, OpKind, ScalarExpr, ScalarTy};

impl Lower<'_> {
    /// `Tensor::arange(end)`, `(start, end)`, `(start, end, step)`, then
    /// `dtype`, then `&x.device()` (validation checked the count).
    pub(super) fn factory_call(&mut self, op: OpKind, exprs: &[Expr], span: SpanRange) -> Val {
        let usage = op.sig().usage;
        let vals: Vec<Val> = exprs.iter().map(|e| self.expr(e)).collect();
        if vals.iter().any(|v| matches!(v, Val::Poison)) {
            return Val::Poison;
        }
        let mut bounds = Vec::with_capacity(3);
        let mut all_int = true;
        for (v, e) in vals.iter().zip(exprs).take(3) {
            match v {
                Val::Scalar(s, ty @ (ScalarTy::Int | ScalarTy::Float)) => {
                    all_int &= *ty == ScalarTy::Int;
                    bounds.push(s.clone());
                }
                other => {
                    let msg = format!("`Tensor::arange` expects a number here, found {}", other.describe());
                    self.errors.add(e.span(), msg, Some(format!("call it as `{usage}`")));
                    return Val::Poison;
                }
            }
        }
        let (start, end, step) = match bounds.len() {
            1 => (ScalarExpr::I64(0), bounds.remove(0), ScalarExpr::I64(1)),
            2 => (bounds.remove(0), bounds.remove(0), ScalarExpr::I64(1)),
            _ => (bounds.remove(0), bounds.remove(0), bounds.remove(0)),
        };
        let dtype = match vals.get(3) {
            Some(Val::DType(d)) => *d,
            Some(other) => return self.factory_mismatch(&exprs[3], "a dtype like `DType::F32`", other.describe(), usage),
            None if all_int => DType::I64,
            None => DType::F32,
        };
        let device = match vals.get(4) {
            Some(Val::Device(t)) => *t,
            Some(other) => return self.factory_mismatch(&exprs[4], "a device like `&x.device()`", other.describe(), usage),
            None => match self.b.graph().params.iter().find_map(|p| p.value) {
                Some(t) => t,
                None => {
                    self.errors.add(
                        span,
                        "`Tensor::arange` takes the device of the function's tensor parameters, and this function has none",
                        Some("add a tensor parameter and pass its device, `Tensor::arange(start, end, step, DType::I64, &x.device())`, or make the tensor outside the function and pass it in".into()),
                    );
                    return Val::Poison;
                }
            },
        };
        let args = vec![Arg::Tensor(device), Arg::Scalar(start), Arg::Scalar(end), Arg::Scalar(step), Arg::DType(dtype)];
        self.node(op, args, span)
    }

    fn factory_mismatch(&mut self, e: &Expr, want: &str, found: &str, usage: &str) -> Val {
        self.errors.add(e.span(), format!("`Tensor::arange` expects {want} here, found {found}"), Some(format!("call it as `{usage}`")));
        Val::Poison
    }
}
