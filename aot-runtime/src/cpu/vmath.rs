//! Vectorised f32 math over slices: the kernel stage's math functions
//! (`aot_ir::kernel::math`, written once for the CPU and the C renderer)
//! applied to blocks of elements.
//!
//! The loops are compiled for the best instruction set the machine has,
//! chosen at run time by `pulp` (AVX-512, AVX2+FMA, NEON, else scalar): the
//! math functions are branch-free, so LLVM vectorises them once they are
//! inlined into a loop compiled with those features. Slices longer than
//! [`PAR_MIN`] are split across rayon threads.
//!
//! `sin` and `cos` are exact in their fast form up to
//! `aot_ir::kernel::math::SIN_COS_LIMIT`; larger arguments are recomputed in
//! f64 by a second pass that touches only them.

use aot_ir::kernel::math;
use rayon::prelude::*;

/// A math function of the kernel stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Exp,
    Log,
    Tanh,
    Sigmoid,
    Silu,
    Gelu,
    Sin,
    Cos,
}

/// Below this many elements a call stays on the calling thread.
pub const PAR_MIN: usize = 1 << 16;

/// Work per rayon task: a few L2-sized pieces per core.
const CHUNK: usize = 1 << 14;

/// `dst[i] = f(src[i])`. `src` and `dst` have the same length (the shorter
/// one bounds the work).
pub fn apply(f: MathFn, src: &[f32], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    if n >= PAR_MIN {
        dst.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| apply_serial(f, s, d));
    } else {
        apply_serial(f, src, dst);
    }
}

/// [`apply`] on the calling thread.
fn apply_serial(f: MathFn, src: &[f32], dst: &mut [f32]) {
    match f {
        MathFn::Exp => map(src, dst, math::exp::<f32>),
        MathFn::Log => map(src, dst, math::log::<f32>),
        MathFn::Tanh => map(src, dst, math::tanh::<f32>),
        MathFn::Sigmoid => map(src, dst, math::sigmoid::<f32>),
        MathFn::Silu => map(src, dst, math::silu::<f32>),
        MathFn::Gelu => map(src, dst, math::gelu::<f32>),
        MathFn::Sin => {
            map(src, dst, math::sin::<f32>);
            fix_large(src, dst, f64::sin);
        }
        MathFn::Cos => {
            map(src, dst, math::cos::<f32>);
            fix_large(src, dst, f64::cos);
        }
    }
}

/// The element loop, compiled once per instruction set by pulp's dispatch
/// (the closure is inlined into a function with those target features).
#[inline(always)]
fn map(src: &[f32], dst: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
    pulp::Arch::new().dispatch(
        #[inline(always)]
        || {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f(s);
            }
        },
    );
}

/// Recomputes in f64 the elements whose argument is beyond the fast range.
fn fix_large(src: &[f32], dst: &mut [f32], f: fn(f64) -> f64) {
    for (d, &s) in dst.iter_mut().zip(src) {
        if s.abs() > math::SIN_COS_LIMIT {
            *d = f(f64::from(s)) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [MathFn; 8] =
        [MathFn::Exp, MathFn::Log, MathFn::Tanh, MathFn::Sigmoid, MathFn::Silu, MathFn::Gelu, MathFn::Sin, MathFn::Cos];

    fn scalar(f: MathFn) -> fn(f32) -> f32 {
        match f {
            MathFn::Exp => math::exp::<f32>,
            MathFn::Log => math::log::<f32>,
            MathFn::Tanh => math::tanh::<f32>,
            MathFn::Sigmoid => math::sigmoid::<f32>,
            MathFn::Silu => math::silu::<f32>,
            MathFn::Gelu => math::gelu::<f32>,
            MathFn::Sin => math::sin::<f32>,
            MathFn::Cos => math::cos::<f32>,
        }
    }

    /// The vectorised loops (on every thread count) give exactly the
    /// scalar function's bits: vectorising changes no rounding.
    #[test]
    fn vector_loops_give_the_scalar_bits() {
        let xs: Vec<f32> = (0..200_000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761) % 0x7f80_0000) * if i % 2 == 0 { 1.0 } else { -1.0 })
            .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN])
            .collect();
        for f in ALL {
            let mut out = vec![0.0f32; xs.len()];
            apply(f, &xs, &mut out);
            for (x, y) in xs.iter().zip(&out) {
                let want = if matches!(f, MathFn::Sin | MathFn::Cos) && x.abs() > math::SIN_COS_LIMIT {
                    let w = if f == MathFn::Sin { f64::from(*x).sin() } else { f64::from(*x).cos() };
                    w as f32
                } else {
                    scalar(f)(*x)
                };
                assert!(y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()), "{f:?}({x:e}) = {y:e}, want {want:e}");
            }
        }
    }

    #[test]
    fn large_sin_and_cos_arguments_are_exact() {
        let xs = [1e5f32, -3e7, 1e30, f32::MAX];
        let mut out = [0.0f32; 4];
        apply(MathFn::Sin, &xs, &mut out);
        for (x, y) in xs.iter().zip(out) {
            assert_eq!(y, f64::from(*x).sin() as f32, "sin({x:e})");
        }
        apply(MathFn::Cos, &xs, &mut out);
        for (x, y) in xs.iter().zip(out) {
            assert_eq!(y, f64::from(*x).cos() as f32, "cos({x:e})");
        }
    }
}
