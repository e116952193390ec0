//! `#[derive(TensorTree)]`: the impl of `aot_runtime::TensorTree` for a
//! struct with named fields. Fields flatten in declaration order; each
//! field's type must implement the trait (`Tensor`, `Vec<..>`, another
//! derived struct), which rustc checks at the field's type. `#[buffer]`
//! marks a field's tensors as buffers, `#[skip]` leaves a field out (it is
//! cloned on rebuild).
//!
//! `#[tensor_subclass]` on the struct (optionally
//! `#[tensor_subclass(size = field, dtype = field)]`, naming the inner
//! tensors whose shape and dtype are the outer tensor's) makes it a tensor
//! subclass: its tensor fields must be `Tensor`s (rustc checks at each
//! field's type), its `#[skip]` fields are the recorded non-tensor
//! attributes (`Debug`). Every other derived type implements
//! `NotTensorSubclass`, which a metadata mutation of a field requires.

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

    let subclass = subclass_attr(input, &parsed)?;
    let name = &input.ident;
    let rt = quote!(::aot_runtime::tree);
    let metas = subclass_metas(name, &parsed, subclass.as_ref());
    let marker = match subclass {
        Some(_) => quote!(),
        None => quote!(impl ::aot_runtime::subclass::NotTensorSubclass for #name {}),
    };
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

            fn subclass_metas_into(
                &self,
                prefix: &str,
                start: &mut usize,
                out: &mut ::std::vec::Vec<::aot_runtime::subclass::SubclassCreationMeta>,
            ) {
                #metas
            }
        }

        #marker
    })
}

/// `#[tensor_subclass]` / `#[tensor_subclass(size = f, dtype = g)]`: the
/// fields named for the outer size and dtype (each must be a tensor field).
struct Subclass {
    size: Option<syn::Ident>,
    dtype: Option<syn::Ident>,
}

fn subclass_attr(input: &DeriveInput, fields: &[Field]) -> syn::Result<Option<Subclass>> {
    let Some(attr) = input.attrs.iter().find(|a| a.path().is_ident("tensor_subclass")) else { return Ok(None) };
    let mut sub = Subclass { size: None, dtype: None };
    if let syn::Meta::List(_) = &attr.meta {
        attr.parse_nested_meta(|m| {
            let slot = if m.path.is_ident("size") {
                &mut sub.size
            } else if m.path.is_ident("dtype") {
                &mut sub.dtype
            } else {
                return Err(m.error("expected `size = field` or `dtype = field`"));
            };
            let id: syn::Ident = m.value()?.parse()?;
            if !fields.iter().any(|f| !f.skip && *f.ident == id) {
                return Err(syn::Error::new(id.span(), format!("`{id}` is not a tensor field of this struct")));
            }
            *slot = Some(id);
            Ok(())
        })?;
    } else {
        attr.meta.require_path_only()?;
    }
    Ok(Some(sub))
}

/// The body of `subclass_metas_into`: a subclass records itself; any
/// other struct asks each of its fields.
fn subclass_metas(name: &syn::Ident, fields: &[Field], subclass: Option<&Subclass>) -> TokenStream {
    let rt = quote!(::aot_runtime::tree);
    let Some(sub) = subclass else {
        let each = fields.iter().filter(|f| !f.skip).map(|f| {
            let (id, ty) = (f.ident, f.ty);
            let path = id.to_string();
            quote_spanned! {ty.span()=>
                <#ty as #rt::TensorTree>::subclass_metas_into(&self.#id, &#rt::join(prefix, #path), start, out);
            }
        });
        return quote!(#(#each)*);
    };
    // Spanned at the field's type: an inner field that is not a `Tensor`
    // is reported there.
    let inner_checks = fields.iter().filter(|f| !f.skip).map(|f| {
        let (id, ty) = (f.ident, f.ty);
        quote_spanned!(ty.span()=> let _: &::aot_runtime::Tensor = &self.#id;)
    });
    let inner = fields.iter().filter(|f| !f.skip).map(|f| f.ident.to_string());
    let attrs = fields.iter().filter(|f| f.skip).map(|f| {
        let (id, ty) = (f.ident, f.ty);
        let key = id.to_string();
        quote_spanned!(ty.span()=> (::std::string::String::from(#key), ::std::format!("{:?}", self.#id)))
    });
    let opt = |f: &Option<syn::Ident>| match f {
        Some(id) => quote!(::core::option::Option::Some(&self.#id)),
        None => quote!(::core::option::Option::None),
    };
    let (size, dtype) = (opt(&sub.size), opt(&sub.dtype));
    let type_name = name.to_string();
    quote! {
        #(#inner_checks)*
        out.push(::aot_runtime::subclass::__subclass_meta(
            #type_name,
            prefix,
            start,
            &[#(#inner),*],
            ::std::vec![#(#attrs),*],
            (#size, #dtype),
        ));
    }
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
    fn subclass_records_inner_tensors_and_attributes() {
        let out = errors("#[tensor_subclass(size = q, dtype = scale)] struct W { q: Tensor, scale: Tensor, #[skip] bits: u8 }");
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("__subclass_meta"), "{out}");
        assert!(out.contains("[\"q\" , \"scale\"]"), "{out}");
        assert!(out.contains("\"bits\""), "{out}");
        assert!(!out.contains("NotTensorSubclass"), "{out}");
        let plain = errors("struct P { w: Tensor }");
        assert!(plain.contains("NotTensorSubclass for P"), "{plain}");
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
            ("#[tensor_subclass(size = n)] struct S { t: Tensor, #[skip] n: u8 }", "not a tensor field"),
            ("#[tensor_subclass(shape = t)] struct S { t: Tensor }", "expected `size = field`"),
        ] {
            let out = errors(src);
            assert!(out.contains("compile_error") && out.contains(want), "{src}: {out}");
        }
    }
}
