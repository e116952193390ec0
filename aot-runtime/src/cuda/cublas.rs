//! Matmul on a GPU through cuBLAS (`cublasGemmStridedBatchedEx`): one call
//! per batched product, f32 and f64 in their own precision, f16 and bf16
//! with f32 accumulation. Operands are passed with their strides: a
//! transposed operand is an op flag, never a copy.
//!
//! cuBLAS is column-major and the backend's matrices are row-major: the
//! row-major product `C = A·B` (`[m, k]·[k, n]`) is the column-major
//! `Cᵀ = Bᵀ·Aᵀ`, so cuBLAS's first operand is `B` and its second `A`. A
//! row-major matrix with unit column stride is, read column-major, its own
//! transpose with leading dimension its row stride (op `N` here); one with
//! unit row stride is the matrix itself with leading dimension its column
//! stride (op `T`). [`gemm_args`] works this out, and a CPU test checks it
//! against a column-major reference on every layout; only the call itself
//! needs a GPU.

use crate::layout::Layout;

/// The arguments of one strided batched cuBLAS gemm, in cuBLAS's terms
/// (its `A` is our right operand, its `B` our left one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GemmArgs {
    pub transa: bool,
    pub transb: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub lda: i32,
    pub ldb: i32,
    pub ldc: i32,
    pub stride_a: i64,
    pub stride_b: i64,
    pub stride_c: i64,
    pub batch: i32,
}

/// How a row-major `[rows, cols]` matrix with strides `(rs, cs)` reads as
/// a cuBLAS operand: (transposed, leading dimension), or `None` when
/// neither stride is 1 (the caller makes it contiguous first).
fn operand(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<(bool, usize)> {
    // A dim of size 1 never steps, so its stride is free: pick the one
    // cuBLAS accepts (a leading dimension of at least the other extent).
    let rs = if rows == 1 { cols.max(1) } else { rs };
    let cs = if cols == 1 { rows.max(1) } else { cs };
    if cs == 1 && rs >= cols.max(1) {
        Some((false, rs))
    } else if rs == 1 && cs >= rows.max(1) {
        Some((true, cs))
    } else {
        None
    }
}

/// The gemm computing the contiguous `[batch, m, n]` product of `la`
/// (`[batch, m, k]`) and `lb` (`[batch, k, n]`), or `None` if an operand
/// needs a contiguous copy, or a size does not fit cuBLAS's 32-bit ints.
pub(crate) fn gemm_args(la: &Layout, lb: &Layout) -> Option<GemmArgs> {
    let (&[batch, m, k], &[_, _, n]) = (&la.shape[..], &lb.shape[..]) else { return None };
    let (ta, lda_b) = operand(k, n, lb.stride[1], lb.stride[2])?;
    let (tb, ldb_a) = operand(m, k, la.stride[1], la.stride[2])?;
    let int = |x: usize| i32::try_from(x).ok();
    let batch_stride = |l: &Layout| if batch == 1 { 0 } else { l.stride[0] as i64 };
    Some(GemmArgs {
        // cuBLAS's A is our B read column-major: op N when B's columns are
        // unit-stride (it is Bᵀ), op T when its rows are.
        transa: ta,
        transb: tb,
        m: int(n)?,
        n: int(m)?,
        k: int(k)?,
        lda: int(lda_b)?,
        ldb: int(ldb_a)?,
        ldc: int(n.max(1))?,
        stride_a: batch_stride(lb),
        stride_b: batch_stride(la),
        stride_c: (m * n) as i64,
        batch: int(batch)?,
    })
}

#[cfg(test)]
mod tests;
