//! The `#[aot_fn]` attribute: traces a function of the tensor DSL into the
//! aot IR at compile time, analyses its mutations and aliasing, refuses what
//! cannot work with errors on the user's own tokens, and emits the function
//! plus `NAME::compiled()`.
//!
//! Modules, bottom to top (each uses only those below it; docs/architecture.md
//! draws the same, and a test checks it):
//! 1. `diag` (spanned errors, respanning), `tree` (the derive)
//! 2. `ast`
//! 3. `valid`
//! 4. `lower`
//! 5. `expand`
//! 6. `tests` (the unit tests, of every step)
//!
//! The pipeline has one module per step: `ast` parses the body into the
//! DSL's syntax tree, `valid` checks the signature and every call against
//! the op table, `lower` builds the IR, and `expand` runs the analyses
//! and emits the code. Use it through `aot_runtime::aot_fn`.
//!
//! `#[derive(TensorTree)]` (`tree`) lets a struct of tensors be a
//! parameter (`m: &Mlp`); use it through `aot_runtime::TensorTree`.

mod ast;
mod diag;
mod expand;
mod lower;
mod tree;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Traces an `#[aot_fn]` function at compile time. The DSL reference is the
/// `aot_runtime::dsl` module; use the attribute as `aot_runtime::aot_fn`.
#[proc_macro_attribute]
pub fn aot_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into()).into()
}

/// `#[derive(TensorTree)]`: flattens a struct of tensors into its leaves
/// (parameters, and `#[buffer]` fields as buffers; `#[skip]` leaves a field
/// out; `#[tensor_subclass]` on the struct makes it a tensor subclass). See
/// `aot_runtime::tree` and `aot_runtime::subclass`.
#[proc_macro_derive(TensorTree, attributes(buffer, skip, tensor_subclass))]
pub fn derive_tensor_tree(item: TokenStream) -> TokenStream {
    tree::derive(item.into()).into()
}
