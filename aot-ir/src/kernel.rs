//! The kernel stage: what generated kernels compute, written once for the
//! CPU backend and the C renderer.
//!
//! - [`Kernel`] (defined with the node types, in `graph::kernel`, since a
//!   node embeds it): a group of elementwise nodes (and at most one
//!   reduction, with its prologue and epilogue) one generated loop nest
//!   computes, storing one value or, without a reduction, several; a stage
//!   holds it as an [`Op::Kernel`](crate::Op::Kernel) node. Which ops a
//!   kernel may compute ([`is_elementwise`], [`is_reduction`],
//!   [`is_elementwise_prim`]) is defined beside the op and primitive types
//!   and re-exported here.
//! - [`mod@schedule`]: the scheduler, which groups the fusible nodes of a
//!   stage into kernels.
//! - [`elementwise`]: the one definition of each elementwise op's
//!   arithmetic ([`elementwise::with_op`]), which the CPU backend runs and
//!   the C renderer renders.
//! - [`erf`]: the error function, f64 `erf`/`erfc`.
//! - [`math`]: the f32 transcendental functions, generic over [`math::Lanes`]
//!   so that the CPU evaluates them on plain floats in vectorisable loops
//!   and the renderer emits the very same operations as C;
//! - [`c_math`]: that renderer for the math functions (C that both g++ and
//!   NVRTC compile, given the few CUDA bit-cast builtins).
//! - [`render`]: the C renderer: a [`Kernel`] as one CUDA C translation
//!   unit (its launch ABI), and the host shim that compiles the same source
//!   on the CPU for tests (`render::fibers`: one fiber per CUDA thread, for
//!   kernels that synchronise).
//! - [`reinplace`]: kernels that store over written inputs' own storage
//!   (PyTorch's reinplacing), for graphs of whole-input elementwise writes:
//!   one multi-output kernel per set of writes that read one another's new
//!   values (an optimizer step of one parameter).
//! - [`philox`]: the counter-based generator Philox4x32-10, in Rust and in
//!   C, for random numbers that are the same on every device.

pub mod c_math;
pub mod elementwise;
pub mod erf;
pub mod math;
pub mod philox;
pub mod random;
pub mod reinplace;
pub mod render;
pub mod schedule;

pub use crate::graph::{is_elementwise_prim, Kernel};
pub use crate::op::{is_elementwise, is_reduction};
pub use schedule::{schedule, Scheduled};
