//! A write's new version computed out of place: for `c = cow(p)` whose
//! only reader is `scatter(c, [], add_(c, x))` (or `sub_`, `mul_`, `div_`;
//! see `aot_ir::kernel::schedule::fresh_writes`), the new version is
//! `add(p, x)`, when that is a tensor exactly like the copy would be: `p`
//! covers its whole storage densely from offset 0, and the result has
//! `p`'s dtype, shape and strides. One pass over `p` instead of a copy and
//! then an in-place pass; nothing of the caller's is written either way.
//! When `x` (or `p` itself) dies at the write and nothing else holds it,
//! the pass writes over its buffer ([`over_dying`]): no new buffer at all.

use crate::counters::{bump, Counter};
use crate::eval::dispatch::{exec, Values};
use crate::tensor::Tensor;
use aot_ir::{Arg as IrArg, OpKind, ScalarValue};

/// The out-of-place op of an in-place one this path takes: the binary
/// arithmetic ones.
fn out_of_place_kind(op: OpKind) -> Option<OpKind> {
    op.out_of_place().filter(|k| matches!(k, OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div))
}

/// The write `node_args` (`[c, c, x]`: `op_(c, x)` on the whole copy `c`
/// of `p`; `c` is `p`'s handle here) at node `at`, computed out of place
/// over the buffer of `c` or of `x` when that dies there and nothing else
/// holds it (`reuse.rs`): no new buffer at all. `None`: neither qualifies.
pub(crate) fn over_dying<G: crate::eval::dispatch::ArgGeometrySource + ?Sized>(
    op: OpKind,
    node_args: &[IrArg],
    at: usize,
    env: &[Option<Tensor>],
    cx: &super::interp::Ctx<'_, G>,
) -> Option<crate::error::Result<Tensor>> {
    let kind = out_of_place_kind(op)?;
    let (IrArg::Tensor(c), operand) = (node_args.first()?, node_args.get(2)?) else { return None };
    if node_args.len() != 3 || crate::tensor::is_grad_enabled() {
        return None;
    }
    let p = env.get(c.index())?.as_ref()?;
    let l = p.layout();
    if l.offset != 0 || l.numel() != p.storage_len() || !l.is_non_overlapping_and_dense() {
        return None;
    }
    let dies = |v: &IrArg| v.as_tensor().is_some_and(|v| v != *c && super::reuse::dying(v, at, env, cx.live));
    // `c` is read twice by the node (root and view): it dies when nothing
    // after reads it.
    let k = if super::reuse::dying(*c, at, env, cx.live) {
        0
    } else if dies(operand) {
        1
    } else {
        return None;
    };
    let r = super::reuse::fresh(kind, p, operand, k, env, cx.scalars)?;
    bump(Counter::FreshWrites);
    Some(r)
}

/// `op` applied out of place to `p` with `rest`, or `None` where the
/// result would not stand for the written copy (the caller then copies and
/// writes in place, which also reports eager's errors).
pub(crate) fn out_of_place(
    op: OpKind,
    p: &Tensor,
    rest: &[IrArg],
    env: &(impl Values + ?Sized),
    scalars: &[Option<ScalarValue>],
) -> Option<Tensor> {
    let kind = out_of_place_kind(op)?;
    let l = p.layout();
    if l.offset != 0 || l.numel() != p.storage_len() || !l.is_non_overlapping_and_dense() {
        return None;
    }
    let r = exec(kind, p, rest, env, scalars).ok()?;
    let rl = r.layout();
    let same = r.dtype() == p.dtype() && rl.shape == l.shape && rl.stride == l.stride && rl.offset == 0 && r.storage_len() == l.numel();
    if same {
        bump(Counter::FreshWrites);
    }
    same.then_some(r)
}
