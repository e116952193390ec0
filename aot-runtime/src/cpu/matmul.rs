//! Batched matrix multiply on the `gemm` crate.
//!
//! f32 and f64 go straight to `gemm` with the operands' own strides (a
//! transposed operand is never copied), into a buffer from the buffer
//! cache when one fits, not zeroed first (`gemm` overwrites it); f16/bf16 are widened to f32,
//! multiplied, and rounded once; i64 uses a plain loop (wrapping, like
//! PyTorch's integer matmul). `gemm` is built with its `x86-v4` feature, so
//! it dispatches to AVX-512 kernels where the CPU has them (on stable Rust
//! it otherwise runs its AVX2/FMA ones, at about 60% of the speed). Large
//! matrices run on rayon's threads inside `gemm`; batches of small or thin
//! ones are split across threads one matrix each.

use super::elem::{torch_type_name, FloatElem};
use super::strided::{check_layout, map1, par_chunks};
use crate::backend::CpuStorage;
use crate::error::{AotError, Result};
use crate::host_alloc::{try_buffer, try_filled};
use crate::layout::{checked_numel, Layout};
use gemm::Parallelism;
use std::mem::MaybeUninit;

const OP: &str = "matmul";

/// Below this many multiply-adds per matrix, one `gemm` call stays on one
/// thread (measured on 2 AVX-512 cores: 128^3 runs slower on two threads,
/// the split costs more than the ~25 µs of work).
const GEMM_PAR_WORK: usize = 1 << 22;
/// A matrix with a dim under this also stays on one thread, however much
/// work it has: `gemm` splits the other dims into panels and a thin product
/// gives each thread too little to repay the split (256x10x1024 and
/// 256x1024x10, the last layer of an MLP, ran 1.5-2x slower on 2 threads;
/// 32x1024x1024 gained nothing).
const GEMM_PAR_MIN_DIM: usize = 64;
/// With many matrices, each at most this many multiply-adds (or too thin
/// to thread), the batch is split across threads instead.
const BATCH_PAR_MAX_WORK: usize = 256 * 256 * 256;

/// The element types `gemm` is called with (only these: `gemm::gemm` panics
/// for others).
trait GemmElem: Copy + Send + Sync + Default + 'static {
    const ZERO: Self;
    const ONE: Self;
}
impl GemmElem for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}
impl GemmElem for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

/// Where each matrix of one batched operand `[..batch, rows, cols]` starts,
/// and its row and column strides.
struct Operand {
    /// Per matrix, in row-major order of the batch dims, its first element.
    starts: Vec<usize>,
    rs: isize,
    cs: isize,
}

impl Operand {
    fn new(l: &Layout) -> Result<Operand> {
        let r = l.rank();
        // The stride of a size-1 dim is never used to step; make it 0 so any
        // value fits in an isize.
        let eff = |d: usize| if l.shape[d] <= 1 { 0 } else { l.stride[d] };
        let signed = |s: usize| isize::try_from(s).map_err(|_| AotError::internal(OP, format!("stride {s} does not fit in isize")));
        let batch = Layout::new(l.shape[..r - 2].to_vec(), l.stride[..r - 2].to_vec(), l.offset);
        Ok(Operand { starts: batch.offsets().collect(), rs: signed(eff(r - 2))?, cs: signed(eff(r - 1))? })
    }
}

/// Batched matmul: `la` is `[..batch, m, k]`, `lb` is `[..batch, k, n]`
/// with the same batch dims (any strides, so attention's heads of a
/// transposed projection are read in place; a batch stride of 0
/// broadcasts). The output is a contiguous `[batch, m, n]` buffer of the
/// operands' (common) dtype, `batch` the product of the batch dims.
pub fn matmul(a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
    if la.rank() < 3 || la.rank() != lb.rank() || la.shape[..la.rank() - 2] != lb.shape[..lb.rank() - 2] {
        return Err(AotError::shape(
            OP,
            format!(
                "batched matmul expects operands of rank 3 or more with the same batch dims, got shapes {:?} and {:?}",
                la.shape, lb.shape
            ),
        ));
    }
    let r = la.rank();
    let (m, k) = (la.shape[r - 2], la.shape[r - 1]);
    let (k_b, n) = (lb.shape[r - 2], lb.shape[r - 1]);
    let (batch, batch_b): (usize, usize) = (la.shape[..r - 2].iter().product(), lb.shape[..r - 2].iter().product());
    if batch != batch_b {
        return Err(AotError::shape(OP, format!("batch sizes differ: {batch} and {batch_b} (shapes {:?} and {:?})", la.shape, lb.shape)));
    }
    if k != k_b {
        return Err(AotError::shape(OP, format!("mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k_b}x{n})")));
    }
    if a.dtype() != b.dtype() {
        return Err(AotError::dtype(OP, format!("expected both operands to have the same dtype, but got {} and {}", a.dtype(), b.dtype())));
    }
    check_layout(OP, la, a.len())?;
    check_layout(OP, lb, b.len())?;
    let dims = Dims { batch, m, k, n };
    match (a, b) {
        (CpuStorage::F32(x), CpuStorage::F32(y)) => Ok(CpuStorage::F32(gemm_batched(dims, x, la, y, lb)?)),
        (CpuStorage::F64(x), CpuStorage::F64(y)) => Ok(CpuStorage::F64(gemm_batched(dims, x, la, y, lb)?)),
        (CpuStorage::F16(x), CpuStorage::F16(y)) => Ok(CpuStorage::F16(via_f32(dims, x, la, y, lb)?)),
        (CpuStorage::BF16(x), CpuStorage::BF16(y)) => Ok(CpuStorage::BF16(via_f32(dims, x, la, y, lb)?)),
        (CpuStorage::I64(x), CpuStorage::I64(y)) => Ok(CpuStorage::I64(naive_i64(dims, x, la, y, lb)?)),
        _ => Err(AotError::dtype(OP, format!("\"addmm_impl_cpu_\" not implemented for '{}'", torch_type_name(a.dtype())))),
    }
}

#[derive(Clone, Copy)]
struct Dims {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
}

/// The operand widened to a contiguous f32 buffer and its layout. A batch
/// dim of stride 0 stays stride 0 (the matrix is widened once).
fn widen<T: FloatElem<C = f32>>(x: &[T], l: &Layout) -> Result<(Vec<f32>, Layout)> {
    let rank = l.rank();
    let (r, c) = (l.shape[rank - 2], l.shape[rank - 1]);
    let batch: usize = l.shape[..rank - 2].iter().product();
    if rank > 3 {
        let data = map1(OP, x, l, T::to_c)?;
        return Ok((data, Layout::contiguous(&[batch, r, c])));
    }
    let broadcast = batch > 1 && l.stride[0] == 0;
    let shape = [if broadcast { 1 } else { batch }, r, c];
    let src = Layout::new(shape.to_vec(), l.stride.clone(), l.offset);
    let data = map1(OP, x, &src, T::to_c)?;
    let stride = vec![if broadcast { 0 } else { r * c }, c, 1];
    Ok((data, Layout::new(vec![batch, r, c], stride, 0)))
}

fn via_f32<T: FloatElem<C = f32>>(d: Dims, x: &[T], la: &Layout, y: &[T], lb: &Layout) -> Result<Vec<T>> {
    let (xa, la) = widen(x, la)?;
    let (yb, lb) = widen(y, lb)?;
    let out = gemm_batched(d, &xa, &la, &yb, &lb)?;
    T::from_c_vec(OP, out)
}

fn gemm_batched<T: GemmElem>(d: Dims, x: &[T], la: &Layout, y: &[T], lb: &Layout) -> Result<Vec<T>> {
    let Dims { batch, m, k, n } = d;
    let total = checked_numel(OP, &[batch, m, n])?;
    if total == 0 || k == 0 {
        return try_filled(OP, total, T::ZERO);
    }
    // A recycled buffer where one fits (its pages are mapped: a fresh
    // multi-MB output paid a page fault per 4 KiB), and no zero fill:
    // `gemm` overwrites every element (see the SAFETY notes).
    let mut out = try_buffer::<T>(OP, total)?;
    let (pa, pb) = (Operand::new(la)?, Operand::new(lb)?);
    // Only a scheduling heuristic: saturate rather than overflow.
    let work = m.saturating_mul(n).saturating_mul(k);
    // `dst` is the output matrix `bi` (m*n elements, row-major).
    let one = |bi: usize, dst: &mut [MaybeUninit<T>], par: Parallelism| {
        let lhs = &x[pa.starts[bi]..];
        let rhs = &y[pb.starts[bi]..];
        // A column-major right operand (`a @ w.t()`) is repacked row-major
        // first where the product is large: `gemm` 0.19 packs it at about
        // 55% of its row-major speed, and the copy costs k*n moves against
        // m*k*n multiply-adds (256x1024x1024 on 2 AVX-512 cores: 5.0-5.3 ms
        // direct, 3.6-3.8 ms repacked).
        let packed = (pb.rs == 1 && pb.cs != 1 && m.min(n).min(k) >= GEMM_PAR_MIN_DIM && work >= GEMM_PAR_WORK)
            .then(|| rows_of_columns(rhs, k, n, pb.cs as usize))
            .flatten();
        let (rhs, rcs, rrs) = match &packed {
            Some(p) => (&p[..], 1, n as isize),
            None => (rhs, pb.cs, pb.rs),
        };
        // SAFETY: `gemm` reads lhs[i*rs + p*cs] for i < m, p < k: from the
        // matrix's start these are storage indices of `la`, all below
        // `x.len()` (checked by `check_layout`), so they lie in `lhs`; the
        // same holds for `rhs` (p < k, j < n) with `lb` and `y`. `dst` is an
        // exclusively borrowed slice of exactly m*n elements written at
        // i*n + j (rs = n, cs = 1), disjoint from both inputs. m, n, k > 0
        // here, strides are non-negative and fit in isize, and `T` is f32
        // or f64, the types `gemm` supports without panicking. With
        // `read_dst` false `gemm` sets its dst factor to zero and then only
        // stores to `dst` (every path of gemm-common 0.19 tests for a zero
        // factor before any load of `dst`), so `dst` may be uninitialised.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr().cast::<T>(),
                1,
                n as isize,
                false,
                lhs.as_ptr(),
                pa.cs,
                pa.rs,
                rhs.as_ptr(),
                rcs,
                rrs,
                T::ZERO,
                T::ONE,
                false,
                false,
                false,
                par,
            )
        };
        if let Some(p) = packed {
            crate::buffer_cache::give(p);
        }
    };
    let spare = &mut out.spare_capacity_mut()[..total];
    let threads = rayon::current_num_threads();
    let threaded = threads > 1 && work >= GEMM_PAR_WORK && m.min(n).min(k) >= GEMM_PAR_MIN_DIM;
    if batch > 1 && threads > 1 && (work <= BATCH_PAR_MAX_WORK || !threaded) && batch.saturating_mul(work) >= GEMM_PAR_WORK {
        par_chunks(spare, m * n, &|start, dst| one(start / (m * n), dst, Parallelism::None));
    } else {
        let par = if threaded { Parallelism::Rayon(0) } else { Parallelism::None };
        for (bi, dst) in spare.chunks_mut(m * n).enumerate() {
            one(bi, dst, par);
        }
    }
    // SAFETY: the chunks of m*n cover all `total` slots, and `gemm` wrote
    // every element of each (above).
    unsafe { out.set_len(total) };
    Ok(out)
}

/// The `k x n` matrix whose element (p, j) is `src[p + j * cs]` (a
/// column-major operand, `cs >= k`), copied row-major in 16x16 tiles: each
/// tile reads 16 whole column runs into a local block and writes 16 whole
/// row runs from it, so every cache line touched is used at once (a plain
/// strided loop over a 4 KiB column stride thrashed L1's sets: 3 ms for
/// 1024x1024 against 0.3-0.5 ms). Bands of tile rows run on rayon's
/// threads. `None` when no buffer can be had: the caller multiplies
/// without repacking.
fn rows_of_columns<T: GemmElem>(src: &[T], k: usize, n: usize, cs: usize) -> Option<Vec<T>> {
    const TILE: usize = 16;
    let total = k.checked_mul(n)?;
    let mut out = crate::host_alloc::try_buffer::<T>(OP, total).ok()?;
    out.resize(total, T::ZERO);
    let band = |start: usize, rows: &mut [T]| {
        let p0 = start / n;
        let height = rows.len() / n;
        let mut block = [[T::ZERO; TILE]; TILE];
        for j0 in (0..n).step_by(TILE) {
            let width = TILE.min(n - j0);
            for (dj, run) in block.iter_mut().enumerate().take(width) {
                let at = p0 + (j0 + dj) * cs;
                run[..height].copy_from_slice(&src[at..at + height]);
            }
            for dp in 0..height {
                let row = &mut rows[dp * n + j0..dp * n + j0 + width];
                for (o, run) in row.iter_mut().zip(&block) {
                    *o = run[dp];
                }
            }
        }
    };
    par_chunks(&mut out, TILE * n, &band);
    Some(out)
}

/// Integer matmul by a plain loop (wrapping on overflow).
fn naive_i64(d: Dims, x: &[i64], la: &Layout, y: &[i64], lb: &Layout) -> Result<Vec<i64>> {
    let Dims { batch, m, k, n } = d;
    let mut out = try_filled(OP, checked_numel(OP, &[batch, m, n])?, 0i64)?;
    if out.is_empty() {
        return Ok(out);
    }
    let (pa, pb) = (Operand::new(la)?, Operand::new(lb)?);
    let (ars, acs, brs, bcs) = (pa.rs as usize, pa.cs as usize, pb.rs as usize, pb.cs as usize);
    let per_batch = |start: usize, dst: &mut [i64]| {
        let bi = start / (m * n);
        for i in 0..m {
            for p in 0..k {
                let av = x[pa.starts[bi] + i * ars + p * acs];
                let brow = pb.starts[bi] + p * brs;
                for (j, o) in dst[i * n..(i + 1) * n].iter_mut().enumerate() {
                    *o = o.wrapping_add(av.wrapping_mul(y[brow + j * bcs]));
                }
            }
        }
    };
    if batch > 1 && out.len().saturating_mul(k) >= super::strided::PAR_MIN {
        par_chunks(&mut out, m * n, &per_batch);
    } else {
        for (bi, dst) in out.chunks_mut(m * n).enumerate() {
            per_batch(bi * m * n, dst);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::testutil::{assert_close, random_values, rounded, storage, tol, values};
    use crate::dtype::DType;

    /// The naive triple loop over `[batch, m, k] x [batch, k, n]`, in f64.
    fn reference(x: &[f64], la: &Layout, y: &[f64], lb: &Layout) -> Vec<f64> {
        let (batch, m, k, n) = (la.shape[0], la.shape[1], la.shape[2], lb.shape[2]);
        let at = |l: &Layout, d: &[f64], b: usize, i: usize, j: usize| d[l.offset + b * l.stride[0] + i * l.stride[1] + j * l.stride[2]];
        let mut out = vec![0.0; batch * m * n];
        for b in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    out[(b * m + i) * n + j] = (0..k).map(|p| at(la, x, b, i, p) * at(lb, y, b, p, j)).sum();
                }
            }
        }
        out
    }

    /// Layouts of `[batch, rows, cols]`: contiguous, with the matrices
    /// transposed in memory, or with batch stride 0.
    fn operand(kind: usize, batch: usize, rows: usize, cols: usize) -> Layout {
        match kind {
            0 => Layout::contiguous(&[batch, rows, cols]),
            1 => Layout::contiguous(&[batch, cols, rows]).transpose("t", 1, 2).unwrap(),
            _ => Layout::new(vec![batch, rows, cols], vec![0, cols, 1], 2),
        }
    }

    /// Large enough for the column-major right operand to be repacked
    /// (`rows_of_columns`): sizes off the tile grid, alone and batched
    /// (threads per matrix), with a broadcast batch.
    #[test]
    fn repacked_right_operand_matches_naive_loop() {
        for &(batch, m, k, n) in &[(1, 130, 260, 131), (2, 130, 260, 131)] {
            for ka in 0..3 {
                let la = operand(ka, batch, m, k);
                let lb = operand(1, batch, k, n);
                let da = random_values(la.storage_extent(), -1.0, 1.0, 23);
                let db = random_values(lb.storage_extent(), -1.0, 1.0, 24);
                for dtype in [DType::F32, DType::F64] {
                    let (a, b) = (storage(dtype, &da), storage(dtype, &db));
                    let out = matmul(&a, &la, &b, &lb).unwrap();
                    let want = rounded(dtype, &reference(&values(&a), &la, &values(&b), &lb));
                    let t = tol(dtype) * if dtype == DType::F32 { k as f64 } else { 2.0 };
                    assert_close(&values(&out), &want, t, &format!("{dtype} {batch}x{m}x{k}x{n} kind {ka}"));
                }
            }
        }
    }

    /// Two batch dims that no single stride covers (attention's heads,
    /// `[b, t, h, d]` transposed to `[b, h, t, d]`), in every dtype: the
    /// same values as the contiguous copy multiplied as one batch (to the
    /// rounding of the sums' order).
    #[test]
    fn strided_batch_dims_match_contiguous_copy() {
        let (b, h, t, d) = (3, 4, 5, 6);
        let heads = |seed| {
            let l = Layout::contiguous(&[b, t, h, d]).transpose("t", 1, 2).unwrap();
            (random_values(b * t * h * d, -1.0, 1.0, seed), l)
        };
        let ((da, la), (db, lb)) = (heads(31), heads(32));
        let lb = lb.transpose("t", 2, 3).unwrap();
        let flat = |v: &[f64], l: &Layout| -> (Vec<f64>, Layout) {
            (l.offsets().map(|o| v[o]).collect(), Layout::contiguous(&[b * h, l.shape[2], l.shape[3]]))
        };
        let ((ca, cla), (cb, clb)) = (flat(&da, &la), flat(&db, &lb));
        for dtype in DType::FLOATS {
            let out = matmul(&storage(dtype, &da), &la, &storage(dtype, &db), &lb).unwrap();
            let want = matmul(&storage(dtype, &ca), &cla, &storage(dtype, &cb), &clb).unwrap();
            // `gemm` may sum in another order for other strides.
            assert_close(&values(&out), &values(&want), tol(dtype) * d as f64, &format!("{dtype}"));
        }
        let ints = |v: &[f64]| CpuStorage::I64(v.iter().map(|x| (x * 10.0) as i64).collect());
        let out = matmul(&ints(&da), &la, &ints(&db), &lb).unwrap();
        assert_eq!(values(&out), values(&matmul(&ints(&ca), &cla, &ints(&cb), &clb).unwrap()));
    }

    #[test]
    fn matmul_matches_naive_loop() {
        let shapes = [(1, 1, 1, 1), (2, 3, 4, 5), (3, 17, 33, 9), (1, 70, 80, 90), (8, 40, 50, 30), (4, 1, 7, 1), (2, 5, 1, 3)];
        for &(batch, m, k, n) in &shapes {
            for ka in 0..3 {
                for kb in 0..3 {
                    let la = operand(ka, batch, m, k);
                    let lb = operand(kb, batch, k, n);
                    let da = random_values(la.storage_extent(), -1.0, 1.0, 21);
                    let db = random_values(lb.storage_extent(), -1.0, 1.0, 22);
                    for dtype in DType::FLOATS {
                        let (a, b) = (storage(dtype, &da), storage(dtype, &db));
                        let out = matmul(&a, &la, &b, &lb).unwrap();
                        assert_eq!(out.dtype(), dtype);
                        let want = rounded(dtype, &reference(&values(&a), &la, &values(&b), &lb));
                        // f32 sums of k products: allow for k roundings
                        let t = tol(dtype) * if dtype == DType::F32 { k as f64 } else { 2.0 };
                        assert_close(&values(&out), &want, t, &format!("{dtype} {batch}x{m}x{k}x{n} kinds {ka}/{kb}"));
                    }
                }
            }
        }
    }

    /// Shapes on each scheduling path: one matrix threaded inside `gemm`
    /// (work at the threshold, no dim under the minimum), a batch of thin
    /// matrices split across threads, and a thin one with enough work to
    /// thread kept on one thread; with transposed operands too.
    #[test]
    fn matmul_threaded_and_thin_shapes() {
        for &(batch, m, k, n) in &[(1, 64, 64, 1024), (3, 256, 10, 600), (1, 2048, 300, 10)] {
            for (ka, kb) in [(0, 0), (1, 1), (0, 1)] {
                let la = operand(ka, batch, m, k);
                let lb = operand(kb, batch, k, n);
                let da = random_values(la.storage_extent(), -1.0, 1.0, 5);
                let db = random_values(lb.storage_extent(), -1.0, 1.0, 6);
                let (a, b) = (storage(DType::F32, &da), storage(DType::F32, &db));
                let out = matmul(&a, &la, &b, &lb).unwrap();
                let want = reference(&values(&a), &la, &values(&b), &lb);
                assert_close(&values(&out), &want, tol(DType::F32) * k as f64, &format!("{batch}x{m}x{k}x{n} kinds {ka}/{kb}"));
            }
        }
    }

    /// The output reuses a cached buffer without zeroing it: old contents
    /// (NaN here) must not leak into the product, which `gemm` writes
    /// over entirely, on each of its paths (a matrix-vector product, a
    /// single row, k = 1, small k, the blocked kernels).
    #[test]
    fn matmul_into_a_recycled_buffer_overwrites_it() {
        // The cache is the process's: a test on another thread may take the
        // stale buffer first, so each shape tries a few times until the
        // product lands in it (every try must be right either way).
        fn recycled<T: crate::backend::CpuElem + Copy + Send + 'static>(
            (m, k, n): (usize, usize, usize),
            nan: T,
            dtype: DType,
            tolerance: f64,
        ) {
            let landed = (0..8).any(|attempt| {
                let stale = vec![nan; m * n];
                let ptr = stale.as_ptr() as usize;
                crate::buffer_cache::recycling(|| crate::buffer_cache::give(stale));
                let (la, lb) = (operand(0, 1, m, k), operand(1, 1, k, n));
                let seed = 31 + 2 * attempt as u64;
                let (a, b) =
                    (storage(dtype, &random_values(m * k, -1.0, 1.0, seed)), storage(dtype, &random_values(k * n, -1.0, 1.0, seed + 1)));
                let out = matmul(&a, &la, &b, &lb).unwrap();
                let want = reference(&values(&a), &la, &values(&b), &lb);
                assert_close(&values(&out), &want, tolerance * k as f64, &format!("{m}x{k}x{n} {dtype} recycled"));
                let got = match &out {
                    CpuStorage::F64(v) => v.as_ptr() as usize,
                    CpuStorage::F32(v) => v.as_ptr() as usize,
                    _ => 0,
                };
                got == ptr
            });
            assert!(landed, "{m}x{k}x{n} {dtype}: the product never took the cached buffer");
        }
        // f64 and sizes no other test uses, on each of gemm's paths.
        for shape in [(600, 2, 900), (40_000, 3, 1), (1, 3, 40_001), (200, 1, 201), (257, 64, 255)] {
            recycled(shape, f64::NAN, DType::F64, tol(DType::F64));
        }
        // f32 (its own kernels), shaped as an MLP's last-layer backward
        recycled((251, 10, 1021), f32::NAN, DType::F32, tol(DType::F32));
    }

    #[test]
    fn matmul_with_stride_zero_rows_and_columns() {
        // a row broadcast down the matrix (stride 0 in dim 1) and a column
        // broadcast across it (stride 0 in dim 2)
        let la = Layout::new(vec![2, 3, 4], vec![4, 0, 1], 0);
        let lb = Layout::new(vec![2, 4, 5], vec![4, 1, 0], 0);
        let da = random_values(8, -1.0, 1.0, 1);
        let db = random_values(8, -1.0, 1.0, 2);
        for dtype in [DType::F32, DType::F64] {
            let (a, b) = (storage(dtype, &da), storage(dtype, &db));
            let out = matmul(&a, &la, &b, &lb).unwrap();
            assert_close(&values(&out), &reference(&values(&a), &la, &values(&b), &lb), tol(dtype) * 4.0, "stride 0");
        }
    }

    #[test]
    fn matmul_edge_sizes_and_ints() {
        let a = CpuStorage::F32(vec![]);
        // k == 0 gives zeros
        let out = matmul(&a, &Layout::contiguous(&[2, 3, 0]), &a, &Layout::contiguous(&[2, 0, 4])).unwrap();
        assert_eq!(out, CpuStorage::F32(vec![0.0; 24]));
        // empty m or n or batch
        let b = CpuStorage::F32(vec![1.0; 12]);
        assert_eq!(matmul(&a, &Layout::contiguous(&[1, 0, 3]), &b, &Layout::contiguous(&[1, 3, 4])).unwrap(), CpuStorage::F32(vec![]));
        assert_eq!(matmul(&b, &Layout::contiguous(&[1, 4, 3]), &a, &Layout::contiguous(&[1, 3, 0])).unwrap(), CpuStorage::F32(vec![]));
        assert_eq!(matmul(&a, &Layout::contiguous(&[0, 4, 3]), &a, &Layout::contiguous(&[0, 3, 2])).unwrap(), CpuStorage::F32(vec![]));
        // integers
        let x = CpuStorage::I64(vec![1, 2, 3, 4, 5, 6]);
        let lx = Layout::contiguous(&[1, 2, 3]);
        let ly = Layout::contiguous(&[1, 2, 3]).transpose("t", 1, 2).unwrap();
        assert_eq!(matmul(&x, &lx, &x, &ly).unwrap(), CpuStorage::I64(vec![14, 32, 32, 77]));
        // errors
        let l = Layout::contiguous(&[1, 2, 3]);
        assert!(matmul(&x, &l, &x, &l).is_err(), "inner sizes differ");
        assert!(matmul(&x, &Layout::contiguous(&[2, 3]), &x, &Layout::contiguous(&[3, 2])).is_err(), "2-D");
        assert!(matmul(&x, &l, &b, &ly).is_err(), "dtypes differ");
        let t = CpuStorage::Bool(vec![true; 6]);
        assert!(matmul(&t, &l, &t, &ly).is_err(), "bool");
        assert!(matmul(&x, &Layout::contiguous(&[2, 2, 3]), &x, &Layout::contiguous(&[1, 3, 2])).is_err(), "batch");
        assert!(matmul(&b, &Layout::contiguous(&[1, 4, 4]), &b, &Layout::contiguous(&[1, 4, 3])).is_err(), "past the buffer");
    }
}
