//! The one error type of the project. Every message names the op, and where
//! it applies the function and argument, so a user can find the failing line.

use thiserror::Error;

/// The error of every fallible operation in aot.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum AotError {
    /// Shapes that do not fit the op (broadcast, matmul, view, ...).
    #[error("{op}: shape mismatch: {msg}")]
    ShapeMismatch {
        /// The name of the failing op.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },

    /// Dtypes that do not fit the op.
    #[error("{op}: dtype mismatch: {msg}")]
    DTypeMismatch {
        /// The name of the failing op.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },

    /// Tensors on different devices used together.
    #[error("{op}: expected all tensors to be on the same device, but found {lhs} and {rhs}")]
    DeviceMismatch {
        /// The name of the failing op.
        op: &'static str,
        /// The first device.
        lhs: String,
        /// The other device.
        rhs: String,
    },

    /// A dimension out of range for the rank.
    #[error("{op}: dimension out of range (expected to be in range of [{min}, {max}], but got {dim})")]
    DimOutOfRange {
        /// The name of the failing op.
        op: &'static str,
        /// The dim asked for.
        dim: i64,
        /// The smallest valid dim.
        min: i64,
        /// The largest valid dim.
        max: i64,
    },

    /// An index out of range for the dimension.
    #[error("{op}: index {index} is out of bounds for dimension {dim} with size {size}")]
    IndexOutOfRange {
        /// The name of the failing op.
        op: &'static str,
        /// The index asked for.
        index: i64,
        /// The dimension indexed.
        dim: usize,
        /// That dimension's size.
        size: usize,
    },

    /// A request that PyTorch also refuses, with PyTorch's reason.
    #[error("{op}: {msg}")]
    Unsupported {
        /// The name of the failing op.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },

    /// Autograd refused: in-place on a leaf, modified saved tensor, second backward, ...
    #[error("{op}: {msg}")]
    Autograd {
        /// The op or autograd node that refused.
        op: String,
        /// What went wrong.
        msg: String,
    },

    /// A device backend that is not compiled in or not available.
    #[error("{op}: device unavailable: {msg}")]
    DeviceUnavailable {
        /// The name of the failing op.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },

    /// An error inside an `#[aot_fn]` call, naming the function and, when known, the argument.
    #[error("in `{func}`{}: {source}", arg.as_ref().map(|a| format!(", argument `{a}`")).unwrap_or_default())]
    InFunction {
        /// The function.
        func: String,
        /// The argument, when known.
        arg: Option<String>,
        /// The error itself.
        #[source]
        source: Box<AotError>,
    },

    /// A call that does not match the function's signature.
    #[error("`{func}`: {msg}")]
    Signature {
        /// The function called.
        func: String,
        /// What went wrong.
        msg: String,
    },

    /// Shape, stride, offset or element-count arithmetic that does not fit:
    /// a size product, storage extent or byte size beyond what a tensor may hold.
    #[error("{op}: integer overflow in tensor geometry: {msg}")]
    Overflow {
        /// The name of the failing op.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },

    /// The allocator refused a buffer (or its byte size does not fit in `isize`).
    #[error("{op}: out of memory: cannot allocate a buffer of {bytes} bytes")]
    OutOfMemory {
        /// The name of the failing op.
        op: &'static str,
        /// The size of the buffer asked for.
        bytes: usize,
    },

    /// NVRTC refused a generated kernel (a bug in aot's renderer, or a CUDA
    /// toolkit too old for it); `log` is NVRTC's own report.
    #[error("{op}: NVRTC could not compile kernel `{kernel}` for {arch}: {log}")]
    KernelCompile {
        /// The name of the failing op.
        op: &'static str,
        /// The kernel's name.
        kernel: String,
        /// The target architecture (`compute_80`, ...).
        arch: String,
        /// NVRTC's log.
        log: String,
    },

    /// An internal invariant broke: a bug in aot, reported instead of panicking.
    #[error("internal error in {op}: {msg}")]
    Internal {
        /// Where it was found (an op, or a part of aot).
        op: &'static str,
        /// What went wrong.
        msg: String,
    },
}

/// `Result` with [`AotError`].
pub type Result<T> = std::result::Result<T, AotError>;

impl AotError {
    pub(crate) fn shape(op: &'static str, msg: impl Into<String>) -> Self {
        AotError::ShapeMismatch { op, msg: msg.into() }
    }
    pub(crate) fn dtype(op: &'static str, msg: impl Into<String>) -> Self {
        AotError::DTypeMismatch { op, msg: msg.into() }
    }
    pub(crate) fn unsupported(op: &'static str, msg: impl Into<String>) -> Self {
        AotError::Unsupported { op, msg: msg.into() }
    }
    pub(crate) fn overflow(op: &'static str, msg: impl Into<String>) -> Self {
        AotError::Overflow { op, msg: msg.into() }
    }
    pub(crate) fn internal(op: &'static str, msg: impl Into<String>) -> Self {
        AotError::Internal { op, msg: msg.into() }
    }
    pub(crate) fn autograd(op: impl Into<String>, msg: impl Into<String>) -> Self {
        AotError::Autograd { op: op.into(), msg: msg.into() }
    }
    /// Wraps the error with the name of the `#[aot_fn]` function (and argument) it happened in.
    pub fn in_function(self, func: &str, arg: Option<&str>) -> Self {
        AotError::InFunction { func: func.to_string(), arg: arg.map(str::to_string), source: Box::new(self) }
    }
}
