//! Diagnostics: spanned errors collected across all steps and emitted
//! together, so the user sees every problem of the function in one build.
//!
//! Stable Rust has no `proc_macro::Diagnostic`, so an error is a
//! `compile_error!` whose tokens carry the first and last span of the
//! offending syntax (rustc underlines the whole range). The `help:` text is
//! appended to the message in rustc's layout.

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// The first and last span of a piece of syntax.
#[derive(Clone, Copy, Debug)]
pub struct SpanRange {
    pub start: Span,
    pub end: Span,
}

impl SpanRange {
    pub fn single(span: Span) -> Self {
        SpanRange { start: span, end: span }
    }

    /// The range covering all tokens of `t`.
    pub fn of<T: ToTokens + ?Sized>(t: &T) -> Self {
        let tokens = t.to_token_stream();
        let mut iter = tokens.into_iter();
        let Some(first) = iter.next() else { return SpanRange::single(Span::call_site()) };
        let start = first_span(&first);
        let end = iter.last().map_or_else(|| first.span(), |t| t.span());
        SpanRange { start, end }
    }

    /// The range from the start of `self` to the end of `other`.
    pub fn to(self, other: SpanRange) -> Self {
        SpanRange { start: self.start, end: other.end }
    }
}

fn first_span(t: &TokenTree) -> Span {
    match t {
        TokenTree::Group(g) => g.span_open(),
        other => other.span(),
    }
}

// Lets `syn::Error::new_spanned` underline the range: it takes the span of
// the first token as the start and of the last as the end.
impl ToTokens for SpanRange {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend([TokenTree::Ident(Ident::new("a", self.start)), TokenTree::Ident(Ident::new("b", self.end))]);
    }
}

/// All errors found so far.
#[derive(Default)]
pub struct Errors {
    list: Vec<syn::Error>,
}

impl Errors {
    /// Records an error at `at`, with an optional `help:` line.
    pub fn add(&mut self, at: SpanRange, msg: impl AsRef<str>, help: Option<String>) {
        let mut text = msg.as_ref().to_string();
        if let Some(help) = help {
            text.push_str("\nhelp: ");
            text.push_str(&help);
        }
        self.list.push(syn::Error::new_spanned(at, text));
    }

    pub fn push(&mut self, e: syn::Error) {
        self.list.push(e);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// One `compile_error!` per error.
    pub fn to_compile_errors(&self) -> TokenStream {
        self.list.iter().map(syn::Error::to_compile_error).collect()
    }
}

/// The closest op name within an edit distance of 2, for "did you mean".
pub fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= 2 && *d < c.len().max(name.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let names = ["sum", "sum_dim", "softmax", "mul_", "transpose"];
        assert_eq!(suggest("sofmax", names.iter().copied()), Some("softmax"));
        assert_eq!(suggest("mull_", names.iter().copied()), Some("mul_"));
        assert_eq!(suggest("frobnicate", names.iter().copied()), None);
    }
}
