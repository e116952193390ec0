//! Compile-time refusals: programs that can never run, found on the IR.
//!
//! Each refusal is something eager PyTorch would reject at run time (or a
//! contract rule), proven from the program alone, so the user learns it at
//! `cargo build` with a span on their own tokens:
//! - mutating (data or metadata) an input declared `&Tensor`;
//! - an in-place write to a tensor whose elements share memory (a view made
//!   by `expand`, or an `as_strided` with a zero stride), which PyTorch
//!   refuses with "more than one element of the written-to tensor refers to a
//!   single memory location";
//! - an in-place op whose source is a permuted alias of its destination
//!   (`a.copy_(&a.t())`): same memory, different layout, which PyTorch
//!   refuses as a partial overlap.
//!
//! What depends on shapes the analysis does not know (two slices that might
//! overlap) is left to the runtime, which refuses it like eager does.

use super::alias::{AliasInfo, LayoutPath, LayoutTracker, Step};
use crate::graph::Graph;
use crate::op::{OpClass, OpKind};
use crate::types::{Arg, ParamType, SpanId, ValueId};

/// A refusal, to be shown at `span`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the error points.
    pub span: SpanId,
    /// What is refused and why.
    pub message: String,
    /// How to write it instead, when there is a way.
    pub help: Option<String>,
    /// A second location worth showing (the parameter's declaration).
    pub note: Option<(SpanId, String)>,
}

/// Runs every refusal check, in program order.
pub fn check(g: &Graph) -> Vec<Diagnostic> {
    let alias = AliasInfo::compute(g);
    let mut layouts = LayoutTracker::new(g, &alias);
    // Values whose elements may share memory, as of the current node.
    let mut overlapping = vec![false; g.values.len()];
    let mut out = Vec::new();

    for (k, node) in g.nodes.iter().enumerate() {
        // The source holds DSL nodes only (its verifier checks).
        let Some(op) = node.kind() else { continue };
        match node.class() {
            OpClass::DataMutation | OpClass::MetadataMutation => {
                if let Some(t) = node.target() {
                    check_const_input(g, &alias, op, t, node.span, &mut out);
                    if node.class() == OpClass::DataMutation {
                        if overlapping[t.index()] {
                            out.push(self_overlap(g, op, t, node.span));
                        }
                        for src in node.tensor_args().skip(1) {
                            if let (Some(d), Some(s)) = (layouts.path(t), layouts.path(src)) {
                                if partially_overlap(d, s) {
                                    out.push(partial_overlap(g, op, t, src, node.span));
                                }
                            }
                        }
                    } else if let Some(t) = node.target() {
                        overlapping[t.index()] = match op {
                            OpKind::AsStridedInplace => zero_stride(&node.args),
                            _ => overlapping[t.index()],
                        };
                    }
                }
            }
            OpClass::View | OpClass::Compute => {
                if let (Some(o), Some(r)) = (node.out, node.receiver()) {
                    overlapping[o.index()] = match op {
                        OpKind::Expand => broadcasts(&node.args),
                        OpKind::AsStrided => zero_stride(&node.args),
                        // Layout permutations and size-1 changes keep every
                        // element, so they keep the overlap.
                        OpKind::T
                        | OpKind::Transpose
                        | OpKind::Permute
                        | OpKind::Unsqueeze
                        | OpKind::Squeeze
                        | OpKind::Detach
                        | OpKind::View => overlapping[r.index()],
                        // Anything else may drop the repeated elements
                        // (select, narrow) or copies (contiguous, reshape):
                        // only the runtime can tell.
                        _ => false,
                    };
                }
            }
        }
        layouts.apply(g, &alias, k);
    }
    out
}

fn check_const_input(g: &Graph, alias: &AliasInfo, op: OpKind, t: ValueId, span: SpanId, out: &mut Vec<Diagnostic>) {
    let param = match op.class() {
        // Data written through any alias reaches the input's storage.
        OpClass::DataMutation => alias.input_of(t),
        // Metadata belongs to the tensor object: only the input itself counts.
        _ => g.param_of(alias.identity[t.index()]),
    };
    let Some(p) = param else { return };
    let param = &g.params[p];
    if param.ty != ParamType::Tensor {
        return;
    }
    let what = if op.class() == OpClass::DataMutation { "data" } else { "metadata" };
    let through = if g.param_of(t) == Some(p) { String::new() } else { format!(" through a view of it (`{}`)", g.value_name(t)) };
    // A field of a struct parameter is named by its path (`m.w1`): the
    // struct is what must be taken by `&mut`.
    if let Some((root, _)) = param.name.split_once('.') {
        out.push(Diagnostic {
            span,
            message: format!(
                "`{}` mutates the {what} of `{}`{through}, a field of parameter `{root}`, which is taken by shared reference",
                op.name(),
                param.name
            ),
            help: Some(format!("take the struct by mutable reference to allow mutation: `{root}: &mut ...`")),
            note: None,
        });
        return;
    }
    out.push(Diagnostic {
        span,
        message: format!("`{}` mutates the {what} of input `{}`{through}, which is declared `&Tensor`", op.name(), param.name),
        help: Some(format!("declare it `&mut Tensor` to allow mutation: `{}: &mut Tensor`", param.name)),
        note: Some((param.span, format!("`{}` is declared here", param.name))),
    });
}

/// `name` in backticks when the value was bound to a name, else `fallback`.
fn named(g: &Graph, v: ValueId, fallback: &str) -> String {
    if g.values.get(v.index()).is_some_and(|i| i.name.is_some()) || g.param_of(v).is_some() {
        format!("`{}`", g.value_name(v))
    } else {
        fallback.to_string()
    }
}

fn self_overlap(g: &Graph, op: OpKind, t: ValueId, span: SpanId) -> Diagnostic {
    Diagnostic {
        span,
        message: format!(
            "in-place `{}` on {}, whose elements share memory (a broadcast view): more than one element of the written-to tensor refers to a single memory location",
            op.name(),
            named(g, t, "an expanded tensor")
        ),
        help: Some("write to a tensor with its own memory: add `.copy()` after the `expand(..)`".into()),
        note: None,
    }
}

fn partial_overlap(g: &Graph, op: OpKind, t: ValueId, src: ValueId, span: SpanId) -> Diagnostic {
    Diagnostic {
        span,
        message: format!(
            "in-place `{}` reads a differently laid out alias of the tensor it writes: some elements of the input tensor and the written-to tensor refer to a single memory location",
            op.name()
        ),
        help: Some(match g.values.get(src.index()).and_then(|i| i.name.as_ref()) {
            Some(name) => format!("copy the source first, `{name}.copy()`, so it no longer shares memory with {}", named(g, t, "the destination")),
            None => format!("copy the source first with `.copy()`, so it no longer shares memory with {}", named(g, t, "the destination")),
        }),
        note: None,
    }
}

/// `expand(&[..])` repeats elements unless every size is `-1` (keep) or `1`.
fn broadcasts(args: &[Arg]) -> bool {
    match args.get(1).and_then(Arg::as_ints) {
        Some(sizes) => sizes.iter().any(|s| !matches!(s.as_const_int(), Some(-1 | 1))),
        None => false,
    }
}

/// `as_strided` with a zero stride on a dimension longer than one repeats elements.
fn zero_stride(args: &[Arg]) -> bool {
    match (args.get(1).and_then(Arg::const_ints), args.get(2).and_then(Arg::const_ints)) {
        (Some(sizes), Some(strides)) => sizes.iter().zip(&strides).any(|(&n, &s)| n > 1 && s == 0),
        _ => false,
    }
}

/// Two layouts of one storage cover the same memory but lay it out
/// differently: one is the other permuted (`t`, `transpose`, `permute`) by
/// a permutation that is not the identity.
fn partially_overlap(a: &LayoutPath, b: &LayoutPath) -> bool {
    if a.storage != b.storage || a == b {
        return false;
    }
    let common = a.steps.iter().zip(&b.steps).take_while(|(x, y)| x == y).count();
    match (net_permutation(&a.steps[common..]), net_permutation(&b.steps[common..])) {
        (Some(p), Some(q)) => {
            let n = p.len().max(q.len());
            pad(p, n) != pad(q, n)
        }
        _ => false,
    }
}

/// The permutation of dims a sequence of permuting steps applies, when every
/// step is a permutation with literal, non-negative dims (`t` assumes 2-D).
fn net_permutation(steps: &[Step]) -> Option<Vec<usize>> {
    let mut perm: Vec<usize> = Vec::new();
    for s in steps {
        let dims: Vec<usize> = match s.op {
            OpKind::T => vec![1, 0],
            OpKind::Transpose => {
                let a = s.args.first()?.as_scalar()?.as_const_int()?;
                let b = s.args.get(1)?.as_scalar()?.as_const_int()?;
                let (a, b) = (usize::try_from(a).ok()?, usize::try_from(b).ok()?);
                let mut d: Vec<usize> = (0..=a.max(b)).collect();
                d.swap(a, b);
                d
            }
            OpKind::Permute => {
                let d = s.args.first()?.const_ints()?;
                let d = d.into_iter().map(|x| usize::try_from(x).ok()).collect::<Option<Vec<_>>>()?;
                // Only a true permutation of 0..n is understood (the eager op refuses the rest).
                let mut seen = vec![false; d.len()];
                for &i in &d {
                    if i >= d.len() || std::mem::replace(&mut seen[i], true) {
                        return None;
                    }
                }
                d
            }
            _ => return None,
        };
        let n = perm.len().max(dims.len());
        let (p, d) = (pad(perm, n), pad(dims, n));
        // The new dim i is the old dim d[i] of the current layout.
        perm = d.iter().map(|&i| p.get(i).copied()).collect::<Option<Vec<_>>>()?;
    }
    Some(perm)
}

fn pad(mut p: Vec<usize>, n: usize) -> Vec<usize> {
    while p.len() < n {
        p.push(p.len());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::args::*;
    use crate::graph::{GraphBuilder, ReturnKind};

    fn run(build: impl FnOnce(&mut GraphBuilder)) -> Vec<Diagnostic> {
        let mut b = GraphBuilder::new("f");
        build(&mut b);
        check(&b.finish(vec![], ReturnKind::Unit))
    }

    #[test]
    fn mutating_a_const_input() {
        let d = run(|b| {
            let a = b.tensor("a", false);
            let v = b.call(OpKind::Select, a, vec![i(0), i(0)]);
            b.call(OpKind::MulInplace, v, vec![f(2.0)]);
        });
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("input `a`"), "{}", d[0].message);
        assert!(d[0].help.as_deref().unwrap().contains("&mut Tensor"));
        // Metadata of a view is the view's own business.
        assert!(run(|b| {
            let a = b.tensor("a", false);
            let v = b.call(OpKind::View, a, vec![ints(&[-1])]);
            b.call(OpKind::UnsqueezeInplace, v, vec![i(0)]);
        })
        .is_empty());
        assert_eq!(
            run(|b| {
                let a = b.tensor("a", false);
                b.call(OpKind::TInplace, a, vec![]);
            })
            .len(),
            1
        );
    }

    #[test]
    fn writes_to_broadcast_views() {
        let d = run(|b| {
            let x = b.tensor("x", true);
            let e = b.call(OpKind::Expand, x, vec![ints(&[3, 4])]);
            let et = b.call(OpKind::T, e, vec![]);
            b.call(OpKind::AddInplace, et, vec![f(1.0)]);
        });
        assert_eq!(d.len(), 1);
        assert!(run(|b| {
            let x = b.tensor("x", true);
            let e = b.call(OpKind::Expand, x, vec![ints(&[-1, 1])]);
            b.call(OpKind::AddInplace, e, vec![f(1.0)]);
            let e2 = b.call(OpKind::Expand, x, vec![ints(&[3, 4])]);
            let s = b.call(OpKind::Select, e2, vec![i(0), i(0)]);
            b.call(OpKind::AddInplace, s, vec![f(1.0)]);
        })
        .is_empty());
        assert_eq!(
            run(|b| {
                let x = b.tensor("x", true);
                let e = b.call(OpKind::AsStrided, x, vec![ints(&[2, 2]), ints(&[0, 1]), i(0)]);
                b.call(OpKind::Zero, e, vec![]);
            })
            .len(),
            1
        );
    }

    #[test]
    fn partial_overlap_of_permuted_aliases() {
        let bad = run(|b| {
            let a = b.tensor("a", true);
            let at = b.call(OpKind::T, a, vec![]);
            b.call(OpKind::CopyInplace, a, vec![t(at)]);
        });
        assert_eq!(bad.len(), 1);
        let ok = run(|b| {
            let a = b.tensor("a", true);
            // Same layout twice: full overlap is fine.
            let x = b.call(OpKind::T, a, vec![]);
            let y = b.call(OpKind::Transpose, a, vec![i(0), i(1)]);
            b.call(OpKind::AddInplace, x, vec![t(y)]);
            b.call(OpKind::AddInplace, a, vec![t(a)]);
            // Disjoint or unknown: left to the runtime.
            let r0 = b.call(OpKind::Select, a, vec![i(0), i(0)]);
            let r1 = b.call(OpKind::Select, a, vec![i(0), i(1)]);
            b.call(OpKind::CopyInplace, r0, vec![t(r1)]);
            // A copy owns its memory.
            let c = b.call(OpKind::Copy, x, vec![]);
            b.call(OpKind::CopyInplace, a, vec![t(c)]);
        });
        assert!(ok.is_empty(), "{ok:?}");
        // Not a permutation: left to the eager op, never a panic here.
        assert!(run(|b| {
            let a = b.tensor("a", true);
            let p = b.call(OpKind::Permute, a, vec![ints(&[5, 0])]);
            b.call(OpKind::CopyInplace, a, vec![t(p)]);
        })
        .is_empty());
        // After `t_()`, `a` itself is the transposed layout of its old self.
        let after_meta = run(|b| {
            let a = b.tensor("a", true);
            let v = b.call(OpKind::View, a, vec![ints(&[2, 2])]);
            b.call(OpKind::TInplace, v, vec![]);
            let w = b.call(OpKind::View, a, vec![ints(&[2, 2])]);
            b.call(OpKind::CopyInplace, v, vec![t(w)]);
        });
        assert_eq!(after_meta.len(), 1);
    }
}
