//! The CPU backend: `impl Backend for CpuStorage` (`backend.rs`) and the
//! compute kernels it calls. Nothing outside this module calls a kernel:
//! the storage reaches them only through the `Backend` trait.
//!
//! Each kernel reads its inputs through their [`Layout`](crate::layout::Layout)s
//! (any strides, offsets and stride-0 broadcast dims) and returns a new
//! [`CpuStorage`](crate::backend::CpuStorage) — except [`copy_strided`],
//! [`scatter_add`] and [`fill`], which write into an existing buffer. The elementwise kernels
//! write the dense output layout they are given (PyTorch's, computed by
//! [`crate::layout::elementwise_layout`]); reductions, softmax and matmul
//! return contiguous buffers, as PyTorch does.
//! Every output buffer is allocated through `host_alloc::try_vec`, so an
//! output too large to allocate is an `OutOfMemory` error, not an abort.
//! Dtype dispatch happens once per call; the kernels themselves are generic
//! over the element traits in `elem`. Contiguous inputs take slice fast
//! paths, and large inputs (more than 32k elements) are split across rayon
//! threads.
//!
//! - `unary`: [`unary`] and [`clamp`]; float unary ops, and float binary
//!   arithmetic from 1024 elements, run as single-op kernels of `fused`
//!   (f32 math: `aot_ir::kernel::math`, errors stated there).
//! - `binary`: [`binary`], [`binary_scalar`] and [`where_cond`], and the
//!   dense kernels of the compiled fast path ([`binary_dense`],
//!   [`binary_assign_dense`]).
//! - `copy`: [`cast`], [`copy_strided`], [`scatter_add`] and [`fill`].
//! - `index`: [`gather`] and [`scatter`] along a dim by an i64 index
//!   (`index_select`, `gather`, `embedding`, `scatter_add`, `index_copy`,
//!   `index_add`).
//! - `reduce`: [`reduce`] (sum, mean, amax) and [`var`].
//! - `softmax`: [`softmax`] and log-softmax.
//! - `scan`: [`cumsum`], [`extreme`] (argmax/argmin, max/min along a dim),
//!   [`nll_loss`] and [`nll_loss_backward`].
//! - `matmul`: batched [`matmul`] on the `gemm` crate.
//! - `fused`: the kernel stage's fused elementwise kernels, one pass per
//!   kernel, built from the one op definition (`aot_ir::kernel::elementwise`).
//! - `fused_reduce`: the kernel stage's reduction kernels (a reduction with
//!   its fused prologue and epilogue), one pass over the input, row by row.
//! - `random`: the seeded [`Rng`], [`rand_uniform`], [`randn`] and [`dropout_mask`].
//!
//! Floating math follows PyTorch: f16/bf16 compute in f32 and round once,
//! f32 in f32, f64 in f64; reductions accumulate in f64.

mod backend;
mod binary;
mod copy;
mod elem;
pub(crate) mod fused_elementwise;
pub(crate) mod fused_reduce;
mod index;
mod matmul;
mod output;
mod random;
mod reduce;
mod scan;
mod softmax;
mod strided;
mod unary;

#[cfg(test)]
mod elementwise_tests;
#[cfg(test)]
mod testutil;

pub use binary::{binary, binary_assign, binary_assign_dense, binary_dense, binary_scalar, where_cond};
#[cfg(any(test, feature = "test-hooks"))]
pub use copy::fill;
pub use copy::{cast, copy_strided, scatter_add};
pub use index::{gather, scatter};
pub use matmul::matmul;
pub use random::{dropout_mask, rand_uniform, randn};
pub use reduce::{reduce, var};
pub use scan::{cumsum, extreme, nll_loss, nll_loss_backward};
pub use softmax::softmax;
pub use unary::{clamp, unary};
