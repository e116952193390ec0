//! Calls in a body that are not tensor ops: calls of other `#[aot_fn]`
//! functions (`helper(&x)`, `self.other(&x)`) and methods of Rust's numbers
//! written as associated functions (`f64::powi(b, t)`).

use super::{parse_expr, Expr};
use crate::diag::{Errors, SpanRange};
use syn::Ident;

/// `NAME` of a path `f64::NAME` (or of another number type, `std::` in
/// front allowed): a method of Rust's numbers called as an associated
/// function.
pub(super) fn number_method(func: &syn::Expr) -> Option<&Ident> {
    let syn::Expr::Path(p) = func else { return None };
    let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
    let (ty, name) = match segs.as_slice() {
        [ty, name] => (ty, name),
        [std, ty, name] if std.ident == "std" || std.ident == "core" => (ty, name),
        _ => return None,
    };
    let numbers = ["f64", "f32", "i64", "i32", "usize", "isize", "u64", "u32"];
    (p.qself.is_none() && numbers.iter().any(|n| ty.ident == n) && name.ident.to_string().chars().next().is_some_and(char::is_lowercase))
        .then_some(&name.ident)
}

/// An argument of a call of an `#[aot_fn]` function, with whether it is
/// passed `&mut`.
pub(super) fn call_arg(a: &syn::Expr, errors: &mut Errors) -> (Expr, bool) {
    match a {
        syn::Expr::Reference(r) => (parse_expr(&r.expr, errors), r.mutability.is_some()),
        other => (parse_expr(other, errors), false),
    }
}

/// `self.name(args)` in a method: a call of the `#[aot_fn]` method
/// `Self::name`, with `self` as its first argument (a struct argument,
/// inlined like any call). A method of `self` is never a tensor op:
/// `self` is a struct of tensors.
pub(super) fn self_method_call(m: &syn::ExprMethodCall, span: SpanRange, errors: &mut Errors) -> Option<Expr> {
    let syn::Expr::Path(p) = &*m.receiver else { return None };
    let recv = p.path.get_ident().filter(|id| *id == "self")?;
    let name = &m.method;
    let path: syn::Path = syn::parse_quote_spanned!(name.span()=> Self::#name);
    let mut args = vec![(Expr::Var(recv.clone()), false)];
    args.extend(m.args.iter().map(|a| call_arg(a, errors)));
    Some(Expr::Call { path, args, span })
}
