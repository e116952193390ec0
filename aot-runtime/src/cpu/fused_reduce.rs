//! The CPU evaluator of reduction kernels: a kernel of the kernel stage
//! whose body holds a reduction (`aot_ir::kernel::Kernel::prologue`), run
//! as one pass over the reduction's input, row by row.
//!
//! Every operand is laid out over the reduction's input shape `S` (stride 0
//! where it broadcasts). A *row* is the set of elements one output of the
//! reduction folds: the reduced dims of `S` at one index of its kept dims
//! (for softmax, the softmax dim). Per row:
//!
//! 1. the prologue's inputs are loaded block by block ([`BLOCK`] elements
//!    along the row's innermost run) and its ops run over each block as in
//!    `fused` (the same op visitors, f16/bf16 rounded after every op), and
//!    the reduced operand is folded: `sum`/`mean` into four f64 lanes per
//!    block, `amax` in f64, as eager's `reduce` does; `var` and
//!    softmax keep the row's values in a row buffer of the compute type
//!    (one row, so it stays in cache) and finish as eager does: two f64
//!    passes for `var`, eager's own softmax arithmetic for softmax;
//! 2. the reduced value is rounded to the storage type, as eager's result
//!    is;
//! 3. the epilogue runs: on one value per row (the output has the reduced
//!    shape; rows are taken [`BLOCK`] at a time so its ops still run over
//!    blocks), or along the row again (the output has `S`'s shape: softmax,
//!    or a `keepdim` reduction broadcast back against the row, as in
//!    log_softmax's gradient).
//!
//! Summation order: within a row, eager's order when the reduced dims are
//! innermost in memory (four lanes per run); otherwise the row's logical
//! order, which differs from eager only in the last bits of an f64
//! accumulator. The output is written in eager's layout: contiguous for one
//! value per row, any dense layout along rows. Rows run in parallel
//! (rayon) when the input has at least [`PAR_MIN`] elements;
//! fewer rows than threads of `sum`/`mean`/`amax` split each row instead
//! (partial f64 results combined in order, as eager splits a long
//! reduction).

use super::elem::{max_nan, Float, FloatElem};
use super::fused_elementwise::{Binary, Input, Rhs, Step, Unary, WithScalar, BLOCK};
use super::strided::PAR_MIN;
use crate::backend::fused_program::{ReduceProgram, RowOp};
use crate::backend::{CpuElem, CpuStorage};
use crate::error::{AotError, Result};
use crate::host_alloc::try_buffer;
use crate::layout::{contiguous_strides, Layout};
use aot_ir::kernel::elementwise::{with_op, Compute};
use rayon::prelude::*;

/// The rows of `S`: kept dims (rows, row-major) and reduced dims (each
/// row's elements, row-major, adjacent dims merged where every operand
/// allows); per operand (output first, then the inputs) its strides.
struct Rows {
    kept: Vec<usize>,
    kept_strides: Vec<Vec<usize>>,
    red: Vec<usize>,
    red_strides: Vec<Vec<usize>>,
    offsets: Vec<usize>,
    rows: usize,
    len: usize,
}

impl Rows {
    fn new(reduced: &[bool], layouts: &[&Layout]) -> Rows {
        let shape = &layouts[0].shape;
        let mut r = Rows {
            kept: Vec::new(),
            kept_strides: vec![Vec::new(); layouts.len()],
            red: Vec::new(),
            red_strides: vec![Vec::new(); layouts.len()],
            offsets: layouts.iter().map(|l| l.offset).collect(),
            rows: 1,
            len: 1,
        };
        for d in (0..shape.len()).filter(|&d| shape[d] != 1) {
            let n = shape[d];
            if reduced[d] {
                r.len *= n;
                let merge = !r.red.is_empty() && layouts.iter().zip(&r.red_strides).all(|(l, s)| s.last() == Some(&(l.stride[d] * n)));
                if merge {
                    *r.red.last_mut().expect("merged onto a dim") *= n;
                    r.red_strides.iter_mut().zip(layouts).for_each(|(s, l)| *s.last_mut().expect("merged") = l.stride[d]);
                } else {
                    r.red.push(n);
                    r.red_strides.iter_mut().zip(layouts).for_each(|(s, l)| s.push(l.stride[d]));
                }
            } else {
                r.rows *= n;
                r.kept.push(n);
                r.kept_strides.iter_mut().zip(layouts).for_each(|(s, l)| s.push(l.stride[d]));
            }
        }
        r
    }

    /// Per operand, the offset of row `row`'s first element.
    fn base(&self, row: usize, offs: &mut [usize]) {
        offs.copy_from_slice(&self.offsets);
        let mut rest = row;
        for d in (0..self.kept.len()).rev() {
            let i = rest % self.kept[d];
            rest /= self.kept[d];
            for (o, s) in offs.iter_mut().zip(&self.kept_strides) {
                *o += i * s[d];
            }
        }
    }

    /// Per operand, the stride along the row's innermost run.
    fn inner(&self, k: usize) -> usize {
        self.red_strides[k].last().copied().unwrap_or(0)
    }

    /// Calls `f(offsets, n, pos)` for each block of the row starting at
    /// `base` that lies in the positions `range` of the row: per operand
    /// the offset of the block's first element, its length, and its
    /// position in the row.
    fn blocks(&self, base: &[usize], range: std::ops::Range<usize>, mut f: impl FnMut(&[usize], usize, usize)) {
        let inner = self.red.last().copied().unwrap_or(1).max(1);
        let mut offs = base.to_vec();
        let mut here = base.to_vec();
        let mut pos = range.start;
        while pos < range.end {
            // The run's start: `run` over the outer reduced dims.
            let (run, mut at) = (pos / inner, pos % inner);
            let mut rest = run;
            offs.copy_from_slice(base);
            for d in (0..self.red.len().saturating_sub(1)).rev() {
                let i = rest % self.red[d];
                rest /= self.red[d];
                for (o, s) in offs.iter_mut().zip(&self.red_strides) {
                    *o += i * s[d];
                }
            }
            let end = inner.min(at + range.end - pos);
            while at < end {
                let n = (end - at).min(BLOCK);
                for (k, (h, &o)) in here.iter_mut().zip(&offs).enumerate() {
                    *h = o + at * self.inner(k);
                }
                f(&here, n, pos);
                at += n;
                pos += n;
            }
        }
    }
}

/// The output buffer, written by several tasks at disjoint positions.
struct Out<T>(*mut T);
// SAFETY: the pointer is only written through `Out::write`, at positions
// that the rows partition (each position belongs to exactly one row, and
// each row to one task), and the buffer outlives every task.
unsafe impl<T: Send> Send for Out<T> {}
// SAFETY: as above; no two tasks touch one element.
unsafe impl<T: Send> Sync for Out<T> {}

impl<T> Out<T> {
    /// # Safety
    /// `i` is within the buffer, and no other task writes it.
    unsafe fn write(&self, i: usize, v: T) {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(i).write(v) }
    }
}

/// Runs `p` on `inputs` (one float dtype, each laid out over `S`, with the
/// output's dtype) into a new buffer laid out as `out` (dense, offset 0;
/// contiguous for one value per row). `None`: the
/// inputs are not of one float dtype.
pub(crate) fn fused_reduce(name: &'static str, p: &ReduceProgram<'_>, inputs: &[Input<'_>], out: &Layout) -> Option<Result<CpuStorage>> {
    let first = inputs.first()?.0;
    for (s, l) in inputs {
        if let Err(e) = super::strided::check_layout(name, l, s.len()) {
            return Some(Err(e));
        }
    }
    macro_rules! go {
        ($t:ty) => {{
            let bufs: Option<Vec<&[$t]>> = inputs.iter().map(|(s, _)| <$t as CpuElem>::slice(s)).collect();
            Some(run::<$t>(name, p, &bufs?, inputs, out).map(<$t as CpuElem>::into_storage))
        }};
    }
    match first {
        CpuStorage::F32(_) => go!(f32),
        CpuStorage::F64(_) => go!(f64),
        CpuStorage::F16(_) => go!(half::f16),
        CpuStorage::BF16(_) => go!(half::bf16),
        _ => None,
    }
}

fn run<T: FloatElem>(name: &'static str, p: &ReduceProgram<'_>, bufs: &[&[T]], inputs: &[Input<'_>], out: &Layout) -> Result<Vec<T>>
where
    T::C: Compute,
{
    let shape = &inputs[0].1.shape;
    let out_ok = if p.rows_out { &out.shape == shape && crate::layout::is_dense_output(out) } else { out.is_contiguous() };
    if inputs.iter().any(|(_, l)| &l.shape != shape) || p.reduced.len() != shape.len() || !out_ok || out.offset != 0 {
        return Err(AotError::internal(
            name,
            "a reduction kernel's operands are laid out over its input shape, its output densely (contiguously for one value per row)",
        ));
    }
    // The output over `S`: its own dense layout, or one value per row
    // (contiguous, stride 0 along the reduced dims).
    let out_s = if p.rows_out {
        out.clone()
    } else {
        let kept: Vec<usize> = shape.iter().zip(p.reduced).map(|(&n, &r)| if r { 1 } else { n }).collect();
        let mut stride = contiguous_strides(&kept);
        stride.iter_mut().zip(p.reduced).filter(|(_, &r)| r).for_each(|(s, _)| *s = 0);
        Layout::new(shape.clone(), stride, 0)
    };
    let layouts: Vec<&Layout> = std::iter::once(&out_s).chain(inputs.iter().map(|(_, l)| l)).collect();
    let rows = Rows::new(p.reduced, &layouts);
    let n = out.numel();
    if n != if p.rows_out { rows.rows * rows.len } else { rows.rows } {
        return Err(AotError::internal(name, format!("a reduction kernel's output has {n} elements")));
    }
    let mut dst: Vec<T> = try_buffer(name, n)?;
    let o = Out(dst.as_mut_ptr());
    let task = |r0: usize, r1: usize| Task::<T>::new(p, bufs, &rows).rows(r0, r1, &o, None);
    let total = rows.rows.saturating_mul(rows.len);
    let threads = rayon::current_num_threads();
    let foldable = matches!(p.op, RowOp::Sum | RowOp::Mean | RowOp::Amax) && !p.rows_out;
    if total >= PAR_MIN && foldable && rows.rows < threads && threads > 1 {
        // Few long rows: each row's positions are split across tasks, whose
        // partial sums (or maxima) are combined in order, as eager's
        // reduction splits its largest reduced dim.
        let pieces = (4 * threads).min(rows.len.div_ceil(BLOCK)).max(1);
        let per = rows.len.div_ceil(pieces);
        let mut reduced = Vec::with_capacity(rows.rows);
        for r in 0..rows.rows {
            let parts: Vec<(f64, f64)> = (0..pieces)
                .into_par_iter()
                .map(|i| Task::<T>::new(p, bufs, &rows).fold(r, i * per..((i + 1) * per).min(rows.len)))
                .collect();
            let (sum, max) = parts.into_iter().fold((0.0, f64::NEG_INFINITY), |(s, m), (ps, pm)| (s + ps, max_nan(m, pm)));
            reduced.push(finish::<T>(p.op, sum, max, rows.len));
        }
        Task::<T>::new(p, bufs, &rows).rows(0, rows.rows, &o, Some(&reduced));
    } else if total >= PAR_MIN && rows.rows > 1 {
        // Enough rows per task to amortise it, and a few tasks per thread.
        let per = (PAR_MIN / 4 / rows.len.max(1)).max(rows.rows.div_ceil(4 * threads)).max(1);
        (0..rows.rows.div_ceil(per)).into_par_iter().for_each(|t| task(t * per, ((t + 1) * per).min(rows.rows)));
    } else {
        task(0, rows.rows);
    }
    // SAFETY: the tasks wrote every element of `0..n`: each row writes its
    // positions (one, or `len` of them), and the rows cover the output.
    unsafe { dst.set_len(n) };
    Ok(dst)
}

/// One task's scratch: the block values and, for var and softmax, a row.
struct Task<'a, T: FloatElem> {
    p: &'a ReduceProgram<'a>,
    bufs: &'a [&'a [T]],
    rows: &'a Rows,
    values: Vec<Vec<T::C>>,
    row: Vec<T::C>,
    offs: Vec<usize>,
}

impl<'a, T: FloatElem> Task<'a, T>
where
    T::C: Compute,
{
    fn new(p: &'a ReduceProgram<'a>, bufs: &'a [&'a [T]], rows: &'a Rows) -> Self {
        let block = BLOCK.min(if p.rows_out { rows.len } else { rows.len.max(rows.rows) }).max(1);
        let buffered = matches!(p.op, RowOp::Var { .. } | RowOp::Softmax { .. });
        Task {
            p,
            bufs,
            rows,
            values: vec![vec![<T::C as Compute>::of(0.0); block]; p.num_values],
            row: if buffered { vec![<T::C as Compute>::of(0.0); rows.len] } else { Vec::new() },
            offs: vec![0; bufs.len() + 1],
        }
    }

    /// Rows `r0..r1`; `pre`: their reduced values, already computed.
    fn rows(mut self, r0: usize, r1: usize, out: &Out<T>, pre: Option<&[T::C]>) {
        if self.p.rows_out {
            for r in r0..r1 {
                let c = self.gather(r);
                self.write_row(c, out);
            }
            return;
        }
        // One value per row: the epilogue runs over up to BLOCK rows at once.
        let mut start = r0;
        while start < r1 {
            let m = (r1 - start).min(self.values[0].len());
            for j in 0..m {
                let c = match pre {
                    Some(v) => v[start + j],
                    None => self.gather(start + j),
                };
                self.values[self.p.result][j] = c;
            }
            for j in 0..m {
                self.rows.base(start + j, &mut self.offs);
                for (k, buf) in self.bufs.iter().enumerate().filter(|(k, _)| self.p.load_epi[*k]) {
                    self.values[k][j] = buf[self.offs[k + 1]].to_c();
                }
            }
            for s in self.p.epilogue {
                eval_step::<T>(s, &mut self.values, m);
            }
            for (j, &v) in self.values[self.p.stored][..m].iter().enumerate() {
                // SAFETY: row `start + j` is this task's, and its output
                // position is `start + j` (< the output's length).
                unsafe { out.write(start + j, T::from_c(v)) };
            }
            start += m;
        }
    }

    /// Folds row `r` through the prologue; its reduced value, rounded to
    /// the storage type (softmax: the row buffer holds the result).
    fn gather(&mut self, r: usize) -> T::C {
        let len = self.rows.len;
        let (sum, max) = self.fold(r, 0..len);
        let Task { p, row, .. } = self;
        match p.op {
            RowOp::Var { correction } => {
                let mean = lanes_sum::<T>(row) / len as f64;
                let sq: f64 = row.iter().map(|&x| x.f64() - mean).map(|d| d * d).sum();
                T::from_f64(sq / (len as f64 - correction as f64).max(0.0)).to_c()
            }
            RowOp::Softmax { log } => {
                super::softmax::softmax_block(row, 1, log, super::softmax::half_round::<T>());
                for x in row.iter_mut() {
                    *x = T::from_c(*x).to_c();
                }
                <T::C as Compute>::of(0.0)
            }
            op => finish::<T>(op, sum, max, len),
        }
    }

    /// Runs the prologue over the positions `range` of row `r`: the f64
    /// sum and maximum of the reduced operand there (var and softmax: into
    /// the row buffer instead).
    fn fold(&mut self, r: usize, range: std::ops::Range<usize>) -> (f64, f64) {
        let Task { p, bufs, rows, values, row, offs } = self;
        rows.base(r, offs);
        let (mut sum, mut max) = (0.0f64, f64::NEG_INFINITY);
        rows.blocks(offs, range, |at, n, pos| {
            for (k, buf) in bufs.iter().enumerate().filter(|(k, _)| p.load_pro[*k]) {
                load(buf, at[k + 1], rows.inner(k + 1), &mut values[k][..n]);
            }
            for s in p.prologue {
                eval_step::<T>(s, values, n);
            }
            let x = &values[p.arg][..n];
            match p.op {
                RowOp::Sum | RowOp::Mean => sum += lanes_sum::<T>(x),
                RowOp::Amax => max = x.iter().fold(max, |m, &v| max_nan(m, v.f64())),
                RowOp::Var { .. } | RowOp::Softmax { .. } => row[pos..pos + n].copy_from_slice(x),
            }
        });
        (sum, max)
    }

    /// The epilogue along the row last gathered (its offsets in `offs`),
    /// `c` its reduced value, written to the output.
    fn write_row(&mut self, c: T::C, out: &Out<T>) {
        let Task { p, bufs, rows, values, row, offs } = self;
        let softmax = matches!(p.op, RowOp::Softmax { .. });
        let out_stride = rows.inner(0);
        rows.blocks(offs, 0..rows.len, |at, n, pos| {
            if softmax {
                values[p.result][..n].copy_from_slice(&row[pos..pos + n]);
            } else {
                values[p.result][..n].fill(c);
            }
            for (k, buf) in bufs.iter().enumerate().filter(|(k, _)| p.load_epi[*k]) {
                load(buf, at[k + 1], rows.inner(k + 1), &mut values[k][..n]);
            }
            for s in p.epilogue {
                eval_step::<T>(s, values, n);
            }
            for (i, &v) in values[p.stored][..n].iter().enumerate() {
                // SAFETY: the row's positions are this task's, and lie in
                // the dense output of `S`'s shape.
                unsafe { out.write(at[0] + i * out_stride, T::from_c(v)) };
            }
        });
    }
}

/// A fold's result for `op` over a row of `len`: rounded to the storage
/// type, as eager's result is.
fn finish<T: FloatElem>(op: RowOp, sum: f64, max: f64, len: usize) -> T::C {
    let v = match op {
        RowOp::Mean => sum / len as f64,
        RowOp::Amax => max,
        _ => sum,
    };
    T::from_f64(v).to_c()
}

/// The f64 sum of a block, in four lanes as eager's `reduce` sums a run.
fn lanes_sum<T: FloatElem>(x: &[T::C]) -> f64 {
    let mut lanes = [0.0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for k in 0..4 {
            lanes[k] += c[k].f64();
        }
    }
    for (k, &v) in chunks.remainder().iter().enumerate() {
        lanes[k] += v.f64();
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
}

// The prologue and epilogue of a reduction kernel are float ops of the
// storage dtype (the planner declines others), evaluated as the
// elementwise evaluator did before it grew typed blocks.

/// `dst[i] = buf[off + i * stride]` in the compute type.
#[inline]
pub(crate) fn load<T: FloatElem>(buf: &[T], off: usize, stride: usize, dst: &mut [T::C]) {
    match stride {
        0 => dst.fill(buf[off].to_c()),
        1 => {
            let n = dst.len();
            for (d, &x) in dst.iter_mut().zip(&buf[off..off + n]) {
                *d = x.to_c();
            }
        }
        _ => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = buf[off + i * stride].to_c();
            }
        }
    }
}

/// One body op over the first `len` elements of the block.
pub(crate) fn eval_step<T: FloatElem>(s: &Step, values: &mut [Vec<T::C>], len: usize)
where
    T::C: Compute,
{
    let mut out = std::mem::take(&mut values[s.out]);
    {
        let a = &values[s.a][..len];
        let o = &mut out[..len];
        let _ = match s.rhs {
            Rhs::None => with_op(s.op, Unary { a, o }),
            Rhs::Scalar(v) => with_op(s.op, WithScalar { a, b: <T::C as Compute>::of(v), o }),
            Rhs::Value(b) => with_op(s.op, Binary { a, b: &values[b][..len], o }),
        };
    }
    if T::DTYPE != crate::dtype::DType::F32 && T::DTYPE != crate::dtype::DType::F64 {
        // Eager rounds every op's result to the storage type.
        for x in &mut out[..len] {
            *x = T::from_c(*x).to_c();
        }
    }
    values[s.out] = out;
}

#[cfg(test)]
mod tests;
