//! Strided iteration shared by the kernels: bounds checks, dimension
//! coalescing, and the elementwise engine (`map1`/`map2`/`map3`) that walks
//! one to three layouts of the same shape in row-major order, one "run" of
//! the innermost dimension at a time (or in tiles when an input is
//! transposed), in parallel for large inputs.

use crate::error::{AotError, Result};
use crate::host_alloc::try_filled_buffer;
use crate::layout::{contiguous_strides, Dims, Layout};
use rayon::prelude::*;

pub(crate) use crate::backend::PAR_MIN;
pub(crate) use crate::layout::check_layout;
/// Elements per parallel task of the elementwise engine.
const CHUNK: usize = 16 * 1024;

/// Runs `f(start, piece)` on `out` cut into pieces of `chunk` elements
/// (`start`: index of the piece's first element), in parallel. Taking `f` as
/// a trait object instantiates rayon's machinery once per element type
/// instead of once per kernel; one dynamic call per piece costs nothing.
pub(crate) fn par_chunks<U: Send>(out: &mut [U], chunk: usize, f: &(dyn Fn(usize, &mut [U]) + Sync)) {
    let chunk = chunk.max(1);
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i * chunk, c));
}

/// `[f(0), ..., f(n - 1)]`, computed in parallel.
pub(crate) fn par_map<A: Send>(n: usize, f: &(dyn Fn(usize) -> A + Sync)) -> Vec<A> {
    (0..n).into_par_iter().map(f).collect()
}

/// Checks that two layouts have the same shape.
pub(crate) fn check_same_shape(op: &'static str, a: &Layout, b: &Layout) -> Result<()> {
    if a.shape != b.shape {
        return Err(AotError::shape(op, format!("operands of shapes {:?} and {:?} were not broadcast to one shape", a.shape, b.shape)));
    }
    Ok(())
}

/// `N` layouts of one shape, with size-1 dims dropped and adjacent dims
/// merged wherever all `N` layouts allow it. The last merged dim is the
/// "inner" one that runs walk.
pub(crate) struct Plan<const N: usize> {
    outer: Dims,
    outer_strides: [Dims; N],
    inner: usize,
    inner_stride: [usize; N],
    offset: [usize; N],
}

impl<const N: usize> Plan<N> {
    /// `shape` must be the shape of every layout in `ls`.
    pub(crate) fn new(shape: &[usize], ls: [&Layout; N]) -> Self {
        let offset = std::array::from_fn(|k| ls[k].offset);
        if shape.contains(&0) {
            return Plan {
                outer: Dims::new(),
                outer_strides: std::array::from_fn(|_| Dims::new()),
                inner: 0,
                inner_stride: [0; N],
                offset,
            };
        }
        // Merged dims, innermost first.
        // (Per layout, held inline: a small op's plan allocates nothing.)
        let mut sizes = Dims::new();
        let mut strides: [Dims; N] = std::array::from_fn(|_| Dims::new());
        for d in (0..shape.len()).rev() {
            let n = shape[d];
            if n == 1 {
                continue;
            }
            let s: [usize; N] = std::array::from_fn(|k| ls[k].stride[d]);
            if let Some(last_n) = sizes.last_mut() {
                if (0..N).all(|k| strides[k].last().and_then(|ls| ls.checked_mul(*last_n)) == Some(s[k])) {
                    *last_n *= n;
                    continue;
                }
            }
            sizes.push(n);
            for (k, st) in strides.iter_mut().enumerate() {
                st.push(s[k]);
            }
        }
        if sizes.is_empty() {
            return Plan {
                outer: Dims::new(),
                outer_strides: std::array::from_fn(|_| Dims::new()),
                inner: 1,
                inner_stride: [1; N],
                offset,
            };
        }
        let inner = sizes[0];
        let inner_stride = std::array::from_fn(|k| strides[k][0]);
        let outer: Dims = sizes[1..].iter().rev().copied().collect();
        let outer_strides = std::array::from_fn(|k| strides[k][1..].iter().rev().copied().collect());
        Plan { outer, outer_strides, inner, inner_stride, offset }
    }

    /// Strides of the inner dim, per layout.
    pub(crate) fn inner_stride(&self) -> [usize; N] {
        self.inner_stride
    }

    /// Calls `f(pos, starts, len)` for each run of consecutive elements of
    /// the inner dim among the row-major elements `start..end`: `pos` is the
    /// index of the run's first element relative to `start`, `starts` its
    /// storage index in each layout, `len` the run's length.
    #[inline]
    pub(crate) fn for_each_run(&self, start: usize, end: usize, mut f: impl FnMut(usize, [usize; N], usize)) {
        let mut runs = Runs::new(self, start, end);
        while let Some((pos, starts, len)) = runs.next_run() {
            f(pos, starts, len);
        }
    }
}

/// The runs of a [`Plan`] over a range of elements (not generic over the
/// kernel, so the odometer is compiled once per arity).
struct Runs<'a, const N: usize> {
    plan: &'a Plan<N>,
    idx: Vec<usize>,
    base: [usize; N],
    col: usize,
    pos: usize,
    start: usize,
    end: usize,
}

impl<'a, const N: usize> Runs<'a, N> {
    fn new(plan: &'a Plan<N>, start: usize, end: usize) -> Self {
        let rank = plan.outer.len();
        let mut idx = vec![0usize; rank];
        let mut base = plan.offset;
        let mut col = 0;
        if plan.inner > 0 && start < end {
            let mut row = start / plan.inner;
            col = start % plan.inner;
            for d in (0..rank).rev() {
                idx[d] = row % plan.outer[d];
                row /= plan.outer[d];
            }
            for d in 0..rank {
                for k in 0..N {
                    base[k] += idx[d] * plan.outer_strides[k][d];
                }
            }
        }
        let end = if plan.inner == 0 { start } else { end };
        Runs { plan, idx, base, col, pos: start, start, end }
    }

    fn next_run(&mut self) -> Option<(usize, [usize; N], usize)> {
        if self.pos >= self.end {
            return None;
        }
        let p = self.plan;
        let len = (p.inner - self.col).min(self.end - self.pos);
        let mut starts = self.base;
        for k in 0..N {
            starts[k] += self.col * p.inner_stride[k];
        }
        let run = (self.pos - self.start, starts, len);
        self.pos += len;
        self.col = 0;
        if self.pos < self.end {
            // Next row: odometer over the outer dims.
            for d in (0..self.idx.len()).rev() {
                self.idx[d] += 1;
                if self.idx[d] < p.outer[d] {
                    for k in 0..N {
                        self.base[k] += p.outer_strides[k][d];
                    }
                    break;
                }
                for k in 0..N {
                    self.base[k] -= (p.outer[d] - 1) * p.outer_strides[k][d];
                }
                self.idx[d] = 0;
            }
        }
        Some(run)
    }
}

/// Fills `out` (the row-major elements of the plan's shape) run by run:
/// `kernel(out_run, starts, strides)`. Parallel for large outputs.
fn fill_runs<const N: usize, U: Send>(out: &mut [U], plan: &Plan<N>, kernel: impl Fn(&mut [U], [usize; N], [usize; N]) + Sync) {
    let strides = plan.inner_stride();
    let run = |start: usize, chunk: &mut [U]| {
        plan.for_each_run(start, start + chunk.len(), |pos, starts, len| kernel(&mut chunk[pos..pos + len], starts, strides));
    };
    if out.len() >= PAR_MIN {
        par_chunks(out, CHUNK, &run);
    } else {
        run(0, out);
    }
}

/// Tile edge of the blocked walk used for transposed inputs.
const TILE: usize = 32;

/// A walk of `N` inputs where one input's innermost (row-major) dim is
/// strided while one of its outer dims has stride 1, as after a transpose:
/// walking whole runs would touch a new cache line per element, so those two
/// dims are visited in `TILE x TILE` tiles instead.
struct Transposed<const N: usize> {
    /// Plan dims (outermost first), their strides per input, and the
    /// output's (contiguous) strides.
    sizes: Dims,
    istride: [Dims; N],
    ostride: Dims,
    offset: [usize; N],
    /// The dim tiled together with the innermost one.
    d: usize,
}

impl<const N: usize> Transposed<N> {
    fn new(plan: &Plan<N>) -> Option<Self> {
        let d = (0..N).find_map(|k| {
            if plan.inner_stride[k] <= 1 {
                return None;
            }
            plan.outer_strides[k].iter().position(|&s| s == 1)
        })?;
        if plan.inner < 4 || plan.outer[d] < 4 {
            return None;
        }
        let mut sizes = plan.outer.clone();
        sizes.push(plan.inner);
        let istride = std::array::from_fn(|k| {
            let mut s = plan.outer_strides[k].clone();
            s.push(plan.inner_stride[k]);
            s
        });
        let ostride = contiguous_strides(&sizes);
        Some(Transposed { sizes, istride, ostride, offset: plan.offset, d })
    }

    /// Fills `out` with `f(storage index in each input)` for every element.
    fn run<U: Send>(&self, out: &mut [U], f: &(impl Fn([usize; N]) -> U + Sync)) {
        let row = self.ostride[0];
        if out.len() >= PAR_MIN {
            let mut rows = (4 * CHUNK / row).max(1);
            if self.d == 0 {
                rows = rows.div_ceil(TILE) * TILE;
            }
            par_chunks(out, rows * row, &|start, chunk| self.block(chunk, start / row, chunk.len() / row, f));
        } else {
            self.block(out, 0, self.sizes[0], f);
        }
    }

    /// Fills `out` with the elements whose dim-0 index is in `r0..r0 + rows`.
    fn block<U>(&self, out: &mut [U], r0: usize, rows: usize, f: &impl Fn([usize; N]) -> U) {
        let last = self.sizes.len() - 1;
        let mut sizes = self.sizes.clone();
        sizes[0] = rows;
        let (d, nd, nj) = (self.d, sizes[self.d], sizes[last]);
        let od = self.ostride[d];
        let sd: [usize; N] = std::array::from_fn(|k| self.istride[k][d]);
        let sj: [usize; N] = std::array::from_fn(|k| self.istride[k][last]);
        // The other dims, walked by an odometer.
        let others: Vec<usize> = (0..last).filter(|&e| e != d).collect();
        let mut idx = vec![0usize; others.len()];
        let mut bi: [usize; N] = std::array::from_fn(|k| self.offset[k] + r0 * self.istride[k][0]);
        let mut bo = 0usize;
        loop {
            for i0 in (0..nd).step_by(TILE) {
                let i1 = (i0 + TILE).min(nd);
                for j0 in (0..nj).step_by(TILE) {
                    let j1 = (j0 + TILE).min(nj);
                    for i in i0..i1 {
                        let oi = bo + i * od;
                        let xi: [usize; N] = std::array::from_fn(|k| bi[k] + i * sd[k]);
                        for (j, o) in (j0..j1).zip(&mut out[oi + j0..oi + j1]) {
                            *o = f(std::array::from_fn(|k| xi[k] + j * sj[k]));
                        }
                    }
                }
            }
            let mut q = others.len();
            loop {
                if q == 0 {
                    return;
                }
                q -= 1;
                let e = others[q];
                idx[q] += 1;
                if idx[q] < sizes[e] {
                    for k in 0..N {
                        bi[k] += self.istride[k][e];
                    }
                    bo += self.ostride[e];
                    break;
                }
                for k in 0..N {
                    bi[k] -= (sizes[e] - 1) * self.istride[k][e];
                }
                bo -= (sizes[e] - 1) * self.ostride[e];
                idx[q] = 0;
            }
        }
    }
}

/// `f` of each element of `a` (read through `la`), as a contiguous vector
/// (an `OutOfMemory` error naming `op` if it cannot be allocated).
pub(crate) fn map1<T: Copy + Sync, U: Copy + Default + Send + 'static>(
    op: &'static str,
    a: &[T],
    la: &Layout,
    f: impl Fn(T) -> U + Sync,
) -> Result<Vec<U>> {
    let mut out = try_filled_buffer(op, la.numel(), U::default())?;
    map1_into(&mut out, a, la, f);
    Ok(out)
}

/// Like [`map1`], writing into `out` (of `la.numel()` elements).
pub(crate) fn map1_into<T: Copy + Sync, U: Copy + Send>(out: &mut [U], a: &[T], la: &Layout, f: impl Fn(T) -> U + Sync) {
    let n = out.len();
    if n == 0 {
        return;
    }
    if la.is_contiguous() {
        let src = &a[la.offset..la.offset + n];
        let run = |start: usize, o: &mut [U]| {
            let len = o.len();
            for (o, &x) in o.iter_mut().zip(&src[start..start + len]) {
                *o = f(x);
            }
        };
        if n >= PAR_MIN {
            par_chunks(out, CHUNK, &run);
        } else {
            run(0, out);
        }
        return;
    }
    let plan = Plan::new(&la.shape, [la]);
    if let Some(t) = Transposed::new(&plan) {
        t.run(out, &|[i]| f(a[i]));
        return;
    }
    fill_runs(out, &plan, |o, [s], [st]| {
        if st == 1 {
            let n = o.len();
            for (o, &x) in o.iter_mut().zip(&a[s..s + n]) {
                *o = f(x);
            }
        } else {
            for (j, o) in o.iter_mut().enumerate() {
                *o = f(a[s + j * st]);
            }
        }
    });
}

/// `f` of each pair of elements of `a` and `b` (layouts of one shape).
pub(crate) fn map2<A: Copy + Sync, B: Copy + Sync, U: Copy + Default + Send + 'static>(
    op: &'static str,
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> U + Sync,
) -> Result<Vec<U>> {
    let mut out = try_filled_buffer(op, la.numel(), U::default())?;
    // Small dense operands: one loop, without building a plan (a tiny op's
    // fixed cost); larger ones take the plan's parallel runs.
    let n = out.len();
    if n < PAR_MIN && la.is_contiguous() && lb.is_contiguous() {
        if let (Some(x), Some(y)) = (a.get(la.offset..la.offset + n), b.get(lb.offset..lb.offset + n)) {
            for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
                *o = f(x, y);
            }
            return Ok(out);
        }
    }
    let plan = Plan::new(&la.shape, [la, lb]);
    if let Some(t) = Transposed::new(&plan) {
        t.run(&mut out, &|[i, j]| f(a[i], b[j]));
        return Ok(out);
    }
    fill_runs(&mut out, &plan, |o, [sa, sb], strides| {
        let n = o.len();
        match strides {
            [1, 1] => {
                for ((o, &x), &y) in o.iter_mut().zip(&a[sa..sa + n]).zip(&b[sb..sb + n]) {
                    *o = f(x, y);
                }
            }
            [1, 0] => {
                let y = b[sb];
                for (o, &x) in o.iter_mut().zip(&a[sa..sa + n]) {
                    *o = f(x, y);
                }
            }
            [0, 1] => {
                let x = a[sa];
                for (o, &y) in o.iter_mut().zip(&b[sb..sb + n]) {
                    *o = f(x, y);
                }
            }
            [ta, tb] => {
                for (j, o) in o.iter_mut().enumerate() {
                    *o = f(a[sa + j * ta], b[sb + j * tb]);
                }
            }
        }
    });
    Ok(out)
}

/// `f` of each triple of elements of `a`, `b` and `c` (layouts of one shape).
#[allow(clippy::too_many_arguments)]
pub(crate) fn map3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, U: Copy + Default + Send + 'static>(
    op: &'static str,
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    c: &[C],
    lc: &Layout,
    f: impl Fn(A, B, C) -> U + Sync,
) -> Result<Vec<U>> {
    let mut out = try_filled_buffer(op, la.numel(), U::default())?;
    let plan = Plan::new(&la.shape, [la, lb, lc]);
    if let Some(t) = Transposed::new(&plan) {
        t.run(&mut out, &|[i, j, k]| f(a[i], b[j], c[k]));
        return Ok(out);
    }
    fill_runs(&mut out, &plan, |o, [sa, sb, sc], strides| {
        let n = o.len();
        if strides == [1, 1, 1] {
            for (((o, &x), &y), &z) in o.iter_mut().zip(&a[sa..sa + n]).zip(&b[sb..sb + n]).zip(&c[sc..sc + n]) {
                *o = f(x, y, z);
            }
        } else {
            let [ta, tb, tc] = strides;
            for (j, o) in o.iter_mut().enumerate() {
                *o = f(a[sa + j * ta], b[sb + j * tb], c[sc + j * tc]);
            }
        }
    });
    Ok(out)
}

/// Calls `f(dst_index, src_index)` for every element of two layouts of one
/// shape, in row-major order, on this thread.
pub(crate) fn for_each_pair(shape: &[usize], ld: &Layout, ls: &Layout, mut f: impl FnMut(usize, usize)) {
    let plan = Plan::new(shape, [ld, ls]);
    let [td, ts] = plan.inner_stride();
    let n: usize = shape.iter().product();
    plan.for_each_run(0, n, |_, [d, s], len| {
        for j in 0..len {
            f(d + j * td, s + j * ts);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect_offsets(l: &Layout) -> Vec<usize> {
        map1("t", &(0..l.storage_extent()).collect::<Vec<usize>>(), l, |i| i).unwrap()
    }

    #[test]
    fn runs_visit_offsets_in_row_major_order() {
        let base = Layout::contiguous(&[3, 4, 5]);
        let layouts = vec![
            base.clone(),
            base.transpose("t", 0, 2).unwrap(),
            base.permute("p", &[1, 0, 2]).unwrap(),
            base.slice("s", 2, 1, 5, 2).unwrap(),
            base.narrow("n", 1, 1, 2).unwrap(),
            Layout::new(vec![3, 2, 4], vec![4, 0, 1], 2),
            Layout::new(vec![1, 4, 1], vec![99, 2, 7], 1),
            Layout::new(vec![], vec![], 7),
            Layout::new(vec![0, 3], vec![3, 1], 0),
        ];
        for l in &layouts {
            assert_eq!(collect_offsets(l), l.offsets().collect::<Vec<_>>(), "{l:?}");
        }
    }

    #[test]
    fn parallel_runs_match_serial_offsets() {
        let l = Layout::contiguous(&[70, 3, 300]).permute("p", &[2, 0, 1]).unwrap();
        assert!(l.numel() >= PAR_MIN);
        assert_eq!(collect_offsets(&l), l.offsets().collect::<Vec<_>>());
        let l = Layout::new(vec![200, 300], vec![0, 1], 5);
        assert_eq!(collect_offsets(&l), l.offsets().collect::<Vec<_>>());
    }

    #[test]
    fn tiled_transposed_walk_matches_offsets() {
        let base = Layout::contiguous(&[37, 5, 70]);
        let layouts = vec![
            base.permute("p", &[2, 1, 0]).unwrap(),
            base.permute("p", &[1, 2, 0]).unwrap(),
            base.permute("p", &[2, 0, 1]).unwrap(),
            Layout::contiguous(&[300, 400]).t("t").unwrap(),
            Layout::contiguous(&[3, 300, 200]).transpose("t", 1, 2).unwrap(),
            Layout::contiguous(&[300, 3, 200]).permute("p", &[1, 2, 0]).unwrap(),
        ];
        for l in &layouts {
            let plan = Plan::new(&l.shape, [l]);
            assert!(Transposed::new(&plan).is_some(), "{l:?}");
            let want: Vec<usize> = l.offsets().collect();
            assert_eq!(collect_offsets(l), want, "{l:?}");
            // with a second, contiguous or broadcast, operand
            let ids: Vec<usize> = (0..l.storage_extent()).collect();
            let c = Layout::contiguous(&l.shape);
            let pairs = map2("t", &ids, l, &ids, &c, |x, y| (x, y)).unwrap();
            assert_eq!(pairs, want.iter().zip(0..).map(|(&x, y)| (x, y)).collect::<Vec<_>>(), "{l:?}");
            let mut bstride = vec![0; l.rank()];
            bstride[l.rank() - 1] = 1;
            let bl = Layout::new(l.shape.clone(), bstride, 0);
            let triples = map3("t", &ids, &c, &ids, l, &ids, &bl, |x, y, z| (x, y, z)).unwrap();
            let n = l.shape[l.rank() - 1];
            let want3: Vec<_> = want.iter().enumerate().map(|(i, &y)| (i, y, i % n)).collect();
            assert_eq!(triples, want3, "{l:?}");
        }
        // no stride-1 dim: the plain walk
        let l = base.slice("s", 2, 0, 70, 3).unwrap().permute("p", &[2, 0, 1]).unwrap();
        assert!(Transposed::new(&Plan::new(&l.shape, [&l])).is_none());
        assert_eq!(collect_offsets(&l), l.offsets().collect::<Vec<_>>());
    }

    #[test]
    fn runs_of_a_partial_range() {
        let l = Layout::contiguous(&[4, 6]).t("t").unwrap();
        let plan = Plan::new(&l.shape, [&l]);
        let mut seen = vec![];
        plan.for_each_run(3, 11, |pos, [s], len| {
            for j in 0..len {
                seen.push((pos + j, s + j * plan.inner_stride()[0]));
            }
        });
        let want: Vec<_> = l.offsets().enumerate().skip(3).take(8).map(|(i, o)| (i - 3, o)).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn map2_broadcast_and_transposed() {
        let a: Vec<i64> = (0..6).collect();
        let la = Layout::contiguous(&[2, 3]).t("t").unwrap(); // [3, 2]
        let b = vec![10i64, 20];
        let lb = Layout::new(vec![3, 2], vec![0, 1], 0);
        assert_eq!(map2("t", &a, &la, &b, &lb, |x, y| x + y).unwrap(), vec![10, 23, 11, 24, 12, 25]);
        let lb = Layout::new(vec![3, 2], vec![1, 0], 0);
        let b = vec![100i64, 200, 300];
        assert_eq!(map2("t", &a, &la, &b, &lb, |x, y| x + y).unwrap(), vec![100, 103, 201, 204, 302, 305]);
    }

    #[test]
    fn layout_checks() {
        assert!(check_layout("x", &Layout::contiguous(&[2, 3]), 6).is_ok());
        assert!(check_layout("x", &Layout::contiguous(&[2, 3]), 5).is_err());
        assert!(check_layout("x", &Layout::new(vec![0, 3], vec![3, 1], 100), 0).is_ok());
        assert!(check_layout("x", &Layout::new(vec![2], vec![usize::MAX], 0), 10).is_err());
        assert!(check_layout("x", &Layout::new(vec![1], vec![usize::MAX], 3), 4).is_ok());
    }
}
