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
//!
//! [`plan`] decides which products cuBLAS takes, on a GPU and on the
//! simulator alike: the simulator computes them with the CPU's gemm in
//! cuBLAS's stead, and both note the call for `kernels_for` ([`note`]).
//! cuBLAS's kernels have no CUDA C of ours, so their listing is a comment
//! that names the call and its arguments.

use crate::backend::{kernel_record, KernelSource};
use crate::dtype::DType;
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

/// The gemm cuBLAS runs for the product of `la` (of `da`) and `lb` (of
/// `db`): one float dtype, operands cuBLAS reads as they are laid out, and
/// at least one result element. `None`: the product runs on the host.
pub(crate) fn plan(da: DType, db: DType, la: &Layout, lb: &Layout) -> Option<GemmArgs> {
    let (&[batch, m, _], Some(&n)) = (&la.shape[..], lb.shape.get(2)) else { return None };
    let float = da == db && matches!(da, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
    (float && batch * m * n > 0).then(|| gemm_args(la, lb)).flatten()
}

/// The listing of the cuBLAS call `g` of `dtype`.
pub(crate) fn listing(dtype: DType, g: &GemmArgs) -> KernelSource {
    let t = |t: bool| if t { "CUBLAS_OP_T" } else { "CUBLAS_OP_N" };
    let source = format!(
        "// cuBLAS (a library kernel, no CUDA C of aot's): cublasGemmStridedBatchedEx({}, {}, m={}, n={}, k={}, \
         lda={}, ldb={}, ldc={}, strides {}/{}/{}, batch={}), {} operands\n",
        t(g.transa),
        t(g.transb),
        g.m,
        g.n,
        g.k,
        g.lda,
        g.ldb,
        g.ldc,
        g.stride_a,
        g.stride_b,
        g.stride_c,
        g.batch,
        dtype.name()
    );
    KernelSource { name: format!("cublasGemmStridedBatchedEx_{}", dtype.name()), source }
}

/// Counts the cuBLAS call `g` and notes it for `kernels_for`.
pub(crate) fn note(dtype: DType, g: &GemmArgs) {
    crate::counters::bump(crate::counters::Counter::CublasGemms);
    kernel_record::note_launch(|| listing(dtype, g));
}

#[cfg(test)]
mod tests;
