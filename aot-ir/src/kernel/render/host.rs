//! The host shim: what a host C++ compiler (g++, clang++) needs to compile
//! the CUDA C of [`super::render_cuda`] unchanged and run it on the CPU.
//!
//! - [`host_prelude`], put before the rendered units: the CUDA keywords as
//!   nothing, the bit-cast builtins, `blockIdx`/`blockDim`/`threadIdx`/
//!   `gridDim` as thread-locals, the C library's math, and
//!   `aot_host_launch(grid, block, f)`, which runs `f()` for every (block,
//!   thread) of a one-dimensional grid, one after another (enough for
//!   kernels that neither synchronise nor share memory).
//! - [`CUDA_FP16_H`], [`CUDA_BF16_H`]: stand-ins for CUDA's headers, to be
//!   written as `cuda_fp16.h`/`cuda_bf16.h` into a folder on the include
//!   path. `__half` and `__nv_bfloat16` are 16-bit patterns, converted
//!   from float with round-to-nearest-even as CUDA's `_rn` functions do;
//!   a NaN converts to a quiet NaN both ways (as the `half` crate and the
//!   hardware do), so a signaling NaN input computes like any NaN.
//!
//! Compile with `-ffp-contract=off` (and no fast-math), for the reasons
//! NVRTC needs `--fmad=false`.

/// The CUDA additions to [`super::super::c_math::HOST_PRELUDE`].
const CUDA_EXTRAS: &str = "\
#include <math.h>
#define __global__
#define __restrict__ __restrict
static inline long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }
static inline double __longlong_as_double(long long u) { double x; memcpy(&x, &u, 8); return x; }
struct aot_dim3 { unsigned x, y, z; };
static thread_local aot_dim3 blockIdx, blockDim, threadIdx, gridDim;
template <class F> static void aot_host_launch(unsigned grid, unsigned block, F f) {
    gridDim.x = grid; gridDim.y = 1; gridDim.z = 1;
    blockDim.x = block; blockDim.y = 1; blockDim.z = 1;
    for (unsigned b = 0; b < grid; b++) {
        for (unsigned t = 0; t < block; t++) {
            blockIdx.x = b; blockIdx.y = 0; blockIdx.z = 0;
            threadIdx.x = t; threadIdx.y = 0; threadIdx.z = 0;
            f();
        }
    }
}
";

/// The definitions a host C++ compiler needs before the rendered units.
pub fn host_prelude() -> String {
    format!("{}{CUDA_EXTRAS}", super::super::c_math::HOST_PRELUDE)
}

/// A stand-in for `cuda_fp16.h`.
pub const CUDA_FP16_H: &str = "\
#pragma once
struct __half { unsigned short x; };
static inline __half __float2half_rn(float f) {
    const unsigned u = __float_as_uint(f);
    const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
    const unsigned a = u & 0x7fffffffu;
    __half h;
    if (a > 0x7f800000u) {
        h.x = (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    } else if (a >= 0x477ff000u) {
        /* From the midpoint between 65504 and 65536 up: infinity. */
        h.x = (unsigned short)(sign | 0x7c00u);
    } else if (a < 0x38800000u) {
        /* Below 2^-14: a multiple of 2^-24; the scaling is exact, and adding
           and removing 1.5 * 2^23 rounds to an integer, ties to even. */
        const float s = __uint_as_float(a) * 16777216.0f;
        const float r = (s + 12582912.0f) - 12582912.0f;
        h.x = (unsigned short)(sign | (unsigned)r);
    } else {
        /* Rebias the exponent (127 -> 15); round the 13 dropped bits to
           nearest even, a carry moving into the exponent. */
        const unsigned e = a - (112u << 23);
        h.x = (unsigned short)(sign | ((e + 0xfffu + ((e >> 13) & 1u)) >> 13));
    }
    return h;
}
static inline float __half2float(__half h) {
    const unsigned sign = ((unsigned)h.x & 0x8000u) << 16;
    const unsigned e = ((unsigned)h.x >> 10) & 0x1fu;
    const unsigned m = (unsigned)h.x & 0x3ffu;
    /* A NaN comes out quiet, as from the hardware's conversion. */
    if (e == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (m ? 0x400000u : 0u) | (m << 13));
    if (e == 0u) {
        const float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
";

/// A stand-in for `cuda_bf16.h`.
pub const CUDA_BF16_H: &str = "\
#pragma once
struct __nv_bfloat16 { unsigned short x; };
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    const unsigned u = __float_as_uint(f);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        h.x = (unsigned short)((u >> 16) | 0x40u);
    } else {
        h.x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    return h;
}
static inline float __bfloat162float(__nv_bfloat16 h) {
    const unsigned u = (unsigned)h.x << 16;
    return __uint_as_float((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);
}
";
