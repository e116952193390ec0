//! Lowering of what is evaluated at call time rather than traced as ops:
//! methods of Rust's numbers on scalars (`lr * (1.0 - b2.powi(t)).sqrt()`),
//! sizes of tensors (`x.size(0)`, `x.shape()[1]`), which are read from the
//! call's arguments or, for a tensor the body computes, propagated from
//! them at call time, and `if` on a `bool` parameter, which picks
//! one branch per traced variant (the function is traced once per value of
//! its switch parameters, and the value is part of the call's guard). Loop
//! bounds, in contrast, must be known when unrolling.

use super::{Lower, Val};
use crate::ast::{Block, Expr, Special};
use crate::diag::SpanRange;
use aot_ir::{OpClass, ScalarExpr, ScalarFn, ScalarTy, ValueId};

/// The tensor whose size the body reads.
#[derive(Clone, Copy, Debug)]
pub(super) enum SizeOf {
    /// A parameter, as the call passes it: read from the argument.
    Param(usize),
    /// A tensor the body computes, or a parameter after an in-place change
    /// of its shape: propagated from the arguments' shapes at call time.
    Value(ValueId),
}

impl Lower<'_> {
    /// A method named like a scalar method or a size query, when the
    /// receiver decides that it is one; `None` means: lower it as a tensor
    /// op.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn special(
        &mut self,
        special: Special,
        method: &syn::Ident,
        recv: &Val,
        recv_span: SpanRange,
        vals: &[Val],
        exprs: &[Expr],
        span: SpanRange,
        tensor_op: bool,
    ) -> Option<Val> {
        match (special, recv) {
            (_, Val::Poison) => Some(Val::Poison),
            (Special::Size, _) => Some(self.size(method, recv, recv_span, vals.first(), exprs.first())),
            (Special::Shape, Val::Tensor(_)) => Some(match self.sized(recv, recv_span, "shape") {
                Some(of) => Val::Shape(of),
                None => Val::Poison,
            }),
            (Special::Device, Val::Tensor(t)) => Some(Val::Device(*t)),
            (Special::Scalar(f), Val::Scalar(..)) => Some(self.scalar_fn(f, recv, vals, exprs, span)),
            (Special::Scalar(_), Val::Tensor(_)) if tensor_op => None,
            (Special::Scalar(f), Val::Tensor(_)) => {
                let instead = match f {
                    ScalarFn::Powi | ScalarFn::Powf => "`a.pow(2.0)` (PyTorch's name)",
                    ScalarFn::Ln => "`a.log()` (PyTorch's name)",
                    ScalarFn::Recip => "`a.reciprocal()`",
                    ScalarFn::Min | ScalarFn::Max => "`a.minimum(&b)`/`a.maximum(&b)` elementwise, or `a.amax_dim(&[d], keepdim)`",
                    _ => "the tensor ops listed in the `aot_runtime::dsl` docs",
                };
                self.errors.add(
                    SpanRange::single(method.span()),
                    format!("`{method}` is a method of numbers, but it is called on a tensor"),
                    Some(format!("on tensors use {instead}")),
                );
                Some(Val::Poison)
            }
            (_, other) => {
                self.errors.add(
                    recv_span,
                    format!("`{method}` is called on {}", other.describe()),
                    Some("`size`, `shape` and `device` are methods of tensors; the methods of numbers apply to scalars".into()),
                );
                Some(Val::Poison)
            }
        }
    }

    fn scalar_fn(&mut self, f: ScalarFn, recv: &Val, vals: &[Val], exprs: &[Expr], span: SpanRange) -> Val {
        if vals.len() != f.arity() {
            let (arity, name) = (f.arity(), f.name());
            let usage = if arity == 1 { format!("x.{name}(y)") } else { format!("x.{name}()") };
            self.errors.add(
                span,
                format!("`{name}` takes {arity} argument{} but {} supplied", if arity == 1 { "" } else { "s" }, vals.len()),
                Some(format!("call it as `{usage}`")),
            );
            return Val::Poison;
        }
        let mut args = Vec::with_capacity(vals.len() + 1);
        let mut tys = Vec::with_capacity(vals.len() + 1);
        for (v, at) in std::iter::once((recv, None)).chain(vals.iter().zip(exprs).map(|(v, e)| (v, Some(e.span())))) {
            match v {
                Val::Scalar(e, ty) => {
                    args.push(e.clone());
                    tys.push(*ty);
                }
                Val::Poison => return Val::Poison,
                other => {
                    self.errors.add(at.unwrap_or(span), format!("`{}` expects a number here, found {}", f.name(), other.describe()), None);
                    return Val::Poison;
                }
            }
        }
        match f.result_ty(&tys) {
            Some(ty) => Val::Scalar(ScalarExpr::Fn(f, args), ty),
            None => {
                let help = match f {
                    ScalarFn::Powi => "`powi` takes an integer exponent (`x.powi(t)`); use `powf` for a float one",
                    _ => "the methods of numbers take floats (integers are widened), as `f64`'s do",
                };
                let found: Vec<&str> = tys.iter().map(|t| t.name()).collect();
                self.errors.add(span, format!("`{}` cannot be applied to {}", f.name(), found.join(" and ")), Some(help.into()));
                Val::Poison
            }
        }
    }

    /// `x.size(d)`: the parameter's size at `d`, read at call time.
    fn size(&mut self, method: &syn::Ident, recv: &Val, recv_span: SpanRange, dim: Option<&Val>, dim_expr: Option<&Expr>) -> Val {
        let Some(of) = self.sized(recv, recv_span, &method.to_string()) else { return Val::Poison };
        match dim {
            Some(Val::Scalar(e, ScalarTy::Int)) => match e.as_const_int() {
                Some(d) => Val::Scalar(self.size_expr(of, d), ScalarTy::Int),
                None => {
                    let at = dim_expr.map_or(recv_span, Expr::span);
                    self.errors.add(at, "the dim of `size` must be an integer literal or a loop variable", None);
                    Val::Poison
                }
            },
            Some(Val::Poison) => Val::Poison,
            other => {
                let at = dim_expr.map_or(recv_span, Expr::span);
                let found = other.map_or("nothing", Val::describe);
                self.errors.add(at, format!("`size` expects an integer dim here, found {found}"), Some("call it as `x.size(dim)`".into()));
                Val::Poison
            }
        }
    }

    /// `x.shape()[d]`.
    pub(super) fn shape_index(&mut self, of: SizeOf, index: &Expr) -> Val {
        match self.expr(index) {
            Val::Scalar(e, ScalarTy::Int) if e.as_const_int().is_some() => {
                let d = e.as_const_int().unwrap_or_default();
                Val::Scalar(self.size_expr(of, d), ScalarTy::Int)
            }
            Val::Poison => Val::Poison,
            _ => {
                self.errors.add(
                    index.span(),
                    "index `shape()` with an integer literal or a loop variable",
                    Some("write `x.shape()[0]`".into()),
                );
                Val::Poison
            }
        }
    }

    /// The tensor whose size `recv` reads; reports what cannot work.
    fn sized(&mut self, recv: &Val, recv_span: SpanRange, what: &str) -> Option<SizeOf> {
        let id = match recv {
            Val::Tensor(id) => *id,
            Val::Poison => return None,
            other => {
                self.errors.add(recv_span, format!("`{what}` is a method of tensors, but it is called on {}", other.describe()), None);
                return None;
            }
        };
        let g = self.b.graph();
        // A parameter's size is the argument's, until the body changes its
        // shape in place; from then on it is propagated like a computed one.
        let reshaped = || {
            g.nodes.iter().any(|n| {
                n.kind().is_some_and(|k| k.class() == OpClass::MetadataMutation) && n.args.first().and_then(|a| a.as_tensor()) == Some(id)
            })
        };
        Some(match g.param_of(id) {
            Some(p) if !reshaped() => SizeOf::Param(p),
            _ => SizeOf::Value(id),
        })
    }

    /// The call-time expression of `of`'s size at `dim`.
    fn size_expr(&mut self, of: SizeOf, dim: i64) -> ScalarExpr {
        match of {
            SizeOf::Param(p) => self.b.size(p, dim),
            SizeOf::Value(v) => self.b.value_size(v, dim),
        }
    }

    /// A loop bound: an integer expression, known now (a literal, an outer
    /// literal loop's variable: the loop is unrolled here) or only at call
    /// time (a parameter, a size: the loop is unrolled per call,
    /// `lower/loops.rs`); reports what is no integer.
    pub(super) fn loop_bound(&mut self, e: &Expr) -> Option<ScalarExpr> {
        if let Expr::Var(id) = e {
            if self.lookup(&id.to_string()).is_none() {
                crate::ast::const_bound_error(self.errors, e.span(), &id.to_string());
                return None;
            }
        }
        match self.expr(e) {
            Val::Scalar(s, ScalarTy::Int) => Some(s),
            Val::Poison => None,
            other => {
                self.errors.add(
                    e.span(),
                    format!("a loop bound must be an integer, found {}", other.describe()),
                    Some("use integer literals (`0..4`), an integer parameter (`0..n`) or a size (`0..x.size(1)`)".into()),
                );
                None
            }
        }
    }

    /// `!flag`, known when `flag` is a literal or a switch parameter.
    pub(super) fn not(&mut self, v: Val, span: SpanRange) -> Val {
        match v {
            Val::Poison => Val::Poison,
            Val::Scalar(e, ScalarTy::Bool) => match self.bool_value(&e) {
                Some(b) => Val::Scalar(ScalarExpr::Bool(!b), ScalarTy::Bool),
                None => {
                    self.errors.add(span, "`!` is supported on `bool` parameters and literals", None);
                    Val::Poison
                }
            },
            other => {
                self.errors.add(
                    span,
                    format!("cannot apply `!` to {}", other.describe()),
                    Some("compare tensors elementwise with `eq`/`ne`".into()),
                );
                Val::Poison
            }
        }
    }

    fn bool_value(&self, e: &ScalarExpr) -> Option<bool> {
        match e {
            ScalarExpr::Bool(b) => Some(*b),
            ScalarExpr::Param(i) => self.switches.get(i).copied(),
            _ => None,
        }
    }

    /// `if cond { then } else { els }`: the branch the current variant's
    /// switch values choose.
    pub(super) fn if_expr(&mut self, cond: &Expr, then: &Block, els: Option<&Expr>) -> Val {
        let chosen = match self.expr(cond) {
            Val::Poison => return Val::Poison,
            Val::Scalar(e, ScalarTy::Bool) if self.bool_value(&e).is_some() => self.bool_value(&e).unwrap_or_default(),
            other => {
                let found = match other {
                    Val::Scalar(_, ScalarTy::Bool) => "a computed bool".to_string(),
                    o => o.describe().to_string(),
                };
                self.errors.add(
                    cond.span(),
                    format!("`if` can only branch on a `bool` parameter, found {found}"),
                    Some(
                        "the function is traced once for each value of its `bool` parameters, so only they can choose a branch; \
                         a tensor's values are not known when tracing: select elementwise with `a.where_(&cond, &other)`"
                            .into(),
                    ),
                );
                return Val::Poison;
            }
        };
        if chosen {
            self.block(then)
        } else {
            match els {
                Some(e) => self.expr(e),
                None => Val::Unit,
            }
        }
    }
}

/// The names that `if` conditions and `!` use: the `bool` parameters among
/// them become switches, one traced variant per combination of values.
pub fn switch_names(block: &Block, out: &mut Vec<String>) {
    use crate::ast::Stmt;
    for stmt in &block.stmts {
        match stmt {
            Stmt::Let { init: e, .. } | Stmt::Assign { value: e, .. } | Stmt::Expr(e) => expr_switches(e, out),
            Stmt::For { start, end, body, .. } => {
                expr_switches(start, out);
                expr_switches(end, out);
                switch_names(body, out);
            }
        }
    }
    if let Some(t) = &block.tail {
        expr_switches(t, out);
    }
}

fn expr_switches(e: &Expr, out: &mut Vec<String>) {
    let cond_names = |c: &Expr, out: &mut Vec<String>| {
        let mut c = c;
        while let Expr::Not(x, _) = c {
            c = x;
        }
        if let Expr::Var(id) = c {
            let name = id.to_string();
            if !out.contains(&name) {
                out.push(name);
            }
        }
    };
    match e {
        Expr::If { cond, then, els, .. } => {
            cond_names(cond, out);
            switch_names(then, out);
            if let Some(e) = els {
                expr_switches(e, out);
            }
        }
        Expr::Not(x, _) => {
            cond_names(x, out);
        }
        Expr::Method { recv, args, .. } => {
            expr_switches(recv, out);
            args.iter().for_each(|a| expr_switches(a, out));
        }
        Expr::Static { args: xs, .. } | Expr::List(xs, _) | Expr::Tuple(xs, _) | Expr::Vec(xs, _) => {
            xs.iter().for_each(|a| expr_switches(a, out))
        }
        Expr::Binary { lhs, rhs, .. } | Expr::Index(lhs, rhs, _) => {
            expr_switches(lhs, out);
            expr_switches(rhs, out);
        }
        Expr::Neg(x, _) | Expr::Cast(x, _, _) | Expr::Field(x, _, _) => expr_switches(x, out),
        Expr::NoGrad(b, _) | Expr::Block(b, _) => switch_names(b, out),
        Expr::Struct(_, fields, _) => fields.iter().for_each(|(_, x)| expr_switches(x, out)),
        // A `bool` parameter passed on may choose the callee's branch: the
        // caller is traced for each of its values too.
        Expr::Call { args, .. } => args.iter().for_each(|(x, _)| {
            cond_names(x, out);
            expr_switches(x, out)
        }),
        Expr::Var(_) | Expr::Float(..) | Expr::Int(..) | Expr::Bool(..) | Expr::DType(..) | Expr::Error(_) => {}
    }
}
