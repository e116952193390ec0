//! Diagnostics: spanned errors collected across all steps and emitted
//! together, so the user sees every problem of the function in one build.
//!
//! Stable Rust has no `proc_macro::Diagnostic`, so an error is a
//! `compile_error!` whose tokens carry the first and last span of the
//! offending syntax (rustc underlines the whole range). The `help:` text is
//! appended to the message in rustc's layout.
//!
//! [`respan`] puts generated tokens at the user's syntax, so that rustc
//! reports a type error of generated code (a missing `TensorTree`, a
//! callee's argument types) there; the lowering and the expansion use it.

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

    /// Adds `other`'s errors that are not already here (the same message
    /// at the same place), as when each traced variant reports the same
    /// mistake.
    pub fn extend_unique(&mut self, other: Errors) {
        for e in other.list {
            let key = format!("{:?} {e}", e.span());
            if !self.list.iter().any(|x| format!("{:?} {x}", x.span()) == key) {
                self.list.push(e);
            }
        }
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

/// The closest name: within 1 edit (a swap of neighbours counts as one)
/// for names up to 4 letters, 2 up to 8, 3 beyond, so that a short name
/// is not matched to an unrelated short one (`cat` is not `lt`). A PyTorch
/// or NumPy spelling of an op under another name maps to it. Ties prefer a
/// candidate that agrees on a trailing `_` (in place or not).
pub fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&'a str> = candidates.collect();
    let alias = match name {
        "concat" | "concatenate" | "hstack" | "vstack" => Some("cat"),
        "clip" | "clamp_min" | "clamp_max" => Some("clamp"),
        "clamp_min_" | "clamp_max_" => Some("clamp_"),
        "clip_" => Some("clamp_"),
        "transpose_dims" | "swapaxes" => Some("transpose"),
        "clone" => Some("copy"),
        "type" | "to" | "astype" => Some("to_dtype"),
        "max" | "amax" => Some("amax_dim"),
        "var" => Some("var_dim"),
        "mean_dims" => Some("mean_dim"),
        "logsoftmax" => Some("log_softmax"),
        "fill" => Some("fill_"),
        "zero" => Some("zero_"),
        _ => None,
    };
    if let Some(a) = alias.and_then(|a| candidates.iter().copied().find(|c| *c == a)) {
        return Some(a);
    }
    let len = name.chars().count();
    let limit = match len {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    };
    candidates
        .into_iter()
        .map(|c| (distance(name, c), c))
        // A name without `_` is not pointed at an op that mutates (`clampp`
        // is not `clamp_`); the aliases above may still do so on purpose.
        .filter(|(d, c)| *d <= limit && *d < c.len().max(len) && (name.ends_with('_') || !c.ends_with('_')))
        .min_by_key(|(d, c)| (*d, c.ends_with('_') != name.ends_with('_')))
        .map(|(_, c)| c)
}

/// Edit distance with adjacent transpositions (optimal string alignment).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// `tokens` with every span set to `span`: generated code that rustc
/// should report at the user's syntax.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut g2 = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                g2.set_span(span);
                t = TokenTree::Group(g2);
            }
            t.set_span(span);
            t
        })
        .collect()
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
        assert_eq!(suggest("mull", names.iter().copied()), None, "a mutating op for a functional name");
        let ops: Vec<&str> = aot_ir::op::op_names().collect();
        // A short unknown name is not matched to an unrelated short op.
        assert_eq!(suggest("cta", ["lt", "le", "cat"].into_iter()), Some("cat"));
        assert_eq!(suggest("cot", ["lt", "le"].into_iter()), None);
        assert_eq!(suggest("concat", ops.iter().copied()), Some("cat"));
        assert_eq!(suggest("clmap", ops.iter().copied()), Some("clamp"));
        assert_eq!(suggest("clmap_", ops.iter().copied()), Some("clamp_"));
        assert_eq!(suggest("clip", ops.iter().copied()), Some("clamp"));
    }
}
