//! `#[derive(TensorTree)]`: the impl of `aot_runtime::TensorTree` for a
//! struct with named fields. Fields flatten in declaration order; each
//! field's type must implement the trait (`Tensor`, `Vec<..>`, another
//! derived struct), which rustc checks at the field's type. `#[buffer]`
//! marks a field's tensors as buffers, `#[skip]` leaves a field out (it is
//! cloned on rebuild).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

/// The derive; errors become `compile_error!`s on the offending tokens.
pub fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    match expand(&input) {
        Ok(t) => t,
        Err(e) => e.to_compile_error(),
    }
}

struct Field<'a> {
    ident: &'a syn::Ident,
    ty: &'a syn::Type,
    buffer: bool,
    skip: bool,
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    const WHAT: &str = "`#[derive(TensorTree)]` supports structs with named fields";
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(n) => &n.named,
            Fields::Unnamed(u) => return Err(syn::Error::new(u.span(), format!("{WHAT}; name the fields: `struct S {{ w: Tensor }}`"))),
            Fields::Unit => return Err(syn::Error::new(input.ident.span(), format!("{WHAT}; this struct has no fields"))),
        },
        Data::Enum(e) => return Err(syn::Error::new(e.enum_token.span, format!("{WHAT}, not enums"))),
        Data::Union(u) => return Err(syn::Error::new(u.union_token.span, format!("{WHAT}, not unions"))),
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(input.generics.span(), "`#[derive(TensorTree)]` does not support generic structs"));
    }
    let mut parsed = Vec::new();
    for f in fields {
        let (mut buffer, mut skip) = (false, false);
        for a in &f.attrs {
            let flag = if a.path().is_ident("buffer") {
                &mut buffer
            } else if a.path().is_ident("skip") {
                &mut skip
            } else {
                continue;
            };
            a.meta.require_path_only()?;
            *flag = true;
        }
        if buffer && skip {
            return Err(syn::Error::new(f.span(), "a field cannot be both `#[buffer]` and `#[skip]`"));
        }
        let ident = f.ident.as_ref().ok_or_else(|| syn::Error::new(f.span(), WHAT))?;
        parsed.push(Field { ident, ty: &f.ty, buffer, skip });
    }

    let name = &input.ident;
    let rt = quote!(::aot_runtime::tree);
    let flatten = parsed.iter().filter(|f| !f.skip).map(|f| {
        let (id, ty, buffer) = (f.ident, f.ty, f.buffer);
        let path = id.to_string();
        // Spanned at the field's type: a type without the trait is
        // reported there.
        quote_spanned! {ty.span()=>
            <#ty as #rt::TensorTree>::flatten_into(&self.#id, &#rt::join(prefix, #path), buffer || #buffer, out);
        }
    });
    let rebuild = parsed.iter().map(|f| {
        let (id, ty) = (f.ident, f.ty);
        if f.skip {
            quote_spanned!(ty.span()=> #id: ::core::clone::Clone::clone(&self.#id),)
        } else {
            quote_spanned!(ty.span()=> #id: <#ty as #rt::TensorTree>::rebuild(&self.#id, leaves)?,)
        }
    });
    Ok(quote! {
        impl #rt::TensorTree for #name {
            fn flatten_into(&self, prefix: &str, buffer: bool, out: &mut ::std::vec::Vec<#rt::Leaf>) {
                #(#flatten)*
            }

            fn rebuild(
                &self,
                leaves: &mut dyn ::core::iter::Iterator<Item = ::aot_runtime::Tensor>,
            ) -> ::aot_runtime::Result<Self> {
                ::core::result::Result::Ok(#name { #(#rebuild)* })
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(src: &str) -> String {
        derive(src.parse().unwrap()).to_string()
    }

    #[test]
    fn fields_in_order_with_kinds() {
        let out = errors("struct S { w: Tensor, #[buffer] m: Tensor, #[skip] eps: f64, l: Vec<Tensor> }");
        assert!(!out.contains("compile_error"), "{out}");
        let (w, m, l) = (out.find("\"w\"").unwrap(), out.find("\"m\"").unwrap(), out.find("\"l\"").unwrap());
        assert!(w < m && m < l, "{out}");
        assert!(!out.contains("\"eps\""), "{out}");
        assert!(out.contains("buffer || true"), "{out}");
        assert!(out.contains("eps : :: core :: clone :: Clone :: clone"), "{out}");
    }

    #[test]
    fn refusals() {
        for (src, want) in [
            ("struct S(Tensor);", "name the fields"),
            ("struct S;", "no fields"),
            ("enum E { A }", "not enums"),
            ("struct S<T> { t: T }", "generic"),
            ("struct S { #[buffer] #[skip] t: Tensor }", "both"),
            ("struct S { #[buffer(x)] t: Tensor }", "unexpected"),
        ] {
            let out = errors(src);
            assert!(out.contains("compile_error") && out.contains(want), "{src}: {out}");
        }
    }
}
