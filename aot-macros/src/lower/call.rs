//! Lowering of calls: a method call on a tensor (`a.matmul(&b)`) or a
//! static call (`Tensor::cat(&[..], dim)`) becomes a node of the op whose
//! signature the IR's op table gives; each argument is converted to the
//! kind that signature names.

use super::{Lower, Val};
use crate::ast::Expr;
use crate::diag::SpanRange;
use aot_ir::{Arg, OpKind, ParamKind, ScalarTy};

impl Lower<'_> {
    pub(super) fn node(&mut self, op: OpKind, args: Vec<Arg>, span: SpanRange) -> Val {
        let id = self.span_id(span);
        match self.b.op(op, args, id) {
            Some(v) => Val::Tensor(v),
            None => Val::Poison,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn method(
        &mut self,
        op: OpKind,
        method: &syn::Ident,
        recv: Val,
        recv_span: SpanRange,
        vals: Vec<Val>,
        exprs: &[Expr],
        span: SpanRange,
    ) -> Val {
        let sig = op.sig();
        let recv = match recv {
            Val::Tensor(t) => t,
            Val::Poison => return Val::Poison,
            other => {
                self.errors.add(
                    recv_span,
                    format!("`{method}` is a tensor op, but it is called on {}", other.describe()),
                    Some(format!("call it as `{}`", sig.usage)),
                );
                return Val::Poison;
            }
        };
        let mut args = vec![Arg::Tensor(recv)];
        if !self.convert_args(&format!("`{method}`"), vals.into_iter().zip(exprs), sig.params, sig.usage, &mut args) {
            return Val::Poison;
        }
        // `max_dim`/`min_dim` give `(values, indices)`: two nodes on the same
        // arguments, the values and `argmax`/`argmin`.
        let indices = match op {
            OpKind::MaxDim => Some(OpKind::Argmax),
            OpKind::MinDim => Some(OpKind::Argmin),
            _ => None,
        };
        match indices {
            Some(arg_op) => {
                let values = self.node(op, args.clone(), span);
                let indices = self.node(arg_op, args, span);
                Val::Tuple(vec![values, indices])
            }
            None => self.node(op, args, span),
        }
    }

    /// `Tensor::cat(&[&a, &b], dim)`: the list's tensors become the node's
    /// first arguments, the other arguments follow.
    pub(super) fn static_call(&mut self, op: OpKind, func: &syn::Ident, exprs: &[Expr], span: SpanRange) -> Val {
        let sig = op.sig();
        let (Some(first), Some(rest)) = (exprs.first(), exprs.get(1..)) else { return Val::Poison };
        let Expr::List(items, _) = first else {
            let v = self.expr(first);
            if !matches!(v, Val::Poison) {
                self.errors.add(
                    first.span(),
                    format!("`Tensor::{func}` expects a list of tensors here, found {}", v.describe()),
                    Some(format!("call it as `{}`", sig.usage)),
                );
            }
            return Val::Poison;
        };
        let mut args = Vec::with_capacity(items.len() + rest.len());
        let mut ok = true;
        for it in items {
            match self.expr(it) {
                Val::Tensor(t) => args.push(Arg::Tensor(t)),
                Val::Poison => ok = false,
                other => {
                    self.errors.add(
                        it.span(),
                        format!("`Tensor::{func}` expects a list of tensors, found {} in it", other.describe()),
                        Some(format!("call it as `{}`", sig.usage)),
                    );
                    ok = false;
                }
            }
        }
        if items.is_empty() {
            self.errors.add(
                exprs[0].span(),
                format!("`Tensor::{func}` needs at least one tensor"),
                Some(format!("call it as `{}`", sig.usage)),
            );
            ok = false;
        }
        let vals: Vec<(Val, &Expr)> = rest.iter().map(|e| (self.expr(e), e)).collect();
        if !self.convert_args(&format!("`Tensor::{func}`"), vals.into_iter(), &sig.params[1..], sig.usage, &mut args) || !ok {
            return Val::Poison;
        }
        self.node(op, args, span)
    }

    /// Converts each value to the kind its parameter names, appending to
    /// `args`; a mismatch is reported at its expression (`what` names the
    /// call). False if any value was poisoned or mismatched.
    fn convert_args<'e>(
        &mut self,
        what: &str,
        vals: impl Iterator<Item = (Val, &'e Expr)>,
        kinds: &[ParamKind],
        usage: &str,
        args: &mut Vec<Arg>,
    ) -> bool {
        let mut ok = true;
        for ((v, e), kind) in vals.zip(kinds) {
            match convert_arg(v, *kind) {
                Ok(a) => args.push(a),
                Err(None) => ok = false,
                Err(Some(found)) => {
                    self.errors.add(
                        e.span(),
                        format!("{what} expects {} here, found {found}", kind.describe()),
                        Some(format!("call it as `{usage}`")),
                    );
                    ok = false;
                }
            }
        }
        ok
    }
}

/// Converts a value to an argument of the given kind; `Err(Some(found))`
/// describes a mismatch, `Err(None)` a poisoned value.
fn convert_arg(v: Val, kind: ParamKind) -> Result<Arg, Option<&'static str>> {
    match (kind, v) {
        (_, Val::Poison) => Err(None),
        (ParamKind::Tensor | ParamKind::Operand, Val::Tensor(t)) => Ok(Arg::Tensor(t)),
        (ParamKind::Operand | ParamKind::Float, Val::Scalar(s, ScalarTy::Float | ScalarTy::Int)) => Ok(Arg::Scalar(s)),
        (ParamKind::Int, Val::Scalar(s, ScalarTy::Int)) => Ok(Arg::Scalar(s)),
        (ParamKind::Bool, Val::Scalar(s, ScalarTy::Bool)) => Ok(Arg::Scalar(s)),
        (ParamKind::Ints, Val::Ints(v)) => Ok(Arg::Ints(v)),
        (ParamKind::DType, Val::DType(d)) => Ok(Arg::DType(d)),
        (_, other) => Err(Some(other.describe())),
    }
}
