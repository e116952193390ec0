//! Step 4, expand: run the pipeline and emit the code.
//!
//! On success the function keeps its attributes, doc comments, visibility
//! and parameters, returns `::aot_runtime::Result<..>` of its declared type
//! (another path with `#[aot_fn(crate = path)]`), and calls the runtime with
//! its arguments. Beside it, a braced struct of the same name (type
//! namespace only, so it cannot clash with the function) carries
//! `compiled()`, which deserialises the graph and static metadata embedded
//! as JSON, once, on first use; a method (`&self`) gets the associated
//! function `NAME_compiled()` instead, since an `impl` block cannot hold a
//! struct. A function whose `if`s branch on `bool` parameters is traced
//! once per combination of their values, and the call picks the variant.
//! What was traced (the variants' graphs and metadata, the parameters, and
//! the sources of the `#[aot_fn]` functions the body calls) is the hidden
//! `NAME::__aot_source()`: `compiled()` builds from it, inlining the
//! callees' graphs read from theirs; the metadata of a graph with calls is
//! computed then, once they are inlined. Each call also gets a closure,
//! never run, that rustc type-checks against the callee
//! (`lower/aot_call.rs`).
//!
//! On any error the output is the same items with a body that is never run,
//! plus one `compile_error!` per problem: callers of the function and of
//! `NAME::compiled()` still type-check, so the user sees only our messages.

use crate::diag::{respan, Errors, SpanRange};
use crate::lower::Lowered;
use crate::valid::Signature;
use crate::{ast, lower, valid};
use aot_ir::{ParamType, ReturnKind, StaticMeta};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use std::collections::HashMap;
use syn::{FnArg, ItemFn, ReturnType};

/// At most this many `bool` parameters choose branches: each combination
/// of their values is traced.
const MAX_SWITCHES: usize = 4;

/// The whole macro: `#[aot_fn]` applied to `item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let krate = crate_path(attr, &mut errors);
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) if syn::parse2::<syn::ItemImpl>(item.clone()).is_ok() || syn::parse2::<syn::ItemTrait>(item.clone()).is_ok() => {
            // The block itself is left out: its functions would be checked
            // as plain Rust and add rustc's errors to ours.
            errors.add(
                SpanRange::of(&item),
                "`#[aot_fn]` applies to single functions, not to an `impl` or `trait` block",
                Some("put `#[aot_fn]` on each method (`&self` or `&mut self`) inside the `impl` block".into()),
            );
            return errors.to_compile_errors();
        }
        Err(_) => {
            errors.add(
                SpanRange::of(&item),
                "`#[aot_fn]` can only be applied to a function or a method",
                Some("put it on a `fn` item, a free function or a method with `&self` in an `impl` block".into()),
            );
            let errs = errors.to_compile_errors();
            return quote!(#item #errs);
        }
    };
    let mut sig = valid::signature(&func.sig, &mut errors);
    if let Some(s) = &mut sig {
        s.krate = krate.clone();
    }
    let mut body = ast::parse_block(&func.block, &mut errors);
    valid::body(&mut body, &mut errors);
    let variants = sig.as_ref().and_then(|s| lower_variants(&func, s, &body, &mut errors));

    if let (Some(sig), Some(variants), true) = (&sig, &variants, errors.is_empty()) {
        for lowered in &variants.lowered {
            let mut found = Errors::default();
            let bodies = aot_ir::transform::unroll::loop_bodies(&lowered.graph);
            for g in std::iter::once(&lowered.graph).chain(bodies) {
                for d in aot_ir::analysis::refusals::check(g) {
                    found.add(lowered.span(d.span), d.message, d.help);
                }
            }
            errors.extend_unique(found);
        }
        if errors.is_empty() {
            match generate(&func, sig, variants) {
                Ok(tokens) => return tokens,
                Err(msg) => errors.add(SpanRange::of(&func.sig.ident), format!("internal error in `#[aot_fn]`: {msg}"), None),
            }
        }
    }
    fallback(&func, sig.as_ref().is_some_and(|s| s.method) || has_receiver(&func), &krate, &errors)
}

/// `#[aot_fn]` or `#[aot_fn(crate = path)]` (also `crate = "path"`, as
/// serde writes it): the path of the runtime crate for users who renamed
/// the `aot-runtime` dependency.
fn crate_path(attr: TokenStream, errors: &mut Errors) -> TokenStream {
    let default = quote!(::aot_runtime);
    if attr.is_empty() {
        return default;
    }
    let parsed = syn::parse::Parser::parse2(
        |input: syn::parse::ParseStream| {
            input.parse::<syn::Token![crate]>()?;
            input.parse::<syn::Token![=]>()?;
            let path: syn::Path = if input.peek(syn::LitStr) { input.parse::<syn::LitStr>()?.parse()? } else { input.parse()? };
            let _ = input.parse::<Option<syn::Token![,]>>()?;
            Ok(path)
        },
        attr.clone(),
    );
    match parsed {
        Ok(path) => quote!(#path),
        Err(_) => {
            errors.add(
                SpanRange::of(&attr),
                "`#[aot_fn]` takes no arguments except `crate = path`",
                Some("write `#[aot_fn]`, or `#[aot_fn(crate = my_aot)]` when the `aot-runtime` dependency is renamed".into()),
            );
            default
        }
    }
}

fn has_receiver(func: &ItemFn) -> bool {
    matches!(func.sig.inputs.first(), Some(FnArg::Receiver(_)))
}

/// The function traced once per combination of its switch parameters.
struct Variants {
    /// The switches' positions among the call's arguments.
    switch_args: Vec<usize>,
    /// Variant `k` has switch `j` true when bit `j` of `k` is set.
    lowered: Vec<Lowered>,
    /// Declarations unread in every variant.
    unused: Vec<syn::Ident>,
}

fn lower_variants(func: &ItemFn, sig: &Signature, body: &ast::Block, errors: &mut Errors) -> Option<Variants> {
    let mut names = Vec::new();
    lower::switch_names(body, &mut names);
    // (argument position, graph parameter position) of each switch: struct
    // parameters are no graph parameters (their fields are).
    let mut switches = Vec::new();
    let mut graph_pos = 0;
    for (i, p) in sig.params.iter().enumerate() {
        if !p.tree {
            if p.ty == ParamType::Bool && names.contains(&p.ident.to_string()) {
                switches.push((i, graph_pos, p.span));
            }
            graph_pos += 1;
        }
    }
    if switches.len() > MAX_SWITCHES {
        errors.add(
            switches[MAX_SWITCHES].2,
            format!("at most {MAX_SWITCHES} `bool` parameters can choose branches with `if`"),
            Some("the function is traced once for each combination of their values".into()),
        );
        return None;
    }
    let name = func.sig.ident.to_string();
    let mut lowered = Vec::new();
    let mut unused: Option<Vec<(String, syn::Ident)>> = None;
    for k in 0..1usize << switches.len() {
        let values: HashMap<usize, bool> = switches.iter().enumerate().map(|(j, &(_, g, _))| (g, k >> j & 1 == 1)).collect();
        let mut found = Errors::default();
        let l = lower::lower(&name, sig, body, values, &mut found);
        errors.extend_unique(found);
        if let Some(l) = l {
            unused = Some(match unused {
                None => l.unused.clone(),
                Some(prev) => prev.into_iter().filter(|(key, _)| l.unused.iter().any(|(k2, _)| k2 == key)).collect(),
            });
            lowered.push(l);
        }
    }
    if !errors.is_empty() {
        return None;
    }
    let unused = unused.unwrap_or_default().into_iter().map(|(_, id)| id).collect();
    Some(Variants { switch_args: switches.iter().map(|s| s.0).collect(), lowered, unused })
}

fn generate(func: &ItemFn, sig: &Signature, variants: &Variants) -> Result<TokenStream, String> {
    let krate = &sig.krate;
    let private = quote!(#krate::compiled::__private);
    let source = emit_source(func, sig, variants)?;
    let name_str = func.sig.ident.to_string();
    // Every variant returns the same kind; the first one's is the shape.
    let lowered = &variants.lowered[0];

    let args = sig.params.iter().map(|p| {
        let id = &p.ident;
        match p.ty {
            // Spanned at the parameter: a type without `TensorTree` is
            // reported there.
            _ if p.tree => {
                let krate = respan(krate.clone(), p.span.start);
                // A shared borrow is passed as it is; `&mut` is reborrowed.
                match p.ty {
                    ParamType::TensorMut => quote_spanned!(p.span.start=> #krate::Arg::tree(&*#id)),
                    _ => quote_spanned!(p.span.start=> #krate::Arg::tree(#id)),
                }
            }
            ParamType::TensorMut => quote!(#krate::Arg::from(&*#id)),
            _ => quote!(#krate::Arg::from(#id)),
        }
    });
    // Local names of the generated body are hygienic (mixed-site), so they
    // can neither capture nor shadow the user's parameters.
    let outs = quote_spanned!(Span::mixed_site()=> __aot_outputs);
    let n = lowered.graph.ret.arity();
    let names: Vec<_> = (0..n).map(|i| format_ident!("__aot_out{}", i, span = Span::mixed_site())).collect();
    let value = match lowered.graph.ret {
        _ if sig.ret_struct => lowered.ret_struct.clone().unwrap_or_default(),
        _ if sig.ret_vec => quote!(::std::vec![#(#names),*]),
        ReturnKind::Unit => quote!(()),
        ReturnKind::Single => quote!(#(#names)*),
        ReturnKind::Tuple(_) => quote!((#(#names,)*)),
    };
    let ks = 0..n;
    let checks = field_checks(func, sig, lowered);
    // Unread declarations get rustc's own `unused_variables` warning, at
    // the user's token, as they would in plain Rust.
    let unused = variants.unused.iter().map(|id| quote!({ let #id = 0_u8; }));
    let compiled = compiled_path(func, sig.method);
    let mut call_checks: Vec<&TokenStream> = Vec::new();
    for c in variants.lowered.iter().flat_map(|l| &l.call_checks) {
        if !call_checks.iter().any(|d| d.to_string() == c.to_string()) {
            call_checks.push(c);
        }
    }
    let body = quote! {{
        #checks
        #(#call_checks)*
        #(#unused)*
        #[allow(unused_mut)]
        let mut #outs = #compiled().__call_outputs(&[#(#args),*])?;
        #krate::compiled::__private::arity(&#outs, #n, #name_str)?;
        #(let #names = #outs.take(#ks, #name_str)?;)*
        ::core::result::Result::Ok(#value)
    }};
    let item_fn = emit_fn(func, krate, body);
    let source_fn = match sig.method {
        true => {
            let src = format_ident!("__aot_source_{}", func.sig.ident);
            quote!(Self::#src)
        }
        false => quote!(Self::__aot_source),
    };
    let holder = emit_holder(
        func,
        sig.method,
        krate,
        quote! {
            static COMPILED: #private::OnceLock<#krate::CompiledFn> = #private::OnceLock::new();
            COMPILED.get_or_init(|| #private::load_source(#source_fn()))
        },
        // A constant rather than a `static`: a method's table may name
        // `Self::__aot_source_NAME`, which no item inside a function can.
        quote! {
            const { &#source }
        },
    );
    Ok(quote!(#item_fn #holder))
}

/// The function's `Source` (`aot_runtime::compiled::__private`): its
/// traced variants, their metadata and the callees they inline.
fn emit_source(func: &ItemFn, sig: &Signature, variants: &Variants) -> Result<TokenStream, String> {
    let krate = &sig.krate;
    let private = quote!(#krate::compiled::__private);
    let (mut graphs, mut metas, mut tables) = (Vec::new(), Vec::new(), Vec::new());
    for lowered in &variants.lowered {
        let graph = aot_ir::checked(lowered.graph.clone(), "lowering").map_err(|e| e.to_string())?;
        // A graph with calls is analysed once the runtime has inlined them.
        let meta_json = match aot_ir::transform::inline::has_calls(&graph) {
            true => String::new(),
            false => serde_json::to_string(&StaticMeta::compute(&graph)).map_err(|e| e.to_string())?,
        };
        graphs.push(serde_json::to_string(&graph).map_err(|e| e.to_string())?);
        metas.push(meta_json);
        let callees = lowered.callees.iter().map(|p| {
            let f = crate::lower::source_fn(p);
            quote!(#f as fn() -> &'static #private::Source)
        });
        tables.push(quote!(&[#(#callees),*]));
    }
    let params = sig.params.iter().map(|p| {
        let (name, tree) = (p.ident.to_string(), p.tree);
        quote!((#name, #tree))
    });
    let (switch_args, name_str) = (&variants.switch_args, func.sig.ident.to_string());
    let source = quote! {
        #private::Source {
            name: #name_str,
            graphs: &[#(#graphs),*],
            metas: &[#(#metas),*],
            params: &[#(#params),*],
            switch_args: &[#(#switch_args),*],
            callees: &[#(#tables),*],
        }
    };
    Ok(source)
}

/// How the generated code reaches the compiled form: `NAME::compiled` for a
/// free function, `Self::NAME_compiled` for a method.
fn compiled_path(func: &ItemFn, method: bool) -> TokenStream {
    let name = &func.sig.ident;
    if method {
        let f = format_ident!("{}_compiled", name);
        quote!(Self::#f)
    } else {
        quote!(#name::compiled)
    }
}

/// For each struct parameter, a closure that is never called and borrows
/// each field the body used as a `&Tensor`: rustc reports a missing field
/// or a field of another type at the user's own tokens (`m.w3`). A
/// method's `self` cannot be a closure parameter; the closure captures it.
fn field_checks(func: &ItemFn, sig: &Signature, lowered: &Lowered) -> TokenStream {
    let checks = lowered.field_checks.iter().filter_map(|(root, accesses)| {
        if root == "self" && sig.method {
            return Some(quote!(let _ = || { #(#accesses)* };));
        }
        let ty = func.sig.inputs.iter().find_map(|a| match a {
            FnArg::Typed(pt) if matches!(&*pt.pat, syn::Pat::Ident(p) if p.ident == *root) => Some(&pt.ty),
            _ => None,
        })?;
        Some(quote! {
            let _ = |#root: #ty| {
                #(#accesses)*
            };
        })
    });
    quote!(#(#checks)*)
}

/// The items emitted when the function has errors: same names and types, a
/// body that never runs, and the errors.
fn fallback(func: &ItemFn, method: bool, krate: &TokenStream, errors: &Errors) -> TokenStream {
    let never = quote!(::core::unreachable!("`#[aot_fn]` reported a compile error"));
    let holder = emit_holder(func, method, krate, never.clone(), never.clone());
    let errs = errors.to_compile_errors();
    if method {
        // Inside an `impl` block only associated items may follow, so the
        // errors go into the body.
        let item_fn = emit_fn(func, krate, quote!({ #errs #never }));
        return quote! {
            #[allow(unused_variables, unreachable_code)]
            #item_fn
            #holder
        };
    }
    let item_fn = emit_fn(func, krate, quote!({ #never }));
    quote! {
        #[allow(unused_variables, unreachable_code)]
        #item_fn
        #holder
        #errs
    }
}

/// The function with the user's attributes, visibility and name, its
/// parameters (without `mut`, which the generated body does not need),
/// and the return type wrapped in `Result`.
fn emit_fn(func: &ItemFn, krate: &TokenStream, body: TokenStream) -> TokenStream {
    let attrs = &func.attrs;
    let vis = &func.vis;
    let name = &func.sig.ident;
    let generics = &func.sig.generics;
    let where_clause = &func.sig.generics.where_clause;
    let params = func.sig.inputs.iter().filter_map(|a| match a {
        FnArg::Typed(pt) => {
            let mut pt = pt.clone();
            if let syn::Pat::Ident(p) = &mut *pt.pat {
                p.mutability = None;
            }
            Some(quote!(#pt))
        }
        // `self` by value is reported; dropping it keeps rustc quiet.
        FnArg::Receiver(r) if r.reference.is_none() || r.colon_token.is_some() => None,
        FnArg::Receiver(r) => Some(quote!(#r)),
    });

    let ret = match &func.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    quote! {
        #(#attrs)*
        #vis fn #name #generics (#(#params),*) -> #krate::Result<#ret> #where_clause #body
    }
}

/// The item that carries the compiled form: for a free function, a braced
/// struct of the same name (type namespace only) with `NAME::compiled()`;
/// for a method, the associated function `NAME_compiled()` beside it.
fn emit_holder(func: &ItemFn, method: bool, krate: &TokenStream, compiled_body: TokenStream, source_body: TokenStream) -> TokenStream {
    let source = quote!(&'static #krate::compiled::__private::Source);
    let vis = &func.vis;
    let name = &func.sig.ident;
    // The holder exists exactly when the function does.
    let cfgs: Vec<_> = func.attrs.iter().filter(|a| a.path().is_ident("cfg")).collect();
    if method {
        let f = format_ident!("{}_compiled", name);
        let src = format_ident!("__aot_source_{}", name);
        let doc = format!("The compiled form of the `#[aot_fn]` method `{name}`: its traced graph and metadata.");
        return quote! {
            #(#cfgs)*
            #[doc = #doc]
            #[allow(dead_code, non_snake_case)]
            #vis fn #f() -> &'static #krate::CompiledFn {
                #compiled_body
            }

            #(#cfgs)*
            /// What the macro traced, for the methods that inline this one
            /// (`self.NAME(..)`).
            #[doc(hidden)]
            #[allow(dead_code, non_snake_case)]
            #vis fn #src() -> #source {
                #source_body
            }
        };
    }
    let doc = format!("The compiled form of the `#[aot_fn]` function `{name}`: `{name}::compiled()` gives its traced graph and metadata.");
    quote! {
        #(#cfgs)*
        #[doc = #doc]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #name {}

        #(#cfgs)*
        #[allow(dead_code)]
        impl #name {
            /// The traced graph and static metadata, built on first use.
            pub fn compiled() -> &'static #krate::CompiledFn {
                #compiled_body
            }

            /// What the macro traced, for the callers that inline this
            /// function.
            #[doc(hidden)]
            pub fn __aot_source() -> #source {
                #source_body
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(src: &str) -> Vec<String> {
        let item: TokenStream = src.parse().unwrap();
        let out = expand(TokenStream::new(), item).to_string();
        out.split("compile_error !").skip(1).map(|s| s.split(" }").next().unwrap_or("").to_string()).collect()
    }

    #[test]
    fn good_function_expands_without_errors() {
        let out = expand(
            TokenStream::new(),
            "pub fn f(a: &mut Tensor, b: &Tensor, lr: f64) -> (Tensor, Tensor) { a.mul_(2.0); let c = a + b * lr; (c, a.view(&[-1])) }"
                .parse()
                .unwrap(),
        );
        let s = out.to_string();
        assert!(!s.contains("compile_error"), "{s}");
        assert!(s.contains("struct f"), "{s}");
        assert!(s.contains(":: aot_runtime :: Result < (Tensor , Tensor) >"), "{s}");
    }

    #[test]
    fn all_errors_are_reported_together() {
        let errs = errors_of("fn f(a: &Tensor) -> Tensor { let b = a.clone(); a.frobnicate(); a.sum_dim(&[0]) }");
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].contains("copy"));
        assert!(errs[1].contains("unknown op"));
        assert!(errs[2].contains("takes 2 arguments"));
    }

    #[test]
    fn refusals_become_errors() {
        let errs = errors_of("fn f(a: &Tensor) { a.mul_(2.0); }");
        assert_eq!(errs.len(), 1);
        assert!(errs[0].contains("&mut Tensor"), "{errs:?}");
    }

    #[test]
    fn never_panics_on_odd_items() {
        for src in [
            "struct S;",
            "fn f(self) {}",
            "fn f<T>(x: T) -> T { x }",
            "async fn f() {}",
            "fn f() -> Tensor {}",
            "fn f(x: &Tensor) -> Tensor { x.view(&[a]) }",
            "fn f() { for _ in 0..1000000000000 {} }",
        ] {
            let out = expand(TokenStream::new(), src.parse().unwrap()).to_string();
            assert!(out.contains("compile_error"), "{src}: {out}");
        }
        // Shapes the analysis does not understand are left to the runtime.
        let out = expand(TokenStream::new(), "fn f(x: &mut Tensor) { x.copy_(&x.permute(&[7, 0])); }".parse().unwrap());
        assert!(!out.to_string().contains("compile_error"));
    }
}
