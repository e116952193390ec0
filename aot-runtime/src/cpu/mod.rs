//! CPU compute kernels.
//!
//! Each kernel reads its inputs through their [`Layout`](crate::layout::Layout)s
//! (any strides, offsets and stride-0 broadcast dims) and returns a new
//! contiguous [`CpuStorage`](crate::storage::CpuStorage) — except
//! [`copy_strided`] and [`fill`], which write into an existing buffer.
//! Dtype dispatch happens once per call; the kernels themselves are generic
//! over the element traits in `elem`. Contiguous inputs take slice fast
//! paths, and large inputs (more than 32k elements) are split across rayon
//! threads.
//!
//! - `elementwise`: [`unary`], [`binary`], [`binary_scalar`], [`where_cond`],
//!   [`clamp`], [`cast`], [`copy_strided`], [`fill`].
//! - `reduce`: [`reduce`] (sum, mean, amax) and [`var`].
//! - `softmax`: [`softmax`] and log-softmax.
//! - `matmul`: batched [`matmul`] on the `gemm` crate.
//! - `random`: the seeded [`Rng`], [`rand_uniform`] and [`randn`].
//!
//! Floating math follows PyTorch: f16/bf16 compute in f32 and round once,
//! f32 in f32, f64 in f64; reductions accumulate in f64.

mod elem;
mod elementwise;
mod matmul;
mod random;
mod reduce;
mod softmax;
mod special;
mod strided;

#[cfg(test)]
mod testutil;

pub use elementwise::{binary, binary_scalar, cast, clamp, copy_strided, fill, unary, where_cond, BinaryOp, UnaryOp};
pub use matmul::matmul;
pub use random::{rand_uniform, randn, Rng};
pub use reduce::{reduce, var, ReduceOp};
pub use softmax::softmax;
