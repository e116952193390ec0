//! aot-runtime: tensors with PyTorch's view and in-place semantics, eager
//! autograd, and the runtime half of AOTAutograd.
//!
//! A tensor's `storage` holds a buffer of one device; the eager `ops` reach
//! it only through the primitives of the `backend::Backend` trait, which
//! the CPU (kernels in `cpu`) and CUDA (`cuda`: always compiled, a dummy
//! without the `cuda` feature) backends implement.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! // Slice assignment with gradients: rows 1..3 of `buf` take `y`.
//! let x = Tensor::randn(&[4, 3], DType::F64, &Device::Cpu, 0)?.requires_grad_(true)?;
//! let y = Tensor::randn(&[2, 3], DType::F64, &Device::Cpu, 1)?.requires_grad_(true)?;
//! let buf = x.mul(2.0)?;
//! buf.narrow(0, 1, 2)?.copy_(&y)?;
//! buf.sum()?.backward()?;
//! // x's gradient flows around the slice, y's through it
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?[..3], [2.0, 2.0, 2.0]);
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?[3..9], [0.0; 6]);
//! assert_eq!(y.grad().unwrap().to_vec::<f64>()?, vec![1.0; 6]);
//!
//! // A compiled function with an in-place update of its argument.
//! #[aot_fn]
//! fn scale_(a: &mut Tensor, s: f64) -> Tensor {
//!     a.mul_(s);
//!     a.sum()
//! }
//! let a = Tensor::ones(&[3], DType::F32, &Device::Cpu)?;
//! let total = scale_(&mut a.clone(), 2.0)?;
//! assert_eq!(total.item::<f32>()?, 6.0);
//! assert_eq!(a.to_vec::<f32>()?, vec![2.0; 3]);
//!
//! // What the macro traced, and what PyTorch's AOTAutograd records for the call.
//! println!("{}", scale_::compiled().graph());
//! let report = scale_::compiled().explain(&[(&a).into(), 2.0.into()])?;
//! assert!(report.fw_metadata.input_info[0].mutates_data);
//! # Ok::<(), AotError>(())
//! ```
#![allow(clippy::needless_range_loop)]
#![warn(missing_docs)]

mod aot_log;
pub mod arg;
pub mod autograd;
// The backend seam and storages are internals; the CUDA backend's tests
// (`tests/cuda_*.rs`) reach them with `test-hooks`, which does not make
// them API (hence no docs required).
#[cfg(feature = "test-hooks")]
#[allow(missing_docs)]
pub mod backend;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod backend;
mod buffer_cache;
pub mod compiled;
pub(crate) mod counters;
mod cpu;
pub mod cuda;
pub mod device;
pub mod dsl;
pub mod dtype;
pub mod error;
pub(crate) mod eval;
pub(crate) mod executor;
mod host_alloc;
pub mod layout;
pub mod ops;
pub mod profile;
#[cfg(feature = "test-hooks")]
#[allow(missing_docs)]
pub mod storage;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod storage;
pub mod tensor;
#[cfg(feature = "test-hooks")]
pub mod testing;
pub mod tree;
pub(crate) mod wrappers;
pub use wrappers::subclass;

/// Compiles a function of the tensor DSL (AOTAutograd at compile time).
///
/// The DSL reference, with every op, parameter and return form, is the
/// [`dsl`] module.
pub use aot_macros::aot_fn;
pub(crate) use backend::dispatch_cpu;
pub use compiled::{Arg, CallReport, CompiledFn, KernelSource};
pub use device::Device;
pub use dtype::{DType, Scalar, WithDType};
pub use error::{AotError, Result};
pub use ops::{manual_seed, rng_state, set_rng_state, Operand};
pub use profile::{profile, Profile};
pub use tensor::Tensor;
pub use tensor::{is_grad_enabled, no_grad, NoGradGuard};
pub use tree::TensorTree;

/// `use aot_runtime::prelude::*;` brings what user code needs.
pub mod prelude {
    pub use crate::{aot_fn, AotError, Arg, DType, Device, Result, Tensor, TensorTree};
}
