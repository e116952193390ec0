//! Step 4, expand: run the pipeline and emit the code.
//!
//! On success the function keeps its attributes, doc comments, visibility
//! and parameters, returns `::aot_runtime::Result<..>` of its declared type,
//! and calls the runtime with its arguments. Beside it, a braced struct of
//! the same name (type namespace only, so it cannot clash with the function)
//! carries `compiled()`, which deserialises the graph and static metadata
//! embedded as JSON, once, on first use.
//!
//! On any error the output is the same items with a body that is never run,
//! plus one `compile_error!` per problem: callers of the function and of
//! `NAME::compiled()` still type-check, so the user sees only our messages.

use crate::diag::{Errors, SpanRange};
use crate::lower::Lowered;
use crate::valid::Signature;
use crate::{ast, lower, valid};
use aot_ir::{ParamType, ReturnKind, StaticMeta};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{FnArg, ItemFn, ReturnType};

/// The whole macro: `#[aot_fn]` applied to `item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    if !attr.is_empty() {
        errors.add(SpanRange::of(&attr), "`#[aot_fn]` takes no arguments", Some("write `#[aot_fn]`".into()));
    }
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            errors.add(SpanRange::of(&item), "`#[aot_fn]` can only be applied to a function", None);
            let errs = errors.to_compile_errors();
            return quote!(#item #errs);
        }
    };
    let sig = valid::signature(&func.sig, &mut errors);
    let mut body = ast::parse_block(&func.block, &mut errors);
    valid::body(&mut body, &mut errors);
    let lowered = sig.as_ref().and_then(|s| lower::lower(&func.sig.ident.to_string(), s, &body, &mut errors));

    if let (Some(sig), Some(lowered), true) = (&sig, &lowered, errors.is_empty()) {
        for d in aot_ir::analysis::refusals::check(&lowered.graph) {
            errors.add(lowered.span(d.span), d.message, d.help);
        }
        if errors.is_empty() {
            match generate(&func, sig, lowered) {
                Ok(tokens) => return tokens,
                Err(msg) => errors.add(SpanRange::of(&func.sig.ident), format!("internal error in `#[aot_fn]`: {msg}"), None),
            }
        }
    }
    fallback(&func, &errors)
}

fn generate(func: &ItemFn, sig: &Signature, lowered: &Lowered) -> Result<TokenStream, String> {
    let graph = aot_ir::checked(lowered.graph.clone(), "lowering").map_err(|e| e.to_string())?;
    let meta = StaticMeta::compute(&graph);
    let graph_json = serde_json::to_string(&graph).map_err(|e| e.to_string())?;
    let meta_json = serde_json::to_string(&meta).map_err(|e| e.to_string())?;

    let name = &func.sig.ident;
    let name_str = name.to_string();
    let args = sig.params.iter().map(|p| {
        let id = &p.ident;
        match p.ty {
            // Spanned at the parameter: a type without `TensorTree` is
            // reported there.
            _ if p.tree => quote_spanned!(p.span.start=> ::aot_runtime::Arg::tree(&*#id)),
            ParamType::TensorMut => quote!(::aot_runtime::Arg::from(&*#id)),
            _ => quote!(::aot_runtime::Arg::from(#id)),
        }
    });
    // Local names of the generated body are hygienic (mixed-site), so they
    // can neither capture nor shadow the user's parameters.
    let outs = quote_spanned!(Span::mixed_site()=> __aot_outputs);
    let n = lowered.graph.ret.arity();
    let names: Vec<_> = (0..n).map(|i| format_ident!("__aot_out{}", i, span = Span::mixed_site())).collect();
    let value = match lowered.graph.ret {
        _ if sig.ret_struct => lowered.ret_struct.clone().unwrap_or_default(),
        ReturnKind::Unit => quote!(()),
        ReturnKind::Single => quote!(#(#names)*),
        ReturnKind::Tuple(_) => quote!((#(#names,)*)),
    };
    let ks = 0..n;
    let checks = field_checks(func, lowered);
    let body = quote! {{
        #checks
        #[allow(unused_mut)]
        let mut #outs = #name::compiled().__call_outputs(&[#(#args),*])?;
        ::aot_runtime::compiled::__private::arity(&#outs, #n, #name_str)?;
        #(let #names = #outs.take(#ks, #name_str)?;)*
        ::core::result::Result::Ok(#value)
    }};
    let item_fn = emit_fn(func, body);
    let load = if sig.params.iter().any(|p| p.tree) {
        let params = sig.params.iter().map(|p| {
            let (name, tree) = (p.ident.to_string(), p.tree);
            quote!((#name, #tree))
        });
        quote!(::aot_runtime::compiled::__private::load_tree(#graph_json, #meta_json, &[#(#params),*]))
    } else {
        quote!(::aot_runtime::compiled::__private::load(#graph_json, #meta_json))
    };
    let holder = emit_holder(
        func,
        quote! {
            static COMPILED: ::aot_runtime::compiled::__private::OnceLock<::aot_runtime::CompiledFn> =
            ::aot_runtime::compiled::__private::OnceLock::new();
            COMPILED.get_or_init(|| #load)
        },
    );
    Ok(quote!(#item_fn #holder))
}

/// For each struct parameter, a closure that is never called and borrows
/// each field the body used as a `&Tensor`: rustc reports a missing field
/// or a field of another type at the user's own tokens (`m.w3`).
fn field_checks(func: &ItemFn, lowered: &Lowered) -> TokenStream {
    let checks = lowered.field_checks.iter().filter_map(|(root, accesses)| {
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
fn fallback(func: &ItemFn, errors: &Errors) -> TokenStream {
    let never = quote!(::core::unreachable!("`#[aot_fn]` reported a compile error"));
    let item_fn = emit_fn(func, quote!({ #never }));
    let holder = emit_holder(func, never.clone());
    let errs = errors.to_compile_errors();
    quote! {
        #[allow(unused_variables, unreachable_code)]
        #item_fn
        #holder
        #errs
    }
}

/// The function with the user's attributes, visibility and name, its
/// parameters (without `mut`, which the generated body does not need, and
/// without receivers, which a free function cannot have), and the return
/// type wrapped in `Result`.
fn emit_fn(func: &ItemFn, body: TokenStream) -> TokenStream {
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
        FnArg::Receiver(_) => None,
    });
    let ret = match &func.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    quote! {
        #(#attrs)*
        #vis fn #name #generics (#(#params),*) -> ::aot_runtime::Result<#ret> #where_clause #body
    }
}

/// The type-namespace item that carries `NAME::compiled()`.
fn emit_holder(func: &ItemFn, compiled_body: TokenStream) -> TokenStream {
    let vis = &func.vis;
    let name = &func.sig.ident;
    // The holder exists exactly when the function does.
    let cfgs: Vec<_> = func.attrs.iter().filter(|a| a.path().is_ident("cfg")).collect();
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
            pub fn compiled() -> &'static ::aot_runtime::CompiledFn {
                #compiled_body
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
