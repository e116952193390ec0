//! Lowering of calls of other `#[aot_fn]` functions (`gelu(&x, 0.5)`,
//! `layers::block(&x, &m.blocks[l])`). The macro cannot see the callee's
//! body, so the call becomes a call node naming the callee
//! ([`aot_ir::transform::inline::CallSite`]); the runtime inlines the
//! callee's graph in its place before anything analyses the graph.
//!
//! What rustc can check about the call, it checks: the generated function
//! holds a closure, never run, that calls the real callee with stand-ins
//! of the arguments' kinds (`&Tensor`, `&mut Tensor`, a float, the struct
//! path itself) and binds its result as the body uses it, all spanned at
//! the user's tokens. So the number of arguments, `&` where the callee
//! takes `&mut`, a tensor for a scalar, binding a pair to one name, and a
//! helper that is not `#[aot_fn]` are compile errors.

use super::{Lower, Val};
use crate::ast::Expr;
use crate::diag::{respan, SpanRange};
use aot_ir::op::AliasEffect;
use aot_ir::transform::inline::{CallSite, TreeArg};
use aot_ir::{Arg, ParamType, ScalarExpr, ScalarTy, ValueDef, ValueId};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};

/// The name a call of `path` would have if it called the function being
/// traced: `name` for a free function, `Self::name` for a method.
fn own_name(path: &syn::Path) -> Option<&syn::Ident> {
    match path.segments.iter().collect::<Vec<_>>().as_slice() {
        [f] => Some(&f.ident),
        [s, f] if s.ident == "Self" => Some(&f.ident),
        _ => None,
    }
}

/// The function giving the `Source` of the callee at `path`: the
/// `__aot_source` of a free function's holder (`layers::block`), or the
/// `__aot_source_NAME` beside a method (`Self::step`, `Block::forward`:
/// a path whose last but one segment is a type, capitalised as Rust
/// names types, where a module's name is lower case).
pub(crate) fn source_fn(path: &TokenStream) -> TokenStream {
    let Ok(p) = syn::parse2::<syn::Path>(path.clone()) else { return quote!(#path::__aot_source) };
    let n = p.segments.len();
    let is_type = n >= 2 && p.segments[n - 2].ident.to_string().starts_with(|c: char| c.is_ascii_uppercase());
    if !is_type {
        return quote!(#path::__aot_source);
    }
    let mut ty = p.clone();
    let last = ty.segments.pop().map(|s| s.into_value().ident);
    ty.segments.pop_punct();
    let f = last.map(|f| quote::format_ident!("__aot_source_{}", f, span = f.span()));
    quote!(#ty::#f)
}

/// What the caller does with a call's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Nothing: the call is a statement.
    Discard,
    /// This many tensors: 0 is `()`, 1 a tensor, more a tuple.
    Values(usize),
}

impl Lower<'_> {
    /// A call of the `#[aot_fn]` function `path`.
    pub(super) fn fn_call(&mut self, path: &syn::Path, args: &[(Expr, bool)], span: SpanRange, want: Want) -> Val {
        let callee = path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::");
        if own_name(path).is_some_and(|id| *id == self.b.graph().name) {
            self.errors.add(
                SpanRange::of(path),
                format!("`{callee}` calls itself: recursion is not supported in an `#[aot_fn]` body"),
                Some("the callee's graph is inlined into the caller's, so a call chain must end; unroll it with a `for` loop".into()),
            );
            return Val::Poison;
        }
        let mut node_args = Vec::new();
        let mut trees = Vec::new();
        let mut proxies = Vec::new();
        let mut ok = true;
        for (pos, (e, mutref)) in args.iter().enumerate() {
            // Each stand-in at its argument: rustc's errors point there.
            let at = e.span().start;
            let krate = respan(self.krate.clone(), at);
            let (amp, proxy_ty) = match mutref {
                true => (quote_spanned!(at=> &mut), quote_spanned!(at=> &mut #krate::Tensor)),
                false => (quote_spanned!(at=> &), quote_spanned!(at=> &#krate::Tensor)),
            };
            match self.call_arg(e) {
                Val::Alias(p) => {
                    let (used, access) = (&p.used, &p.access);
                    proxies.push(quote_spanned!(at=> #amp #used #(#access)*));
                    trees.push(TreeArg { pos, path: p.name, ty: self.trees[p.root].1 });
                }
                Val::Tree(t) => {
                    let (ident, ty) = self.trees[t].clone();
                    // `self` is passed as it is declared (`self.step(..)`
                    // writes `&self` or `&mut self` for it).
                    let ident = syn::Ident::new(&ident.to_string(), at);
                    let amp = match (ident == "self", ty) {
                        (true, ParamType::TensorMut) => quote_spanned!(at=> &mut),
                        (true, _) => quote_spanned!(at=> &),
                        (false, _) => amp,
                    };
                    proxies.push(quote_spanned!(at=> #amp *#ident));
                    trees.push(TreeArg { pos, path: ident.to_string(), ty });
                }
                Val::Tensor(v) => {
                    if *mutref && !self.mutable_root(v, &callee, e.span()) {
                        ok = false;
                    }
                    node_args.push(Arg::Tensor(v));
                    proxies.push(quote_spanned!(at=> #krate::compiled::__private::proxy::<#proxy_ty>()));
                }
                Val::Scalar(s, ty) => {
                    let s = self.switch_value(s);
                    node_args.push(Arg::Scalar(s));
                    proxies.push(match ty {
                        ScalarTy::Float => quote_spanned!(at=> #krate::compiled::__private::float_arg()),
                        ScalarTy::Int => quote_spanned!(at=> #krate::compiled::__private::int_arg()),
                        ScalarTy::Bool => quote_spanned!(at=> #krate::compiled::__private::proxy::<bool>()),
                    });
                }
                Val::Poison => ok = false,
                other => {
                    self.errors.add(
                        e.span(),
                        format!("`{callee}` can be passed tensors, scalars and structs of tensors, but this is {}", other.describe()),
                        None,
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return Val::Poison;
        }
        let on_self =
            path.segments.first().is_some_and(|s| s.ident == "Self") && trees.first().is_some_and(|t| t.pos == 0 && t.path == "self");
        self.call_check(path, &proxies, span, want, on_self);
        let key = path.to_token_stream().to_string();
        let index = match self.callees.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.callees.push((key, path.to_token_stream()));
                self.callees.len() - 1
            }
        };
        let site = CallSite { callee, index, trees, results: None, body: None };
        let id = self.span_id(span);
        let results = match want {
            Want::Discard => None,
            Want::Values(n) => Some(n),
        };
        let vals = self.b.call_fn(site, node_args, results, id);
        match want {
            Want::Discard | Want::Values(0) => Val::Unit,
            Want::Values(1) => Val::Tensor(vals[0]),
            Want::Values(_) => Val::Tuple(vals.into_iter().map(Val::Tensor).collect()),
        }
    }

    /// An argument: a struct path stays a path (the callee decides whether
    /// it is a struct or a tensor field); anything else is evaluated.
    fn call_arg(&mut self, e: &Expr) -> Val {
        match e {
            Expr::Field(..) => self.field_alias(e),
            Expr::Index(base, ..) if !matches!(&**base, Expr::Method { special: Some(crate::ast::Special::Shape), .. }) => {
                self.field_alias(e)
            }
            Expr::Var(id) => match self.lookup(&id.to_string()) {
                Some(v @ (Val::Alias(_) | Val::Tree(_))) => v,
                _ => self.expr(e),
            },
            _ => self.expr(e),
        }
    }

    /// A `bool` switch parameter passed on is its value in this variant,
    /// so the callee's branch on it is chosen when inlining.
    fn switch_value(&self, s: ScalarExpr) -> ScalarExpr {
        match s {
            ScalarExpr::Param(i) => self.switches.get(&i).map_or(ScalarExpr::Param(i), |&b| ScalarExpr::Bool(b)),
            other => other,
        }
    }

    /// Whether a tensor passed `&mut` may be written: not an input declared
    /// `&Tensor` nor a view of one (reported at `span`).
    fn mutable_root(&mut self, v: ValueId, callee: &str, span: SpanRange) -> bool {
        let g = self.b.graph();
        let mut cur = v;
        let param = loop {
            match g.values[cur.index()].def {
                ValueDef::Param(p) => break p,
                ValueDef::Node(n) => match (g.nodes[n].kind(), g.nodes[n].receiver()) {
                    (Some(op), Some(r)) if matches!(op.alias_effect(), AliasEffect::View | AliasEffect::Detach) => cur = r,
                    _ => return true,
                },
            }
        };
        let p = &g.params[param];
        if p.ty != ParamType::Tensor {
            return true;
        }
        let through = if cur == v { String::new() } else { format!(" (through a view of it, `{}`)", g.value_name(v)) };
        let name = p.name.clone();
        self.errors.add(
            span,
            format!("`&mut` passes input `{name}`{through} to `{callee}` for writing, but `{name}` is declared `&Tensor`"),
            Some(format!("declare it `&mut Tensor` to allow mutation: `{name}: &mut Tensor`")),
        );
        false
    }

    /// The closure rustc type-checks for a call (see the module docs).
    fn call_check(&mut self, path: &syn::Path, proxies: &[TokenStream], span: SpanRange, want: Want, on_self: bool) {
        let at = span.start;
        let krate = &respan(self.krate.clone(), at);
        let ty = match want {
            Want::Discard => quote!(),
            Want::Values(0) => quote!(: ()),
            Want::Values(1) => quote!(: #krate::Tensor),
            Want::Values(n) => {
                let ts = (0..n).map(|_| quote!(#krate::Tensor));
                quote!(: (#(#ts,)*))
            }
        };
        // `self.step(..)` is checked as written, so that rustc's own
        // error for a `&mut self` method called from `&self` is the one
        // the user sees.
        let call = match (own_name(path), path.segments.len(), proxies.split_first()) {
            (Some(name), 2, Some((_, rest))) if on_self => quote_spanned!(at=> self.#name(#(#rest),*)),
            _ => quote_spanned!(at=> #path(#(#proxies),*)),
        };
        let ty = respan(ty, at);
        let check = quote_spanned! {at=>
            let _ = || {
                // A callee returning `()` binds `()`: that is the check.
                #[allow(clippy::let_unit_value)]
                let _r #ty = #krate::compiled::__private::aot_fn_result(#call);
            };
        };
        let key = check.to_string();
        if !self.call_checks.iter().any(|c| c.to_string() == key) {
            self.call_checks.push(check);
        }
    }
}
