//! Lowering of composite values: fields of struct parameters (`m.w1`,
//! `m.l1.w`, `m.layers[0]`), which become graph inputs named by their
//! paths, and struct literals returned by the body (`Mlp { w1: .., .. }`),
//! whose tensors become the graph's outputs and which the generated
//! function rebuilds from them (with its constant fields, such as a tensor
//! subclass's attributes, as written).

use super::{FieldPath, Lower, Val};
use crate::ast::Expr;
use aot_ir::{ScalarExpr, ScalarTy, ValueId};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

impl Lower<'_> {
    /// A field path of a struct parameter (`m.l1.w`, `m.layers[i]` with a
    /// literal or loop index): the graph input named by the path, made on
    /// first use.
    pub(super) fn field(&mut self, e: &Expr) -> Val {
        match self.field_path(e) {
            Some(path) => self.field_input(path),
            None => Val::Poison,
        }
    }

    /// `let blk = &m.blocks[l];`: the name stands for the path, which may
    /// be a struct (`blk.w` extends it) or a tensor (a use of `blk` reads
    /// it); the macro cannot see field types, so the path stays unresolved
    /// until it is used.
    pub(super) fn field_alias(&mut self, e: &Expr) -> Val {
        match self.field_path(e) {
            Some(path) => Val::Alias(path),
            None => Val::Poison,
        }
    }

    /// The path of a field access, rooted at a struct parameter or at an
    /// alias of one of its parts; `None` when an error was reported.
    fn field_path(&mut self, e: &Expr) -> Option<FieldPath> {
        let mut segments = Vec::new();
        let mut access = Vec::new();
        let mut cur = e;
        let mut prefix = loop {
            match cur {
                Expr::Field(base, member, _) => {
                    segments.push(match member {
                        syn::Member::Named(id) => id.to_string(),
                        syn::Member::Unnamed(i) => i.index.to_string(),
                    });
                    access.push(quote!(.#member));
                    cur = base;
                }
                Expr::Index(base, index, _) => {
                    let k = match self.expr(index) {
                        Val::Scalar(ScalarExpr::I64(k), ScalarTy::Int) if k >= 0 => k,
                        Val::Poison => return None,
                        Val::Scalar(_, ScalarTy::Int) => {
                            self.errors.add(
                                index.span(),
                                "the index of a `Vec` field must be known when the macro expands, but this one is known only when the function is called",
                                Some("index with an integer literal (`m.layers[0]`) or the variable of a loop with literal bounds (`for l in 0..4`); a loop over a parameter or a size is unrolled per call, after each field became an input".into()),
                            );
                            return None;
                        }
                        _ => {
                            self.errors.add(
                                index.span(),
                                "the index of a `Vec` field must be an integer literal or a loop variable",
                                Some("write `m.layers[0]`, or index with the variable of a `for` loop".into()),
                            );
                            return None;
                        }
                    };
                    segments.push(k.to_string());
                    let lit = syn::LitInt::new(&format!("{k}usize"), index.span().start);
                    access.push(quote_spanned!(index.span().start=> [#lit]));
                    cur = base;
                }
                Expr::Var(id) => match self.lookup(&id.to_string()) {
                    Some(Val::Tree(t)) => {
                        let root = self.trees[t].0.clone();
                        break FieldPath { root: t, used: id.clone(), name: root.to_string(), access: Vec::new(), span: e.span() };
                    }
                    Some(Val::Alias(p)) => break p,
                    Some(Val::Poison) => return None,
                    _ => {
                        self.not_a_field(e, id);
                        return None;
                    }
                },
                Expr::Error(_) => return None,
                _ => {
                    self.not_a_field(e, &syn::Ident::new("_", cur.span().start));
                    return None;
                }
            }
        };
        segments.reverse();
        access.reverse();
        for s in segments {
            prefix.name.push('.');
            prefix.name.push_str(&s);
        }
        prefix.access.extend(access);
        prefix.span = e.span();
        Some(prefix)
    }

    /// The graph input of a field path, made on first use.
    pub(super) fn field_input(&mut self, p: FieldPath) -> Val {
        if !self.frames.is_empty() {
            // Inside a loop body traced as a graph of its own: the input
            // belongs to the function's graph, and the body captures it.
            let level = self.frames.len();
            self.swap_function_builder();
            let v = self.field_input(p);
            self.swap_function_builder();
            return self.translate(v, 0, level);
        }
        if let Some(&v) = self.fields.get(&p.name) {
            return Val::Tensor(v);
        }
        let (ident, ty) = self.trees[p.root].clone();
        let span = self.span_id(p.span);
        let Some(v) = self.b.param(p.name.clone(), ty, span) else { return Val::Poison };
        self.fields.insert(p.name, v);
        // Spanned at the user's tokens: a field that is not a tensor is
        // reported at the access, not at the attribute.
        let (krate, used, access) = (&self.krate, &p.used, &p.access);
        let check = quote_spanned!(p.span.start=> let _: &#krate::Tensor = &#used #(#access)*;);
        match self.field_checks.iter_mut().find(|(i, _)| *i == ident) {
            Some((_, list)) => list.push(check),
            None => self.field_checks.push((ident, vec![check])),
        }
        Val::Tensor(v)
    }

    /// `w.q.t_()`: a field's metadata changes in place. As in PyTorch, that
    /// is refused for an inner tensor of a tensor subclass; the macro cannot
    /// see the field types, so rustc checks that each struct on the path
    /// implements `NotTensorSubclass`, at the receiver's tokens.
    pub(super) fn metadata_mutation_check(&mut self, recv: &Expr) {
        let on_path = match recv {
            Expr::Field(..) | Expr::Index(..) => true,
            Expr::Var(id) => matches!(self.lookup(&id.to_string()), Some(Val::Alias(_))),
            _ => false,
        };
        let Some(p) = on_path.then(|| self.field_path(recv)).flatten() else { return };
        let (ident, _) = self.trees[p.root].clone();
        let (krate, used, span) = (&self.krate, &p.used, p.span.start);
        // The root through `&*`, so that the bound names the struct, not
        // the reference to it; the tensor itself (the whole path) is no
        // struct.
        let mut checks = vec![quote_spanned!(span=> #krate::subclass::__no_metadata_mutation(&*#used);)];
        for k in 1..p.access.len() {
            let access = &p.access[..k];
            checks.push(quote_spanned!(span=> #krate::subclass::__no_metadata_mutation(&#used #(#access)*);));
        }
        match self.field_checks.iter_mut().find(|(i, _)| *i == ident) {
            Some((_, list)) => list.extend(checks),
            None => self.field_checks.push((ident, checks)),
        }
    }

    /// Field access or indexing on something that is not a struct
    /// parameter.
    fn not_a_field(&mut self, e: &Expr, root: &syn::Ident) {
        let (what, help) = match e {
            Expr::Index(..) => (
                "indexing a tensor",
                "use `select(dim, index)`, `narrow(dim, start, len)` or `slice(dim, start, end, step)`; indexing is for `Vec` fields of struct parameters (`m.layers[0]`)",
            ),
            _ => ("field access", "fields can be read from struct parameters that derive `TensorTree` (`m: &Mlp`, then `m.w1`)"),
        };
        let on = if root == "_" { "this expression".to_string() } else { format!("`{root}`") };
        self.errors.add(e.span(), format!("{what} on {on} is not supported in an `#[aot_fn]` body"), Some(help.into()));
    }

    /// `Path { field: value, .. }`: a struct of tensors (to be returned).
    pub(super) fn struct_lit(&mut self, path: &syn::Path, fields: &[(syn::Member, Expr)]) -> Val {
        let mut out = Vec::with_capacity(fields.len());
        let mut poisoned = false;
        for (member, e) in fields {
            match self.expr(e) {
                v @ (Val::Tensor(_) | Val::Struct(..)) => out.push((member.clone(), v)),
                Val::Poison => poisoned = true,
                Val::Scalar(s, ty) => match constant(&s, e.span().start) {
                    Some(lit) => out.push((member.clone(), Val::Attr(lit))),
                    None => {
                        self.not_a_struct_field(e, Val::Scalar(s, ty).describe());
                        poisoned = true;
                    }
                },
                other => {
                    self.not_a_struct_field(e, other.describe());
                    poisoned = true;
                }
            }
        }
        if poisoned {
            Val::Poison
        } else {
            Val::Struct(path.clone(), out)
        }
    }

    fn not_a_struct_field(&mut self, e: &Expr, found: &str) {
        self.errors.add(
            e.span(),
            format!("a field of a struct built in an `#[aot_fn]` body must be a tensor, a struct of tensors or a literal, found {found}"),
            Some("a non-tensor field (an attribute of a tensor subclass, `bits: 8`) is recorded when the body is traced, so it must be a literal".into()),
        );
    }
}

/// A constant scalar as an unsuffixed Rust literal (it takes the field's
/// type), spanned at `span`; `None` for a value known only at run time.
fn constant(s: &ScalarExpr, span: Span) -> Option<TokenStream> {
    let lit = match s {
        ScalarExpr::I64(k) => proc_macro2::Literal::i64_unsuffixed(*k),
        ScalarExpr::F64(x) if x.is_finite() => proc_macro2::Literal::f64_unsuffixed(*x),
        ScalarExpr::Bool(b) => return Some(if *b { quote_spanned!(span=> true) } else { quote_spanned!(span=> false) }),
        _ => return None,
    };
    let mut lit = lit;
    lit.set_span(span);
    Some(quote!(#lit))
}

/// The graph outputs of a returned struct, in field order, and the
/// expression that rebuilds it from the generated function's output
/// variables (`__aot_out0`, ...).
pub(super) fn struct_outputs(path: &syn::Path, fields: &[(syn::Member, Val)], outputs: &mut Vec<ValueId>) -> Option<TokenStream> {
    let mut parts = Vec::with_capacity(fields.len());
    for (member, v) in fields {
        let value = match v {
            Val::Tensor(t) => {
                let name = format_ident!("__aot_out{}", outputs.len(), span = Span::mixed_site());
                outputs.push(*t);
                quote!(#name)
            }
            Val::Struct(p, fs) => struct_outputs(p, fs, outputs)?,
            Val::Attr(tokens) => tokens.clone(),
            _ => return None,
        };
        parts.push(quote!(#member: #value));
    }
    Some(quote!(#path { #(#parts),* }))
}
