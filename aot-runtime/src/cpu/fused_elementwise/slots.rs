//! Block buffers shared by liveness, and the block length they allow.
//!
//! The evaluator keeps one block of each live body value. A value whose
//! last reader has run gives its buffer to a later value of the same
//! representation, so a chain of any length needs two buffers (W2's seven
//! values: the input and six steps). Fewer buffers leave room in L1 for
//! longer blocks, which spread the per-block work (locating, loading,
//! dispatch) over more elements.

use super::block::{repr_bytes, same_repr};
use super::{Program, Rhs, BLOCK};
use crate::dtype::DType;

/// L1 bytes a kernel's buffers may take per body step. Every kernel gets
/// blocks of at least [`BLOCK`] elements (as before buffers were shared),
/// so a one-op kernel keeps those: its loads and stores stream through L1
/// and need the rest of it.
const BYTES_PER_STEP: usize = 4 << 10;
/// The most L1 bytes the buffers take: W2's chain (two f32 buffers) runs
/// in blocks of 3072 elements.
const MAX_BYTES: usize = 24 << 10;
/// Blocks are a multiple of this many elements (whole vectors at every
/// width).
const ROUND: usize = 64;

/// A buffer: the dtype whose representation it holds, and whether it is
/// allocated (`false`: an input read only for its dtype, which gets an
/// empty buffer).
type Buffer = (DType, bool);

/// Where each value of a program lives, and how long a block is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slots {
    /// Per value, the index of its buffer.
    pub slot: Vec<usize>,
    /// The buffers, in order of creation.
    pub buffers: Vec<Buffer>,
    /// Elements per block.
    pub block: usize,
}

/// The buffers of `p`, whose values `stored` are kept to the end of a
/// block. A program whose values are not each defined once, before they
/// are read, keeps one buffer per value (as every program did before
/// buffers were shared), so an odd program computes what it did.
pub(super) fn plan(p: &Program<'_>, inputs: usize, stored: &[usize]) -> Slots {
    let (slot, buffers) = share(p, inputs, stored).unwrap_or_else(|| {
        let buffers = (0..p.num_values).map(|v| (p.dtypes[v], v >= inputs || p.read[v])).collect();
        ((0..p.num_values).collect(), buffers)
    });
    let bytes: usize = buffers.iter().filter(|b| b.1).map(|b| repr_bytes(b.0)).sum();
    let budget = (BYTES_PER_STEP * p.steps.len().max(1)).min(MAX_BYTES);
    // Never shorter than the blocks of unshared buffers were.
    let block = (budget / bytes.max(1) / ROUND * ROUND).max(BLOCK);
    Slots { slot, buffers, block }
}

/// Per value, its buffer, and the buffers ([`Slots::buffers`]). `None`:
/// some value is defined twice, read before it is defined, or is an input
/// a step defines.
fn share(p: &Program<'_>, inputs: usize, stored: &[usize]) -> Option<(Vec<usize>, Vec<Buffer>)> {
    let n = p.num_values;
    let reads = |i: usize| {
        let s = &p.steps[i];
        let rhs = match s.rhs {
            Rhs::Value(v) => Some(v),
            _ => None,
        };
        [Some(s.a), rhs, s.cond].into_iter().flatten()
    };
    // Per value, the last step that reads it (`usize::MAX`: kept to the end).
    let mut last: Vec<Option<usize>> = vec![None; n];
    let mut defined: Vec<bool> = (0..n).map(|v| v < inputs).collect();
    for i in 0..p.steps.len() {
        for v in reads(i) {
            if !*defined.get(v)? {
                return None;
            }
            last[v] = Some(i);
        }
        let out = p.steps[i].out;
        if out < inputs || *defined.get(out)? {
            return None;
        }
        defined[out] = true;
    }
    for &v in stored {
        *last.get_mut(v)? = Some(usize::MAX);
    }
    let mut slot = vec![usize::MAX; n];
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    for v in 0..inputs {
        // An input read for its dtype only keeps an empty buffer of its own.
        slot[v] = if p.read[v] { take(p.dtypes[v], &mut free, &mut buffers) } else { new_buffer(&mut buffers, (p.dtypes[v], false)) };
    }
    free.extend((0..inputs).filter(|&v| p.read[v] && last[v].is_none()).map(|v| slot[v]));
    for i in 0..p.steps.len() {
        let out = p.steps[i].out;
        // Operands dying here are freed after the result's buffer is taken:
        // a step never writes a buffer it reads.
        slot[out] = take(p.dtypes[out], &mut free, &mut buffers);
        let mut dying: Vec<usize> = reads(i).filter(|&v| last[v] == Some(i) && (v >= inputs || p.read[v])).collect();
        if last[out].is_none() {
            dying.push(out);
        }
        dying.sort_unstable();
        dying.dedup();
        free.extend(dying.into_iter().map(|v| slot[v]));
    }
    // Values no step defines (past every step's output) keep buffers of
    // their own, which nothing writes.
    for (v, s) in slot.iter_mut().enumerate().filter(|(_, s)| **s == usize::MAX) {
        *s = new_buffer(&mut buffers, (p.dtypes[v], true));
    }
    Some((slot, buffers))
}

/// A free buffer of `d`'s representation, or a new one.
fn take(d: DType, free: &mut Vec<usize>, buffers: &mut Vec<Buffer>) -> usize {
    match free.iter().position(|&b| same_repr(buffers[b].0, d)) {
        Some(i) => free.swap_remove(i),
        None => new_buffer(buffers, (d, true)),
    }
}

fn new_buffer(buffers: &mut Vec<Buffer>, b: Buffer) -> usize {
    buffers.push(b);
    buffers.len() - 1
}
