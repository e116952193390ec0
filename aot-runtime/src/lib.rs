//! aot-runtime: tensors with PyTorch's view and in-place semantics, eager
//! autograd, and the runtime half of AOTAutograd.
#![allow(clippy::needless_range_loop)]

pub mod autograd;
pub mod compiled;
pub mod cpu;
pub mod device;
pub mod dtype;
pub mod error;
pub mod layout;
pub mod ops;
pub mod storage;
pub mod tensor;
pub mod wrappers;

pub use aot_macros::aot_fn;
pub use device::Device;
pub use dtype::{DType, Scalar, WithDType};
pub use error::{AotError, Result};
pub use tensor::Tensor;
pub use autograd::{is_grad_enabled, no_grad, NoGradGuard};
pub use ops::Operand;
pub use compiled::{Arg, CompiledFn, CallReport};

/// `use aot_runtime::prelude::*;` brings what user code needs.
pub mod prelude {
    pub use crate::{aot_fn, AotError, Arg, DType, Device, Result, Tensor};
}
