//! The CPU evaluator of the kernel stage: one pass over the output for a
//! whole fused elementwise kernel ([`aot_ir::kernel::Kernel`]); a
//! multi-output kernel (reinplacing's, [`fused_in_place`]) stores each of
//! its values to its own buffer, all of one layout, in the same pass.
//!
//! The output is dense in the layout the caller gives (eager's layout for
//! the kernel's result). Its elements are visited in memory order, so the
//! result is written sequentially; each input is read through its own
//! strides (stride 0 for a broadcast dim), so views are folded into index
//! arithmetic and never materialised. Dims of size 1 are dropped and
//! adjacent dims that every operand steps through uniformly are merged, so
//! a dense input of the output's order is read as one run.
//!
//! Work proceeds in blocks: each input's block is loaded into a buffer of
//! its compute representation, then each body op runs over the whole block
//! as one loop of the op's function (from the one op definition,
//! `aot_ir::kernel::elementwise`), so the loops vectorise and a fused chain
//! stays in L1. A value's buffer passes to a later value once its last
//! reader has run, and the block is as long as the buffers fit in L1
//! (`slots.rs`). Outputs of at least
//! [`PAR_MIN`] elements are split across rayon threads; smaller ones stay
//! on the calling thread. Outputs too large for any cache
//! (`block::STREAM_MIN_BYTES`) are written with non-temporal stores.
//!
//! # Dtypes
//! Every body value has a dtype, and every step a compute dtype (the
//! caller's plan: eager's promotion). Values live as f32 (f32, f16, bf16),
//! f64, i64 or bool blocks; an operand of another dtype than its step's is
//! cast first exactly as eager casts it (`Elem::cast`), f16/bf16 round
//! after every op, as eager does. So floats match eager within the op
//! definitions' bits, and comparisons, `where`, casts and integer
//! arithmetic (add, sub, mul, neg, abs, square, relu, maximum, minimum,
//! wrapping as eager does) match bit for bit. Integer `div` and float
//! functions of integers compute in f32 (the plan promotes them, as eager
//! does); integer `pow` fuses with a tensor exponent only, and bool
//! arithmetic other than or/and is not fused (the caller runs them op by
//! op, which reports eager's errors).

use super::strided::PAR_MIN;
pub(crate) use crate::backend::fused_program::{Program, Rhs, Step};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::host_alloc::try_buffer;
use crate::layout::Layout;
use aot_ir::kernel::elementwise::{Compute, OpVisitor};
use aot_ir::OpKind;
use block::{Block, Stored};
use rayon::prelude::*;
use std::mem::MaybeUninit;

mod block;
mod in_place;
mod scalar_tail;
mod slots;

pub(crate) use in_place::fused_in_place;

/// Elements per block of a one-op kernel, and of the fused reductions
/// (`cpu/fused_reduce.rs`); a longer elementwise kernel's blocks are as
/// long as its shared buffers fit in L1 (`slots::plan`: W2's six-op chain
/// runs in blocks of 3072).
pub(crate) const BLOCK: usize = 512;
/// Output elements per parallel task.
const TASK: usize = 64 * BLOCK;

/// One input: its buffer and its layout broadcast to the output's shape.
pub(crate) type Input<'a> = (&'a CpuStorage, Layout);

/// Runs `p` on `inputs` into a new buffer laid out as `out` (dense, offset
/// 0). `None`: the program does not fit its inputs (their dtypes are not
/// the program's, or a step is not one the evaluator computes); the caller
/// runs the ops one by one.
pub(crate) fn fused(name: &'static str, p: &Program<'_>, inputs: &[Input<'_>], out: &Layout) -> Option<Result<CpuStorage>> {
    let n = inputs.len();
    let fits = p.dtypes.len() == p.num_values
        && p.read.len() == n
        && p.stored < p.num_values
        && n <= p.num_values
        && inputs.iter().zip(p.dtypes).all(|((s, _), &d)| s.dtype() == d)
        && p.steps.iter().all(|s| block::supported(s, p.dtypes, n));
    if !fits {
        return None;
    }
    for ((s, l), _) in inputs.iter().zip(p.read).filter(|(_, &r)| r) {
        if let Err(e) = super::strided::check_layout(name, l, s.len()) {
            return Some(Err(e));
        }
    }
    if scalar_tail::is_half_rsqrt(p) {
        let r = fused_plain(name, p, inputs, out);
        return Some(r.map(|mut r| {
            scalar_tail::patch(inputs[0].0, &inputs[0].1, out, &mut r);
            r
        }));
    }
    Some(fused_plain(name, p, inputs, out))
}

/// [`fused`] once the program is checked: every step as its op definition.
fn fused_plain(name: &'static str, p: &Program<'_>, inputs: &[Input<'_>], out: &Layout) -> Result<CpuStorage> {
    let bufs: Vec<&CpuStorage> = inputs.iter().map(|(s, _)| *s).collect();
    macro_rules! go {
        ($t:ty) => {
            run::<$t>(name, p, &bufs, inputs, out, None).map(<$t as crate::backend::CpuElem>::into_storage)
        };
    }
    match p.dtypes[p.stored] {
        DType::F32 => go!(f32),
        DType::F64 => go!(f64),
        DType::F16 => go!(half::f16),
        DType::BF16 => go!(half::bf16),
        DType::I64 => go!(i64),
        DType::Bool => go!(bool),
    }
}

/// [`fused`] with the result written over input `k`'s buffer `dst`, which
/// the caller took out of a storage no other tensor holds and nothing reads
/// after this kernel; input `k` has exactly `out`'s layout and `out`'s
/// dtype (its entry in `inputs` stands for it; that storage is not read).
/// Each block of input `k` is loaded before the output block at the same
/// positions is stored, so reading and writing one buffer is exact.
/// `Err(dst)`: declined (the program does not write `dst`'s dtype, or
/// `dst` is not `out`'s length), `dst` untouched.
pub(crate) fn fused_over(
    name: &'static str,
    p: &Program<'_>,
    inputs: &[Input<'_>],
    k: usize,
    dst: CpuStorage,
    out: &Layout,
) -> std::result::Result<Result<CpuStorage>, CpuStorage> {
    let same_dtype = p.dtypes.get(k) == Some(&dst.dtype())
        && p.dtypes.get(p.stored) == Some(&dst.dtype())
        && inputs.iter().enumerate().all(|(i, (s, _))| i == k || p.dtypes.get(i) == Some(&s.dtype()));
    // A half-precision `rsqrt` rewrites positions from its input after the
    // pass (`scalar_tail`), so it never writes over that input.
    if k >= inputs.len() || dst.len() != out.numel() || inputs[k].1 != *out || !same_dtype || scalar_tail::is_half_rsqrt(p) {
        return Err(dst);
    }
    for (i, (s, l)) in inputs.iter().enumerate() {
        if let Err(e) = super::strided::check_layout(name, l, if i == k { dst.len() } else { s.len() }) {
            return Ok(Err(e));
        }
    }
    let bufs: Vec<&CpuStorage> = inputs.iter().map(|(s, _)| *s).collect();
    macro_rules! go {
        ($t:ty, $v:expr) => {
            Ok(run::<$t>(name, p, &bufs, inputs, out, Some((k, $v))).map(<$t as crate::backend::CpuElem>::into_storage))
        };
    }
    match dst {
        CpuStorage::F32(v) => go!(f32, v),
        CpuStorage::F64(v) => go!(f64, v),
        CpuStorage::F16(v) => go!(half::f16, v),
        CpuStorage::BF16(v) => go!(half::bf16, v),
        CpuStorage::I64(v) => go!(i64, v),
        CpuStorage::Bool(v) => go!(bool, v),
    }
}

/// Whether the evaluator runs every step of `p` (over its `inputs` loads).
pub(crate) fn supports(p: &Program<'_>, inputs: usize) -> bool {
    p.steps.iter().all(|s| block::supported(s, p.dtypes, inputs))
}

/// Eager's elementwise ops as single-op kernels: `op(a)` or `op(a, rhs)`
/// (`rhs`: `Rhs::Value(1)` for the second input `b`, or a scalar), with
/// `a` (and `b`) laid out with `out`'s shape. `None`: not a float op of
/// one dtype with a dense output (the caller's own loop runs it).
pub(crate) fn single(
    name: &'static str,
    op: OpKind,
    a: Input<'_>,
    b: Option<Input<'_>>,
    rhs: Rhs,
    out: &Layout,
) -> Option<Result<CpuStorage>> {
    let dtype = a.0.dtype();
    if !crate::layout::is_dense_output(out) || !dtype.is_float() || b.as_ref().is_some_and(|b| b.0.dtype() != dtype) {
        return None;
    }
    let stored = if b.is_some() { 2 } else { 1 };
    let steps = [Step::new(op, 0, rhs, stored, dtype)];
    let dtypes = [dtype; 3];
    let inputs: Vec<Input<'_>> = std::iter::once(a).chain(b).collect();
    let p = Program { steps: &steps, num_values: stored + 1, stored, dtypes: &dtypes[..stored + 1], read: &[true, true][..stored] };
    fused(name, &p, &inputs, out)
}

/// The iteration space: sizes outermost first, with per operand (output
/// first, then the inputs) the stride of each dim and the start offset.
struct Space {
    sizes: Vec<usize>,
    strides: Vec<Vec<usize>>,
    offsets: Vec<usize>,
}

impl Space {
    /// The output's dims in memory order (largest stride first), size-1
    /// dims dropped, and adjacent dims merged where every operand allows.
    fn new(out: &Layout, inputs: &[Input<'_>]) -> Space {
        let mut dims: Vec<usize> = (0..out.rank()).filter(|&d| out.shape[d] > 1).collect();
        dims.sort_by(|&a, &b| out.stride[b].cmp(&out.stride[a]));
        let layouts: Vec<&Layout> = std::iter::once(out).chain(inputs.iter().map(|(_, l)| l)).collect();
        let mut sizes: Vec<usize> = Vec::new();
        let mut strides: Vec<Vec<usize>> = vec![Vec::new(); layouts.len()];
        for d in dims {
            let n = out.shape[d];
            let merge =
                !sizes.is_empty() && layouts.iter().zip(&strides).all(|(l, s)| s.last().is_some_and(|&outer| outer == l.stride[d] * n));
            if merge {
                let last = sizes.len() - 1;
                sizes[last] *= n;
                for (s, l) in strides.iter_mut().zip(&layouts) {
                    *s.last_mut().expect("merged onto a dim") = l.stride[d];
                }
            } else {
                sizes.push(n);
                for (s, l) in strides.iter_mut().zip(&layouts) {
                    s.push(l.stride[d]);
                }
            }
        }
        let offsets = layouts.iter().map(|l| l.offset).collect();
        Space { sizes, strides, offsets }
    }

    /// Per operand, the element offset of the position whose index in the
    /// output's memory order is `pos`, and the index itself (per dim).
    fn locate(&self, pos: usize) -> (Vec<usize>, Vec<usize>) {
        let mut idx = vec![0; self.sizes.len()];
        let mut rest = pos;
        for d in (0..self.sizes.len()).rev() {
            idx[d] = rest % self.sizes[d];
            rest /= self.sizes[d];
        }
        let offs =
            self.strides.iter().zip(&self.offsets).map(|(s, &o)| o + idx.iter().zip(s).map(|(i, st)| i * st).sum::<usize>()).collect();
        (offs, idx)
    }
}

/// `over`: input `k` is read from, and the result written over, this
/// buffer (see [`fused_over`]).
fn run<T: Stored>(
    name: &'static str,
    p: &Program<'_>,
    bufs: &[&CpuStorage],
    inputs: &[Input<'_>],
    out: &Layout,
    over: Option<(usize, Vec<T>)>,
) -> Result<Vec<T>> {
    let dst = match over {
        Some((k, buf)) => Dst { own: Some(k), stored: p.stored, buf },
        None => Dst { own: None, stored: p.stored, buf: Vec::new() },
    };
    let mut r = run_into(name, p, bufs, inputs, out, vec![dst])?;
    r.pop().ok_or_else(|| AotError::internal(name, "a fused kernel stored nothing"))
}

/// One output of [`run_into`]: the value `stored`, written to `buf` (a new
/// buffer if it is empty), which is input `own`'s when that is set (read
/// from `buf` itself, each block before it is overwritten).
struct Dst<T> {
    own: Option<usize>,
    stored: usize,
    buf: Vec<T>,
}

/// Runs `p` into every output of `dsts` (all laid out as `out`), in one
/// pass; their buffers, in order.
fn run_into<T: Stored>(
    name: &'static str,
    p: &Program<'_>,
    bufs: &[&CpuStorage],
    inputs: &[Input<'_>],
    out: &Layout,
    dsts: Vec<Dst<T>>,
) -> Result<Vec<Vec<T>>> {
    let n = out.numel();
    if out.offset != 0 {
        return Err(AotError::internal(name, "a fused kernel writes a dense output at offset 0"));
    }
    let space = Space::new(out, inputs);
    let stored: Vec<usize> = dsts.iter().map(|d| d.stored).collect();
    let slots = slots::plan(p, inputs.len(), &stored);
    let mut outs: Vec<(Option<usize>, usize)> = Vec::new();
    let mut vecs: Vec<Vec<T>> = Vec::new();
    for d in dsts {
        let v = match d.own {
            Some(_) if d.buf.len() == n => {
                let mut v = d.buf;
                // SAFETY: the elements stay as they are (every bit pattern of
                // a float is a value); the blocks read them before writing them.
                unsafe { v.set_len(0) };
                v
            }
            Some(_) => return Err(AotError::internal(name, "a fused kernel's own buffer has another length")),
            None => try_buffer(name, n)?,
        };
        outs.push((d.own, d.stored));
        vecs.push(v);
    }
    {
        // Per task, its chunk of every output.
        let mut tasks: Vec<Vec<&mut [MaybeUninit<T>]>> = Vec::new();
        for v in vecs.iter_mut() {
            let task = if n >= PAR_MIN { TASK } else { n.max(1) };
            for (i, c) in v.spare_capacity_mut()[..n].chunks_mut(task).enumerate() {
                if tasks.len() <= i {
                    tasks.push(Vec::new());
                }
                tasks[i].push(c);
            }
        }
        let stream = n.saturating_mul(std::mem::size_of::<T>()) >= block::STREAM_MIN_BYTES;
        let task = |start: usize, mut chunks: Vec<&mut [MaybeUninit<T>]>| {
            block_range(name, p, bufs, (&space, &slots, stream), &outs, start, &mut chunks)
        };
        if n >= PAR_MIN {
            tasks.into_par_iter().enumerate().try_for_each(|(i, c)| task(i * TASK, c))?;
        } else {
            tasks.into_iter().try_for_each(|c| task(0, c))?;
        }
    }
    for v in vecs.iter_mut() {
        // SAFETY: `block_range` wrote every element of the first `n` slots
        // of every output (each task writes its whole chunks or fails,
        // failing the whole run, and the chunks cover `0..n`).
        unsafe { v.set_len(n) };
    }
    Ok(vecs)
}

/// Computes the output positions `start .. start + len` (in the output's
/// memory order) into `chunks` (one per output of `outs`: an own input,
/// and the value stored); an own input is read from its chunk itself,
/// each block before any output block is stored.
fn block_range<T: Stored>(
    name: &'static str,
    p: &Program<'_>,
    bufs: &[&CpuStorage],
    (space, slots, stream): (&Space, &slots::Slots, bool),
    outs: &[(Option<usize>, usize)],
    start: usize,
    chunks: &mut [&mut [MaybeUninit<T>]],
) -> Result<()> {
    let bug = |what: &str| AotError::internal(name, format!("fused kernel: {what} (the program was checked)"));
    let total = chunks.first().map_or(0, |c| c.len());
    let rank = space.sizes.len();
    let inner = space.sizes.last().copied().unwrap_or(1);
    let (mut offs, mut idx) = space.locate(start);
    // Block buffers no longer than the chunk: a small tensor's op allocates
    // little; inputs read only for their dtype get none.
    let cap = slots.block.min(total);
    let mut values: Vec<Block> = slots.buffers.iter().map(|&(d, loaded)| Block::new(d, if loaded { cap } else { 0 })).collect();
    let slot = &slots.slot;
    let mut scratch = [Block::default(), Block::default()];
    let _fence = stream.then_some(block::StreamFence);
    let mut done = 0;
    while done < total {
        let at = idx.last().copied().unwrap_or(0);
        let len = (inner - at).min(slots.block).min(total - done);
        for (k, buf) in bufs.iter().enumerate().filter(|(k, _)| p.read[*k]) {
            if let Some(o) = outs.iter().position(|&(own, _)| own == Some(k)) {
                // SAFETY: `run_into` handed over an initialised buffer, and
                // this block of it is read here, before it is written below.
                if !unsafe { T::load_own(&chunks[o][done..done + len], &mut values[slot[k]]) } {
                    return Err(bug("an own buffer of another dtype"));
                }
                continue;
            }
            let stride = space.strides[k + 1].last().copied().unwrap_or(0);
            if !block::load(buf, offs[k + 1], stride, &mut values[slot[k]], len) {
                return Err(bug("an input of another dtype"));
            }
        }
        for s in p.steps {
            block::eval_step(s, p.dtypes, slot, &mut values, &mut scratch, len).ok_or_else(|| bug(&format!("step {s:?} failed")))?;
        }
        for (c, &(own, stored)) in chunks.iter_mut().zip(outs) {
            // An own buffer's block was just read into cache: stored plainly.
            let store = if stream && own.is_none() { T::store_streaming } else { T::store };
            if !store(&values[slot[stored]], &mut c[done..done + len]) {
                return Err(bug("a result of another dtype"));
            }
        }
        done += len;
        // Advance the index by `len` along the inner dim, carrying outwards.
        if rank == 0 {
            continue;
        }
        for (o, s) in offs.iter_mut().zip(&space.strides) {
            *o += len * s[rank - 1];
        }
        idx[rank - 1] += len;
        let mut d = rank - 1;
        while idx[d] == space.sizes[d] && d > 0 {
            idx[d] = 0;
            for (o, s) in offs.iter_mut().zip(&space.strides) {
                *o -= space.sizes[d] * s[d];
                *o += s[d - 1];
            }
            idx[d - 1] += 1;
            d -= 1;
        }
    }
    Ok(())
}

/// Runs `f` compiled for the best instruction set this CPU has (pulp's
/// runtime dispatch: AVX-512, AVX2 or the baseline), so that the op loops
/// inlined into it vectorise at that width.
#[inline(always)]
fn simd(f: impl FnOnce()) {
    pulp::Arch::new().dispatch(f);
}

pub(crate) struct Unary<'a, C> {
    pub(crate) a: &'a [C],
    pub(crate) o: &'a mut [C],
}

impl<C: Compute> OpVisitor<C> for Unary<'_, C> {
    type Out = ();
    fn visit_rare<F, R, S>(self, f: F, rare: R, slow: S)
    where
        F: Fn(C, C) -> C + Copy + Send + Sync,
        R: Fn(C) -> bool + Copy + Send + Sync,
        S: Fn(C) -> C + Copy + Send + Sync,
    {
        let a = self.a;
        let o: &mut [C] = self.o;
        Unary { a, o: &mut *o }.visit(f);
        fix_rare(a, o, rare, slow);
    }
    #[inline(always)]
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) {
        let (a, o) = (self.a, self.o);
        simd(
            #[inline(always)]
            || {
                for (o, &x) in o.iter_mut().zip(a) {
                    *o = f(x, x);
                }
            },
        );
    }
}

/// The positions of a branch-free pass whose argument is rare, redone
/// with the slow function.
fn fix_rare<C: Compute>(a: &[C], o: &mut [C], rare: impl Fn(C) -> bool, slow: impl Fn(C) -> C) {
    for (o, &x) in o.iter_mut().zip(a) {
        if rare(x) {
            *o = slow(x);
        }
    }
}

pub(crate) struct WithScalar<'a, C> {
    pub(crate) a: &'a [C],
    pub(crate) b: C,
    pub(crate) o: &'a mut [C],
}

impl<C: Compute> OpVisitor<C> for WithScalar<'_, C> {
    type Out = ();
    #[inline(always)]
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) {
        let (a, b, o) = (self.a, self.b, self.o);
        simd(
            #[inline(always)]
            || {
                for (o, &x) in o.iter_mut().zip(a) {
                    *o = f(x, b);
                }
            },
        );
    }
}

pub(crate) struct Binary<'a, C> {
    pub(crate) a: &'a [C],
    pub(crate) b: &'a [C],
    pub(crate) o: &'a mut [C],
}

/// `x = f(x, y)` elementwise (the dense in-place kernels).
pub(crate) struct InPlace<'a, C> {
    pub(crate) x: &'a mut [C],
    pub(crate) y: &'a [C],
}

impl<C: Compute> OpVisitor<C> for InPlace<'_, C> {
    type Out = ();
    #[inline(always)]
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) {
        let (x, y) = (self.x, self.y);
        simd(
            #[inline(always)]
            || {
                for (x, &y) in x.iter_mut().zip(y) {
                    *x = f(*x, y);
                }
            },
        );
    }
}

impl<C: Compute> OpVisitor<C> for Binary<'_, C> {
    type Out = ();
    #[inline(always)]
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) {
        let (a, b, o) = (self.a, self.b, self.o);
        simd(
            #[inline(always)]
            || {
                for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                    *o = f(x, y);
                }
            },
        );
    }
}

#[cfg(test)]
mod tests;
