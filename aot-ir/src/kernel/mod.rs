//! The kernel stage (being built; see issue 13): what generated kernels
//! compute, written once for the CPU backend and the C renderer.
//!
//! - [`math`]: the f32 transcendental functions, generic over [`math::Lanes`]
//!   so that the CPU evaluates them on plain floats in vectorisable loops
//!   and the renderer emits the very same operations as C;
//! - [`c_math`]: that renderer for the math functions (C that both g++ and
//!   NVRTC compile, given the few CUDA bit-cast builtins).

pub mod c_math;
pub mod math;
