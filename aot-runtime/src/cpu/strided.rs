//! Strided iteration shared by the kernels: bounds checks, dimension
//! coalescing, and the elementwise engine (`map1`/`map2`/`map3`) that walks
//! one to three layouts of the same shape in row-major order, one contiguous
//! "run" of the innermost dimension at a time, in parallel for large inputs.

use crate::error::{AotError, Result};
use crate::layout::Layout;
use rayon::prelude::*;

/// Inputs with at least this many elements are processed in parallel.
pub(crate) const PAR_MIN: usize = 32 * 1024;
/// Elements per parallel task of the elementwise engine.
const CHUNK: usize = 16 * 1024;

/// Checks that every element of `l` lies inside a buffer of `len` elements,
/// so the kernels can index without panicking (and without overflow).
pub(crate) fn check_layout(op: &'static str, l: &Layout, len: usize) -> Result<()> {
    if l.shape.len() != l.stride.len() {
        return Err(AotError::internal(op, format!("layout with {} sizes but {} strides", l.shape.len(), l.stride.len())));
    }
    if l.shape.contains(&0) {
        return Ok(());
    }
    let mut last = Some(l.offset);
    for (&n, &s) in l.shape.iter().zip(&l.stride) {
        last = last.and_then(|a| (n - 1).checked_mul(s).and_then(|d| a.checked_add(d)));
    }
    match last {
        Some(last) if last < len => Ok(()),
        _ => Err(AotError::internal(
            op,
            format!("layout {:?} / {:?} at offset {} reaches past a buffer of {len} elements", l.shape, l.stride, l.offset),
        )),
    }
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
    outer: Vec<usize>,
    outer_strides: [Vec<usize>; N],
    inner: usize,
    inner_stride: [usize; N],
    offset: [usize; N],
}

impl<const N: usize> Plan<N> {
    /// `shape` must be the shape of every layout in `ls`.
    pub(crate) fn new(shape: &[usize], ls: [&Layout; N]) -> Self {
        let offset = std::array::from_fn(|k| ls[k].offset);
        if shape.contains(&0) {
            return Plan { outer: vec![], outer_strides: std::array::from_fn(|_| vec![]), inner: 0, inner_stride: [0; N], offset };
        }
        // Merged dims, innermost first.
        let mut sizes: Vec<usize> = Vec::with_capacity(shape.len());
        let mut strides: Vec<[usize; N]> = Vec::with_capacity(shape.len());
        for d in (0..shape.len()).rev() {
            let n = shape[d];
            if n == 1 {
                continue;
            }
            let s: [usize; N] = std::array::from_fn(|k| ls[k].stride[d]);
            if let (Some(last_n), Some(last_s)) = (sizes.last_mut(), strides.last()) {
                if (0..N).all(|k| s[k] == last_s[k] * *last_n) {
                    *last_n *= n;
                    continue;
                }
            }
            sizes.push(n);
            strides.push(s);
        }
        if sizes.is_empty() {
            return Plan { outer: vec![], outer_strides: std::array::from_fn(|_| vec![]), inner: 1, inner_stride: [1; N], offset };
        }
        let inner = sizes[0];
        let inner_stride = strides[0];
        let outer: Vec<usize> = sizes[1..].iter().rev().copied().collect();
        let outer_strides = std::array::from_fn(|k| strides[1..].iter().rev().map(|s| s[k]).collect());
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
    pub(crate) fn for_each_run(&self, start: usize, end: usize, mut f: impl FnMut(usize, [usize; N], usize)) {
        if start >= end || self.inner == 0 {
            return;
        }
        let rank = self.outer.len();
        let mut idx = vec![0usize; rank];
        let mut row = start / self.inner;
        let mut col = start % self.inner;
        for d in (0..rank).rev() {
            idx[d] = row % self.outer[d];
            row /= self.outer[d];
        }
        let mut base = self.offset;
        for d in 0..rank {
            for k in 0..N {
                base[k] += idx[d] * self.outer_strides[k][d];
            }
        }
        let mut pos = start;
        loop {
            let len = (self.inner - col).min(end - pos);
            let starts = std::array::from_fn(|k| base[k] + col * self.inner_stride[k]);
            f(pos - start, starts, len);
            pos += len;
            if pos >= end {
                return;
            }
            col = 0;
            // Next row: odometer over the outer dims.
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < self.outer[d] {
                    for k in 0..N {
                        base[k] += self.outer_strides[k][d];
                    }
                    break;
                }
                for k in 0..N {
                    base[k] -= (self.outer[d] - 1) * self.outer_strides[k][d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Fills `out` (the row-major elements of `shape`) run by run:
/// `kernel(out_run, starts, strides)`. Parallel for large outputs.
pub(crate) fn fill_runs<const N: usize, U: Send>(
    out: &mut [U],
    shape: &[usize],
    ls: [&Layout; N],
    kernel: impl Fn(&mut [U], [usize; N], [usize; N]) + Sync,
) {
    let plan = Plan::new(shape, ls);
    let strides = plan.inner_stride();
    let run = |start: usize, chunk: &mut [U]| {
        plan.for_each_run(start, start + chunk.len(), |pos, starts, len| kernel(&mut chunk[pos..pos + len], starts, strides));
    };
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| run(i * CHUNK, c));
    } else {
        run(0, out);
    }
}

/// `f` of each element of `a` (read through `la`), as a contiguous vector.
pub(crate) fn map1<T: Copy + Sync, U: Copy + Default + Send>(a: &[T], la: &Layout, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    let mut out = vec![U::default(); la.numel()];
    map1_into(&mut out, a, la, f);
    out
}

/// Like [`map1`], writing into `out` (of `la.numel()` elements).
pub(crate) fn map1_into<T: Copy + Sync, U: Copy + Send>(out: &mut [U], a: &[T], la: &Layout, f: impl Fn(T) -> U + Sync) {
    let n = out.len();
    if n == 0 {
        return;
    }
    if la.is_contiguous() {
        let src = &a[la.offset..la.offset + n];
        if n >= PAR_MIN {
            out.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(o, s)| {
                for (o, &x) in o.iter_mut().zip(s) {
                    *o = f(x);
                }
            });
        } else {
            for (o, &x) in out.iter_mut().zip(src) {
                *o = f(x);
            }
        }
        return;
    }
    fill_runs(out, &la.shape, [la], |o, [s], [st]| {
        if st == 1 {
            for (o, &x) in o.iter_mut().zip(&a[s..s + o.len()]) {
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
pub(crate) fn map2<A: Copy + Sync, B: Copy + Sync, U: Copy + Default + Send>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> U + Sync,
) -> Vec<U> {
    let mut out = vec![U::default(); la.numel()];
    fill_runs(&mut out, &la.shape, [la, lb], |o, [sa, sb], strides| {
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
    out
}

/// `f` of each triple of elements of `a`, `b` and `c` (layouts of one shape).
pub(crate) fn map3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, U: Copy + Default + Send>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    c: &[C],
    lc: &Layout,
    f: impl Fn(A, B, C) -> U + Sync,
) -> Vec<U> {
    let mut out = vec![U::default(); la.numel()];
    fill_runs(&mut out, &la.shape, [la, lb, lc], |o, [sa, sb, sc], strides| {
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
    out
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
        map1(&(0..l.storage_extent()).collect::<Vec<usize>>(), l, |i| i)
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
        assert_eq!(map2(&a, &la, &b, &lb, |x, y| x + y), vec![10, 23, 11, 24, 12, 25]);
        let lb = Layout::new(vec![3, 2], vec![1, 0], 0);
        let b = vec![100i64, 200, 300];
        assert_eq!(map2(&a, &la, &b, &lb, |x, y| x + y), vec![100, 103, 201, 204, 302, 305]);
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
