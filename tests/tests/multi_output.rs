//! Multi-output kernels: an optimizer step of one parameter (SGD with
//! momentum, Adam) is one kernel that reads every input once and stores
//! the new parameter and the new moments over their own storage
//! (`aot_ir::kernel::reinplace`), with eager's bits, for each float dtype,
//! contiguous and transposed parameters; destinations of different shapes
//! take one kernel per written argument, and ones that are not dense take
//! the ordinary plan, still with eager's results.

use aot_runtime::prelude::*;
use aot_runtime::testing::in_place_kernels;
use aot_runtime::Arg;
use std::sync::Mutex;

/// The counter is per process: one test at a time.
static COUNTER: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    COUNTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether scheduling (and so reinplacing) is on.
fn kernels_on() -> bool {
    std::env::var("AOT_KERNELS").map_or(true, |v| v != "0") && std::env::var("AOT_REINPLACE").map_or(true, |v| v != "0")
}

#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

/// Two parameters' steps in one call.
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn sgd_two(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, q: &mut Tensor, qbuf: &mut Tensor, h: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
        qbuf.mul_(momentum).add_(h);
        q.sub_(qbuf * lr);
    }
}

/// Adam's update of one parameter (as `examples/gpt`'s `adam_update`).
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn adam(p: &mut Tensor, m: &mut Tensor, v: &mut Tensor, g: &Tensor, b1: f64, b2: f64, eps: f64, step_size: f64, bc2_sqrt: f64) {
    no_grad! {
        m.mul_(b1).add_(g * (1.0 - b1));
        v.mul_(b2).add_(g.square() * (1.0 - b2));
        p.sub_(m / (v.sqrt() / bc2_sqrt + eps) * step_size);
    }
}

fn randn(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).unwrap().to_dtype(dtype).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

#[track_caller]
fn same(what: &str, a: &Tensor, b: &Tensor) {
    assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "{what}: shape and dtype");
    assert_eq!(vals(a), vals(b), "{what}: values");
}

fn copies(ts: &[Tensor]) -> Vec<Tensor> {
    ts.iter().map(|t| t.copy().unwrap()).collect()
}

fn args<'a>(ts: &'a [Tensor], scalars: &[f64]) -> Vec<Arg<'a>> {
    ts.iter().map(Arg::from).chain(scalars.iter().map(|&s| Arg::from(s))).collect()
}

/// Runs `f` compiled on views (`view`) of copies of `ts` and eagerly on
/// views of other copies; checks every argument ends bit for bit as
/// eager's, and returns the names of the kernels listed for the call and
/// how many in-place kernels it ran.
fn step_on(f: &aot_runtime::CompiledFn, ts: &[Tensor], scalars: &[f64], view: impl Fn(&Tensor) -> Tensor) -> (Vec<String>, u64) {
    let (cb, eb) = (copies(ts), copies(ts));
    let (c, e): (Vec<Tensor>, Vec<Tensor>) = (cb.iter().map(&view).collect(), eb.iter().map(&view).collect());
    let names = f.kernels(&args(&c, scalars)).unwrap().into_iter().map(|k| k.name).collect();
    let ids: Vec<usize> = c.iter().map(|t| t.storage_id()).collect();
    let before = in_place_kernels();
    f.__call(&args(&c, scalars)).unwrap();
    let ran = in_place_kernels() - before;
    f.run_eager(&args(&e, scalars)).unwrap();
    for (k, (a, b)) in c.iter().zip(&e).enumerate() {
        same(&format!("argument {k}"), a, b);
    }
    assert_eq!(c.iter().map(|t| t.storage_id()).collect::<Vec<_>>(), ids, "the arguments keep their storage");
    for (k, (a, b)) in cb.iter().zip(&eb).enumerate() {
        same(&format!("the storage of argument {k}"), a, b);
    }
    (names, ran)
}

fn step(f: &aot_runtime::CompiledFn, ts: &[Tensor], scalars: &[f64]) -> (Vec<String>, u64) {
    step_on(f, ts, scalars, Tensor::clone)
}

const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

#[test]
fn an_sgd_momentum_step_is_one_kernel_for_every_float_dtype_and_layout() {
    let _t = turn();
    for (i, dtype) in DTYPES.into_iter().enumerate() {
        let s = 10 * i as u64;
        let ts = [randn(&[37, 29], dtype, s), randn(&[37, 29], dtype, s + 1), randn(&[37, 29], dtype, s + 2)];
        // Transposed: dense over their storage, not row-major.
        for (what, t) in [("contiguous", false), ("transposed", true)] {
            let view = |x: &Tensor| if t { x.t().unwrap() } else { x.clone() };
            let (names, ran) = step_on(sgd_momentum::compiled(), &ts, &[0.1, 0.9], view);
            if kernels_on() {
                assert_eq!(names, ["fused_mul_add_mul_sub_0"], "{dtype:?} {what}");
                assert_eq!(ran, 1, "{dtype:?} {what}: one kernel stores p and buf");
            }
        }
    }
}

#[test]
fn an_adam_step_is_one_kernel_for_every_float_dtype() {
    let _t = turn();
    let scalars = [0.9, 0.999, 1e-8, 0.01 / (1.0 - 0.9f64.powi(3)), (1.0 - 0.999f64.powi(3)).sqrt()];
    for (i, dtype) in DTYPES.into_iter().enumerate() {
        let s = 100 + 10 * i as u64;
        let v = randn(&[64, 48], dtype, s + 2).square().unwrap();
        let ts = [randn(&[64, 48], dtype, s), randn(&[64, 48], dtype, s + 1), v, randn(&[64, 48], dtype, s + 3)];
        let (names, ran) = step(adam::compiled(), &ts, &scalars);
        if kernels_on() {
            assert_eq!(names.len(), 1, "{dtype:?}: {names:?}");
            assert_eq!(ran, 1, "{dtype:?}: one kernel stores p, m and v");
        }
    }
}

#[test]
fn a_large_step_split_across_threads_matches_eager() {
    let _t = turn();
    // 300 x 517 elements: several parallel tasks, each storing both
    // outputs of its chunk; transposed too.
    let ts = [randn(&[300, 517], DType::F32, 40), randn(&[300, 517], DType::F32, 41), randn(&[300, 517], DType::F32, 42)];
    for t in [false, true] {
        let (_, ran) = step_on(sgd_momentum::compiled(), &ts, &[0.1, 0.9], |x| if t { x.t().unwrap() } else { x.clone() });
        assert_eq!(ran, u64::from(kernels_on()));
    }
}

#[test]
fn two_parameters_are_one_kernel_each() {
    let _t = turn();
    let (a, b) = ([13, 7], [5]);
    let ts = [
        randn(&a, DType::F32, 1),
        randn(&a, DType::F32, 2),
        randn(&a, DType::F32, 3),
        randn(&b, DType::F32, 4),
        randn(&b, DType::F32, 5),
        randn(&b, DType::F32, 6),
    ];
    let (names, ran) = step(sgd_two::compiled(), &ts, &[0.05, 0.8]);
    if kernels_on() {
        assert_eq!(names, ["fused_mul_add_mul_sub_0", "fused_mul_add_mul_sub_1"]);
        assert_eq!(ran, 2);
    }
}

#[test]
fn destinations_of_different_shapes_run_one_kernel_per_written_argument() {
    let _t = turn();
    // `buf` is one row, `p` a matrix: `p.sub_(buf * lr)` broadcasts the
    // new `buf`, so no one index space serves both stores.
    let ts = [randn(&[6, 4], DType::F32, 7), randn(&[4], DType::F32, 8), randn(&[4], DType::F32, 9)];
    let (names, ran) = step(sgd_momentum::compiled(), &ts, &[0.1, 0.9]);
    if kernels_on() {
        assert_eq!(names, ["fused_mul_add_0", "fused_mul_sub_1"]);
        assert_eq!(ran, 2, "one kernel per written argument");
    }
}

#[test]
fn destinations_that_are_not_dense_or_differ_in_dtype_run_the_ordinary_plan() {
    let _t = turn();
    // Half the columns of a larger storage: not in place.
    let ts = [randn(&[8, 10], DType::F32, 10), randn(&[8, 10], DType::F32, 11), randn(&[8, 10], DType::F32, 12)];
    let (_, ran) = step_on(sgd_momentum::compiled(), &ts, &[0.1, 0.9], |x| x.narrow(1, 0, 5).unwrap());
    assert_eq!(ran, 0, "strided destinations");
    // An f16 momentum buffer for an f32 parameter: `p`'s write computes
    // in f32 from an f16 value, which no in-place body of one dtype does.
    let ts = [randn(&[8, 5], DType::F32, 13), randn(&[8, 5], DType::F16, 14), randn(&[8, 5], DType::F16, 15)];
    let (_, ran) = step(sgd_momentum::compiled(), &ts, &[0.1, 0.9]);
    assert_eq!(ran, 0, "destinations of two dtypes");
}

/// On CUDA (the simulator without a GPU): Adam's step is one kernel with
/// three output pointers, whose results are the CPU's bits on the
/// simulator (within a tolerance on a GPU, as the other CUDA tests
/// compare).
#[cfg(feature = "cuda")]
#[test]
fn an_adam_step_on_cuda_is_one_kernel_with_three_outputs() {
    let _t = turn();
    if !aot_runtime::cuda::is_available() || !kernels_on() {
        return;
    }
    let cuda = Device::Cuda(0);
    let scalars = [0.9, 0.999, 1e-8, 0.01 / (1.0 - 0.9f64.powi(3)), (1.0 - 0.999f64.powi(3)).sqrt()];
    for (i, dtype) in [DType::F32, DType::F16, DType::BF16].into_iter().enumerate() {
        for t in [false, true] {
            let s = 200 + 10 * i as u64;
            let v = randn(&[33, 18], dtype, s + 2).square().unwrap();
            let ts = [randn(&[33, 18], dtype, s), randn(&[33, 18], dtype, s + 1), v, randn(&[33, 18], dtype, s + 3)];
            let view = |x: &Tensor| if t { x.t().unwrap() } else { x.clone() };
            let on: Vec<Tensor> = ts.iter().map(|x| view(&x.to_device(&cuda).unwrap())).collect();
            let sources = adam::compiled().kernels_for(&args(&on, &scalars), &cuda).unwrap();
            assert_eq!(sources.len(), 1, "{dtype:?}: {sources:?}");
            let src = &sources[0].source;
            assert!(src.contains(" *out1, ") && src.contains(" *out2, ") && !src.contains(" *out3"), "three outputs:\n{src}");
            let before = in_place_kernels();
            adam::compiled().__call(&args(&on, &scalars)).unwrap();
            assert_eq!(in_place_kernels() - before, 1, "{dtype:?}: one kernel on CUDA");
            let cpu: Vec<Tensor> = copies(&ts).iter().map(view).collect();
            adam::compiled().__call(&args(&cpu, &scalars)).unwrap();
            for (k, (a, b)) in on.iter().zip(&cpu).enumerate() {
                let a = a.to_device(&Device::Cpu).unwrap();
                if aot_runtime::cuda::is_simulated() {
                    same(&format!("{dtype:?} argument {k}"), &a, b);
                } else {
                    let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
                    assert!(vals(&a).iter().zip(vals(b)).all(|(x, y)| (x - y).abs() <= tol * (1.0 + y.abs())), "{dtype:?} argument {k}");
                }
            }
        }
    }
}
