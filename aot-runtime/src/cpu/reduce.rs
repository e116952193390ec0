//! Reductions over a set of dims: `sum`, `mean`, `amax` and `var`.
//!
//! The input is walked in the order of its strides (largest first) so reads
//! stay sequential whichever dims are reduced; each run of the innermost dim
//! either folds into one output element or adds elementwise into a row of
//! outputs. Floating inputs accumulate in f64 and round once at the end.

use super::elem::{float_or, max_nan, torch_type_name, FloatElem};
use super::strided::{check_layout, par_chunks, par_map, Plan, PAR_MIN};
use crate::backend::CpuStorage;
use crate::error::{AotError, Result};
use crate::host_alloc::{try_collect, try_filled};
use crate::layout::{contiguous_strides, Dims, Layout};
use aot_ir::OpKind;

/// The geometry of one reduction.
struct Reduction {
    /// The op, for errors.
    op: &'static str,
    /// The input with its kept dims first (in order), then its reduced dims;
    /// size-1 dims dropped.
    lin: Layout,
    /// How many leading dims of `lin` are kept.
    nk: usize,
    /// Number of outputs.
    out_n: usize,
    /// Number of inputs reduced into each output.
    red_n: usize,
    /// The first reduced dim (of the original layout) of size 0.
    empty_dim: Option<usize>,
}

impl Reduction {
    fn new(op: &'static str, l: &Layout, dims: &[usize]) -> Result<Self> {
        let rank = l.rank();
        let mask = reduced_mask(op, rank, dims)?;
        let (mut kept, mut red) = (vec![], vec![]);
        let (mut out_n, mut red_n) = (1usize, 1usize);
        let mut empty_dim = None;
        for d in 0..rank {
            let (n, s) = (l.shape[d], l.stride[d]);
            if mask[d] {
                // Saturating: a checked layout never gets there, and a
                // saturated count only makes the allocation below fail.
                red_n = red_n.saturating_mul(n);
                if n == 0 && empty_dim.is_none() {
                    empty_dim = Some(d);
                }
                if n != 1 {
                    red.push((n, s));
                }
            } else {
                out_n = out_n.saturating_mul(n);
                if n != 1 {
                    kept.push((n, s));
                }
            }
        }
        let nk = kept.len();
        let (shape, stride): (Vec<usize>, Vec<usize>) = kept.into_iter().chain(red).unzip();
        Ok(Reduction { op, lin: Layout::new(shape, stride, l.offset), nk, out_n, red_n, empty_dim })
    }
}

/// Which dims of a rank-`rank` tensor `dims` reduces (empty = all).
fn reduced_mask(op: &'static str, rank: usize, dims: &[usize]) -> Result<Vec<bool>> {
    let mut mask = vec![dims.is_empty(); rank];
    for &d in dims {
        if d < rank {
            mask[d] = true;
        } else if !(rank == 0 && d == 0) {
            let r = rank.max(1) as i64;
            return Err(AotError::DimOutOfRange { op, dim: d as i64, min: -r, max: r - 1 });
        }
    }
    Ok(mask)
}

/// Folds runs of the input into the accumulators:
/// `row(acc, base, o0, os, x0, xs, len)` handles `len` inputs at
/// `x0 + j*xs` whose outputs are `acc[o0 + j*os]` (`os == 0`: all into one);
/// `base` is the global index of `acc[0]`.
trait RowFn<A>: Fn(&mut [A], usize, usize, usize, usize, usize, usize) + Sync {}
impl<A, F: Fn(&mut [A], usize, usize, usize, usize, usize, usize) + Sync> RowFn<A> for F {}

/// Runs `row` over the runs of `lin` (kept dims first), `acc` being the
/// outputs of the kept dims in row-major order.
fn accumulate<A>(lin: &Layout, nk: usize, acc: &mut [A], base: usize, row: &impl RowFn<A>) {
    let rank = lin.rank();
    let numel = lin.numel();
    if numel == 0 {
        return;
    }
    let mut ostride = contiguous_strides(&lin.shape[..nk]);
    ostride.extend(std::iter::repeat_n(0, rank - nk));
    // Walk the input in memory order: largest stride outermost.
    let mut perm: Dims = (0..rank).collect();
    perm.sort_by(|&i, &j| lin.stride[j].cmp(&lin.stride[i]));
    let shape: Dims = perm.iter().map(|&d| lin.shape[d]).collect();
    let lx = Layout::new(shape.clone(), perm.iter().map(|&d| lin.stride[d]).collect::<Dims>(), lin.offset);
    let lo = Layout::new(shape.clone(), perm.iter().map(|&d| ostride[d]).collect::<Dims>(), 0);
    let plan = Plan::new(&shape, [&lo, &lx]);
    let [os, xs] = plan.inner_stride();
    plan.for_each_run(0, numel, |_, [o0, x0], len| row(acc, base, o0, os, x0, xs, len));
}

/// The outputs of a reduction: each starts at `init`, `row` folds inputs in,
/// `combine` merges partial results of parallel tasks. Every buffer sized
/// by the output count is allocated fallibly.
fn drive<A: Copy + Send + Sync>(r: &Reduction, init: A, row: impl RowFn<A>, combine: impl Fn(A, A) -> A + Sync) -> Result<Vec<A>> {
    let mut acc = try_filled(r.op, r.out_n, init)?;
    let lin = &r.lin;
    let numel = lin.numel();
    if numel == 0 {
        return Ok(acc);
    }
    let threads = rayon::current_num_threads();
    if numel < PAR_MIN || threads < 2 {
        accumulate(lin, r.nk, &mut acc, 0, &row);
        return Ok(acc);
    }
    // The largest reduced dim, to split when there are few outputs.
    let split_red = (r.nk..lin.rank()).max_by_key(|&d| lin.shape[d]);
    if r.nk > 0 && (lin.shape[0] >= threads || split_red.is_none()) {
        // Split the outermost kept dim: each task owns a block of outputs.
        let n0 = lin.shape[0];
        let per_row = r.out_n / n0;
        let rows = n0.div_ceil((threads * 4).min(n0));
        par_chunks(&mut acc, rows * per_row, &|start, chunk| {
            let mut sub = lin.clone();
            sub.offset += start / per_row * lin.stride[0];
            sub.shape[0] = chunk.len() / per_row;
            accumulate(&sub, r.nk, chunk, start, &row);
        });
    } else if let Some(d) = split_red {
        // Split the largest reduced dim: each task folds a slab into its own
        // outputs, which are then combined.
        let n = lin.shape[d];
        let per = n.div_ceil(threads.min(n));
        let partials = par_map(n.div_ceil(per), &|p| {
            let mut sub = lin.clone();
            sub.offset += p * per * lin.stride[d];
            sub.shape[d] = per.min(n - p * per);
            let mut part = try_filled(r.op, r.out_n, init)?;
            accumulate(&sub, r.nk, &mut part, 0, &row);
            Ok(part)
        });
        for part in partials {
            let part: Vec<A> = part?;
            for (a, p) in acc.iter_mut().zip(part) {
                *a = combine(*a, p);
            }
        }
    } else {
        accumulate(lin, r.nk, &mut acc, 0, &row);
    }
    Ok(acc)
}

/// A row function folding `conv(x)` into the outputs with `op`
/// (associative and commutative, with identity `id`).
fn fold_row<'a, T, A>(x: &'a [T], conv: impl Fn(T) -> A + Sync + 'a, op: impl Fn(A, A) -> A + Sync + 'a, id: A) -> impl RowFn<A> + 'a
where
    T: Copy + Sync,
    A: Copy + Sync + 'a,
{
    move |acc: &mut [A], _base: usize, o0: usize, os: usize, x0: usize, xs: usize, len: usize| {
        if os == 0 {
            // Four independent lanes: faster, and no worse for rounding.
            let mut lanes = [id; 4];
            if xs == 1 {
                let s = &x[x0..x0 + len];
                let mut chunks = s.chunks_exact(4);
                for c in &mut chunks {
                    for k in 0..4 {
                        lanes[k] = op(lanes[k], conv(c[k]));
                    }
                }
                for (k, &v) in chunks.remainder().iter().enumerate() {
                    lanes[k] = op(lanes[k], conv(v));
                }
            } else {
                for j in 0..len {
                    lanes[j % 4] = op(lanes[j % 4], conv(x[x0 + j * xs]));
                }
            }
            acc[o0] = op(acc[o0], op(op(lanes[0], lanes[1]), op(lanes[2], lanes[3])));
        } else if os == 1 && xs == 1 {
            for (a, &v) in acc[o0..o0 + len].iter_mut().zip(&x[x0..x0 + len]) {
                *a = op(*a, conv(v));
            }
        } else {
            for j in 0..len {
                let o = o0 + j * os;
                acc[o] = op(acc[o], conv(x[x0 + j * xs]));
            }
        }
    }
}

fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// Reduces `dims` of `l` in `src` (`dims` normalised, sorted and
/// deduplicated; empty = all dims). The output is contiguous with those dims
/// removed (or kept as size 1 with `keepdim`); `op` is one of
/// [`OpKind::is_fold_reduction`]. Sum of I64/Bool gives I64; Mean needs a
/// floating dtype. Reducing zero elements: Amax is an error, Sum gives 0
/// and Mean NaN.
pub fn reduce(op: OpKind, src: &CpuStorage, l: &Layout, dims: &[usize], keepdim: bool) -> Result<CpuStorage> {
    let name = op.torch_name();
    if !op.is_fold_reduction() {
        return Err(AotError::internal(name, format!("`{op}` is not a reduction over dims")));
    }
    check_layout(name, l, src.len())?;
    let r = Reduction::new(name, l, dims)?;
    if op == OpKind::AmaxDim {
        if let Some(d) = r.empty_dim {
            return Err(AotError::shape(
                name,
                format!("amax(): Expected reduction dim {d} to have non-zero size. (input shape {:?})", l.shape),
            ));
        }
    }
    let _ = keepdim; // the data order does not depend on it; the caller owns the shape
    fn float<T: FloatElem>(op: OpKind, v: &[T], r: &Reduction) -> Result<CpuStorage> {
        let n = r.red_n as f64;
        let out = match op {
            OpKind::SumDim => try_collect(r.op, drive(r, 0.0, fold_row(v, T::to_f64, add, 0.0), add)?.into_iter().map(T::from_f64)),
            OpKind::MeanDim => {
                try_collect(r.op, drive(r, 0.0, fold_row(v, T::to_f64, add, 0.0), add)?.into_iter().map(|s| T::from_f64(s / n)))
            }
            OpKind::AmaxDim => {
                let acc = drive(r, f64::NEG_INFINITY, fold_row(v, T::to_f64, max_nan, f64::NEG_INFINITY), max_nan)?;
                try_collect(r.op, acc.into_iter().map(T::from_f64))
            }
            _ => return Err(AotError::internal(r.op, format!("`{op}` is not a reduction over dims"))),
        };
        Ok(T::into_storage(out?))
    }
    float_or!(src, v => float(op, v, &r), other => match (op, other) {
        (OpKind::MeanDim, _) => Err(AotError::dtype(
            name,
            format!(
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
                torch_type_name(other.dtype())
            ),
        )),
        (OpKind::SumDim, CpuStorage::I64(v)) => {
            Ok(CpuStorage::I64(drive(&r, 0, fold_row(v, |x| x, i64::wrapping_add, 0), i64::wrapping_add)?))
        }
        (OpKind::SumDim, CpuStorage::Bool(v)) => {
            Ok(CpuStorage::I64(drive(&r, 0, fold_row(v, |x| x as i64, i64::wrapping_add, 0), i64::wrapping_add)?))
        }
        (OpKind::AmaxDim, CpuStorage::I64(v)) => {
            Ok(CpuStorage::I64(drive(&r, i64::MIN, fold_row(v, |x| x, i64::max, i64::MIN), i64::max)?))
        }
        (OpKind::AmaxDim, CpuStorage::Bool(v)) => {
            Ok(CpuStorage::Bool(drive(&r, false, fold_row(v, |x| x, |a, b| a | b, false), |a, b| a | b)?))
        }
        _ => Err(AotError::internal(name, "unhandled dtype")),
    })
}

/// The shape `reduce`/`var` give for `dims` of `shape`.
#[cfg(test)]
fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let mask = reduced_mask("test", shape.len(), dims).unwrap_or_default();
    shape
        .iter()
        .zip(mask)
        .filter_map(|(&n, m)| {
            if !m {
                Some(n)
            } else if keepdim {
                Some(1)
            } else {
                None
            }
        })
        .collect()
}

/// Variance over `dims` (as for [`reduce`]) dividing by
/// `max(0, N - correction)`, so too few elements give inf or NaN as in
/// PyTorch. Floating dtypes only; two passes (mean, then squared
/// deviations) in f64.
pub fn var(src: &CpuStorage, l: &Layout, dims: &[usize], correction: i64, keepdim: bool) -> Result<CpuStorage> {
    const OP: &str = "var";
    check_layout(OP, l, src.len())?;
    let r = Reduction::new(OP, l, dims)?;
    let _ = keepdim; // the data order does not depend on it
    fn float<T: FloatElem>(v: &[T], r: &Reduction, correction: i64) -> Result<CpuStorage> {
        let n = r.red_n as f64;
        let mut mean = drive(r, 0.0, fold_row(v, T::to_f64, add, 0.0), add)?;
        mean.iter_mut().for_each(|s| *s /= n);
        let mean = &mean;
        let squares = move |acc: &mut [f64], base: usize, o0: usize, os: usize, x0: usize, xs: usize, len: usize| {
            if os == 0 {
                let m = mean[base + o0];
                let mut s = 0.0;
                for j in 0..len {
                    let d = v[x0 + j * xs].to_f64() - m;
                    s += d * d;
                }
                acc[o0] += s;
            } else {
                for j in 0..len {
                    let o = o0 + j * os;
                    let d = v[x0 + j * xs].to_f64() - mean[base + o];
                    acc[o] += d * d;
                }
            }
        };
        let div = (n - correction as f64).max(0.0);
        Ok(T::into_storage(try_collect(r.op, drive(r, 0.0, squares, add)?.into_iter().map(|s| T::from_f64(s / div)))?))
    }
    float_or!(src, v => float(v, &r, correction), other => Err(AotError::dtype(
        OP,
        format!("std and var only support floating point and complex dtypes, got {}", torch_type_name(other.dtype())),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::testutil::{assert_close, layouts, logical, random_values, rounded, storage, tol, values};
    use crate::dtype::DType;

    /// Groups the row-major `input` of `shape` by output element and applies `f`.
    fn reference(input: &[f64], shape: &[usize], dims: &[usize], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
        let mask = reduced_mask("test", shape.len(), dims).unwrap();
        let out_n: usize = shape.iter().zip(&mask).filter(|(_, &m)| !m).map(|(&n, _)| n).product();
        let mut groups = vec![vec![]; out_n];
        for (i, &v) in input.iter().enumerate() {
            let (mut rem, mut o, mut scale) = (i, 0, 1);
            for d in (0..shape.len()).rev() {
                let idx = rem % shape[d];
                rem /= shape[d];
                if !mask[d] {
                    o += idx * scale;
                    scale *= shape[d];
                }
            }
            groups[o].push(v);
        }
        groups.iter().map(|g| f(g)).collect()
    }

    fn sum(g: &[f64]) -> f64 {
        g.iter().sum()
    }
    fn mean(g: &[f64]) -> f64 {
        sum(g) / g.len() as f64
    }
    fn amax(g: &[f64]) -> f64 {
        g.iter().fold(f64::NEG_INFINITY, |m, &x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x) })
    }
    fn variance(g: &[f64], correction: i64) -> f64 {
        let m = mean(g);
        g.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (g.len() as f64 - correction as f64).max(0.0)
    }

    fn dim_sets(rank: usize) -> Vec<Vec<usize>> {
        (0u32..1 << rank).map(|bits| (0..rank).filter(|d| bits & (1 << d) != 0).collect()).collect()
    }

    #[test]
    fn float_reductions_match_reference() {
        for shape in [vec![2usize, 3, 4], vec![3, 5], vec![7]] {
            for (name, l) in layouts(&shape) {
                let data = random_values(l.storage_extent(), -2.0, 2.0, 11);
                for dtype in DType::FLOATS {
                    let src = storage(dtype, &data);
                    let input = logical(&values(&src), &l);
                    for dims in dim_sets(shape.len()) {
                        let what = format!("{dtype} {name} {shape:?} dims {dims:?}");
                        for (op, f) in [(OpKind::SumDim, sum as fn(&[f64]) -> f64), (OpKind::MeanDim, mean), (OpKind::AmaxDim, amax)] {
                            let out = reduce(op, &src, &l, &dims, false).unwrap();
                            let kept = reduce(op, &src, &l, &dims, true).unwrap();
                            assert_eq!(out, kept);
                            assert_eq!(out.len(), reduced_shape(&shape, &dims, true).iter().product::<usize>());
                            assert_eq!(out.dtype(), dtype);
                            let want = rounded(dtype, &reference(&input, &shape, &dims, f));
                            assert_close(&values(&out), &want, tol(dtype), &format!("{op:?} {what}"));
                        }
                        for correction in [0, 1] {
                            let out = var(&src, &l, &dims, correction, false).unwrap();
                            let want = rounded(dtype, &reference(&input, &shape, &dims, |g| variance(g, correction)));
                            assert_close(&values(&out), &want, tol(dtype), &format!("var({correction}) {what}"));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn large_reductions_use_every_split() {
        for shape in [vec![64usize, 1024], vec![3, 40000], vec![40000, 3], vec![2, 2, 20000]] {
            for (name, l) in layouts(&shape) {
                let data = random_values(l.storage_extent(), -1.0, 1.0, 5);
                for dtype in [DType::F32, DType::F64] {
                    let src = storage(dtype, &data);
                    let input = logical(&values(&src), &l);
                    for dims in dim_sets(shape.len()) {
                        let what = format!("{dtype} {name} {shape:?} dims {dims:?}");
                        let out = reduce(OpKind::SumDim, &src, &l, &dims, false).unwrap();
                        let want = rounded(dtype, &reference(&input, &shape, &dims, sum));
                        assert_close(&values(&out), &want, tol(dtype) * 10.0, &format!("sum {what}"));
                        let out = reduce(OpKind::AmaxDim, &src, &l, &dims, false).unwrap();
                        assert_close(&values(&out), &rounded(dtype, &reference(&input, &shape, &dims, amax)), 0.0, &format!("amax {what}"));
                        let out = var(&src, &l, &dims, 1, false).unwrap();
                        let want = rounded(dtype, &reference(&input, &shape, &dims, |g| variance(g, 1)));
                        assert_close(&values(&out), &want, tol(dtype) * 10.0, &format!("var {what}"));
                    }
                }
                let ints: Vec<f64> = (0..l.storage_extent()).map(|i| (i % 13) as f64 - 6.0).collect();
                let src = storage(DType::I64, &ints);
                let input = logical(&ints, &l);
                for dims in dim_sets(shape.len()) {
                    let out = reduce(OpKind::SumDim, &src, &l, &dims, false).unwrap();
                    assert_eq!(values(&out), reference(&input, &shape, &dims, sum), "i64 sum {name} {shape:?} {dims:?}");
                }
            }
        }
    }

    #[test]
    fn int_and_bool_reductions() {
        let l = Layout::contiguous(&[2, 3]).t("t").unwrap(); // [[1, 4], [2, 5], [3, 6]] as [3, 2]
        let i = CpuStorage::I64(vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(reduce(OpKind::SumDim, &i, &l, &[1], false).unwrap(), CpuStorage::I64(vec![5, 7, 9]));
        assert_eq!(reduce(OpKind::SumDim, &i, &l, &[], false).unwrap(), CpuStorage::I64(vec![21]));
        assert_eq!(reduce(OpKind::AmaxDim, &i, &l, &[0], true).unwrap(), CpuStorage::I64(vec![3, 6]));
        assert!(matches!(reduce(OpKind::MeanDim, &i, &l, &[0], false), Err(AotError::DTypeMismatch { .. })));
        assert!(var(&i, &l, &[0], 1, false).is_err());
        let b = CpuStorage::Bool(vec![true, false, true, true, false, false]);
        assert_eq!(reduce(OpKind::SumDim, &b, &l, &[0], false).unwrap(), CpuStorage::I64(vec![2, 1]));
        assert_eq!(reduce(OpKind::AmaxDim, &b, &l, &[1], false).unwrap(), CpuStorage::Bool(vec![true, false, true]));
        assert!(reduce(OpKind::MeanDim, &b, &l, &[], false).is_err());
    }

    #[test]
    fn empty_and_scalar_reductions() {
        let l = Layout::contiguous(&[0, 3]);
        let s = CpuStorage::F32(vec![]);
        assert_eq!(reduce(OpKind::SumDim, &s, &l, &[0], false).unwrap(), CpuStorage::F32(vec![0.0; 3]));
        assert_eq!(reduce(OpKind::SumDim, &s, &l, &[], false).unwrap(), CpuStorage::F32(vec![0.0]));
        assert_eq!(reduce(OpKind::SumDim, &s, &l, &[1], false).unwrap(), CpuStorage::F32(vec![]));
        assert!(values(&reduce(OpKind::MeanDim, &s, &l, &[0], false).unwrap()).iter().all(|v| v.is_nan()));
        assert!(values(&var(&s, &l, &[], 1, false).unwrap())[0].is_nan());
        let err = reduce(OpKind::AmaxDim, &s, &l, &[0], false).unwrap_err();
        assert!(err.to_string().contains("Expected reduction dim 0 to have non-zero size"), "{err}");
        assert!(reduce(OpKind::AmaxDim, &s, &l, &[], false).is_err());
        assert_eq!(reduce(OpKind::AmaxDim, &s, &l, &[1], false).unwrap(), CpuStorage::F32(vec![]));
        assert_eq!(reduce(OpKind::SumDim, &CpuStorage::I64(vec![]), &l, &[0], true).unwrap(), CpuStorage::I64(vec![0; 3]));
        // a 0-d tensor
        let scalar = Layout::new(vec![], vec![], 2);
        let x = CpuStorage::F64(vec![0.0, 0.0, 4.5]);
        assert_eq!(reduce(OpKind::SumDim, &x, &scalar, &[], false).unwrap(), CpuStorage::F64(vec![4.5]));
        assert_eq!(reduce(OpKind::MeanDim, &x, &scalar, &[0], true).unwrap(), CpuStorage::F64(vec![4.5]));
        assert!(reduce(OpKind::SumDim, &x, &scalar, &[1], false).is_err());
        assert!(reduce(OpKind::SumDim, &x, &Layout::contiguous(&[3]), &[1], false).is_err());
    }

    #[test]
    fn nan_and_correction_edge_cases() {
        let l = Layout::contiguous(&[3]);
        let s = CpuStorage::F32(vec![1.0, f32::NAN, 3.0]);
        assert!(values(&reduce(OpKind::AmaxDim, &s, &l, &[], false).unwrap())[0].is_nan());
        let s = CpuStorage::F64(vec![1.0, 2.0]);
        let l2 = Layout::contiguous(&[2]);
        assert_eq!(values(&var(&s, &l2, &[], 0, false).unwrap()), vec![0.25]);
        assert_eq!(values(&var(&s, &l2, &[], 1, false).unwrap()), vec![0.5]);
        assert_eq!(values(&var(&s, &l2, &[], 3, false).unwrap()), vec![f64::INFINITY]);
        assert!(values(&var(&s, &Layout::contiguous(&[1]), &[], 1, false).unwrap())[0].is_nan());
        assert_eq!(values(&var(&s, &l2, &[], -2, false).unwrap()), vec![0.125]);
        assert_eq!(reduced_shape(&[2, 3, 4], &[0, 2], true), vec![1, 3, 1]);
        assert_eq!(reduced_shape(&[2, 3, 4], &[], false), Vec::<usize>::new());
    }
}
