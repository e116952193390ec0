//! The kernel stage: fused elementwise kernels against eager, on random
//! shapes, strides and dtypes, for inference and training calls; and
//! checks that the fused path is the one taken.

use aot_runtime::compiled::__private::kernel_stats;
use aot_runtime::prelude::*;
use aot_runtime::Arg;
use proptest::prelude::*;
use std::sync::Mutex;

/// The kernel counters are process-wide: tests that read them take turns.
static STATS: Mutex<()> = Mutex::new(());

/// W2 of issue 13.
#[aot_fn]
fn w2(x: &Tensor) -> Tensor {
    ((x * 1.5 + 0.5).tanh() * 2.0 - 1.0).sigmoid()
}

/// Two inputs that broadcast, every unary op, a scalar parameter.
#[aot_fn]
fn mixed(a: &Tensor, b: &Tensor, s: f64) -> Tensor {
    let u = (a * b + a).relu().sqrt().exp().neg().abs().log();
    let v = (u.sin().cos() + b.gelu().silu()).square().reciprocal();
    (v.maximum(a).minimum(b) * s).pow(2.0).rsqrt() - a.pow(b.abs())
}

/// A chain whose intermediate is also returned (two kernels).
#[aot_fn]
fn shared(x: &Tensor) -> (Tensor, Tensor) {
    let y = (x * 2.0).tanh();
    let z = (y.exp() + 1.0).log();
    (y, z)
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * (1.0 + y.abs()))
}

fn tol(d: DType) -> f64 {
    match d {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        _ => 1e-2,
    }
}

/// Compiled and eager agree on dtype, shape, strides and values.
fn same(what: &str, c: &Tensor, e: &Tensor) {
    assert_eq!((c.dtype(), c.shape(), c.stride()), (e.dtype(), e.shape(), e.stride()), "{what}: metadata");
    assert!(close(&vals(c), &vals(e), tol(e.dtype())), "{what}: values\ncompiled {:?}\neager    {:?}", vals(c), vals(e));
}

/// A tensor of `shape` with values in `[lo, hi)`, laid out as the
/// transpose of a contiguous tensor when `transposed` (2-D or more).
fn input(shape: &[usize], dtype: DType, seed: u64, transposed: bool, lo: f64, hi: f64) -> Tensor {
    let dev = Device::Cpu;
    let mut s = shape.to_vec();
    if transposed && s.len() >= 2 {
        s.swap(0, 1);
    }
    let t = Tensor::rand(&s, DType::F64, &dev, seed).unwrap().mul(hi - lo).unwrap().add(lo).unwrap().to_dtype(dtype).unwrap();
    if transposed && s.len() >= 2 {
        t.transpose(0, 1).unwrap()
    } else {
        t
    }
}

#[test]
fn w2_runs_as_one_fused_kernel_and_matches_eager() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    for (dtype, transposed) in [(DType::F32, false), (DType::F32, true), (DType::F64, false), (DType::F16, true), (DType::BF16, false)] {
        let x = input(&[33, 65], dtype, 7, transposed, -3.0, 3.0);
        let f = w2::compiled();
        let kernels = f.kernels(&[Arg::from(&x)]).unwrap();
        assert_eq!(kernels.len(), 1, "{kernels:?}");
        assert_eq!(kernels[0].name, "fused_mul_add_tanh_mul_sub_sigmoid_0");
        assert!(kernels[0].source.contains("%6 = sigmoid(%5)"), "{}", kernels[0].source);
        let (fused, op_by_op) = kernel_stats();
        let c = w2(&x).unwrap();
        assert_eq!(kernel_stats(), (fused + 1, op_by_op), "{dtype:?}: the call ran its kernel fused");
        same(&format!("w2 {dtype:?} transposed={transposed}"), &c, &f.run_eager(&[Arg::from(&x)]).unwrap()[0]);
    }
}

#[test]
fn an_integer_input_runs_fused_in_f32_and_errors_are_eagers() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    // `x * 1.5` of an i64 tensor computes in f32 (eager's promotion), in the kernel.
    let x = Tensor::from_vec(vec![1i64, -2, 3], &[3], &Device::Cpu).unwrap();
    let (fused, op_by_op) = kernel_stats();
    let c = w2(&x).unwrap();
    assert_eq!(kernel_stats(), (fused + 1, op_by_op));
    assert_eq!(c.dtype(), DType::F32);
    same("w2 i64", &c, &w2::compiled().run_eager(&[Arg::from(&x)]).unwrap()[0]);
    // Shapes that do not broadcast: eager's error, naming the op.
    let (a, b) = (input(&[2, 3], DType::F32, 1, false, 0.5, 2.0), input(&[4, 3], DType::F32, 2, false, 0.5, 2.0));
    let e = mixed(&a, &b, 1.0).unwrap_err().to_string();
    let r = mixed::compiled().run_eager(&[Arg::from(&a), Arg::from(&b), Arg::from(1.0)]).unwrap_err().to_string();
    assert_eq!(e, r);
}

#[test]
fn a_value_needed_twice_is_stored_once_and_each_chain_fuses() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let x = input(&[5, 7], DType::F32, 3, true, -2.0, 2.0);
    let kernels = shared::compiled().kernels(&[Arg::from(&x)]).unwrap();
    assert_eq!(kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["fused_mul_tanh_0", "fused_exp_add_log_1"]);
    let (cy, cz) = shared(&x).unwrap();
    let e = shared::compiled().run_eager(&[Arg::from(&x)]).unwrap();
    same("y", &cy, &e[0]);
    same("z", &cz, &e[1]);
}

#[test]
fn training_calls_run_fused_forward_and_backward_kernels_with_eager_gradients() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let make = || {
        let a = input(&[4, 1], DType::F64, 11, false, 0.5, 2.0).requires_grad_(true).unwrap();
        let b = input(&[1, 5], DType::F64, 12, false, 0.5, 2.0).requires_grad_(true).unwrap();
        (a, b)
    };
    let (a, b) = make();
    let kernels = mixed::compiled().kernels(&[Arg::from(&a), Arg::from(&b), Arg::from(0.7)]).unwrap();
    assert!(kernels.len() >= 2, "forward and backward kernels: {kernels:?}");
    let (fused, _) = kernel_stats();
    let c = mixed(&a, &b, 0.7).unwrap();
    c.sum().unwrap().backward().unwrap();
    assert!(kernel_stats().0 >= fused + 2, "forward and backward kernels ran fused");
    let (ea, eb) = make();
    let e = mixed::compiled().run_eager(&[Arg::from(&ea), Arg::from(&eb), Arg::from(0.7)]).unwrap().remove(0);
    e.sum().unwrap().backward().unwrap();
    same("output", &c.detach().unwrap(), &e.detach().unwrap());
    same("grad a", &a.grad().unwrap(), &ea.grad().unwrap());
    same("grad b", &b.grad().unwrap(), &eb.grad().unwrap());
}

fn dtype_strategy() -> impl Strategy<Value = DType> {
    prop_oneof![Just(DType::F32), Just(DType::F64), Just(DType::F16), Just(DType::BF16)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random shapes (with broadcasting), strides (transposed, sliced,
    /// expanded) and dtypes: the fused kernels compute what eager does,
    /// with eager's layout.
    #[test]
    fn fused_kernels_match_eager(
        rows in 1usize..9, cols in 1usize..70, dtype in dtype_strategy(),
        ta in any::<bool>(), tb in any::<bool>(), bcast in 0usize..3, step in 1usize..3, seed in 0u64..1000,
    ) {
        let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
        let a = input(&[rows, cols * step], dtype, seed, ta, 0.1, 3.0).slice(1, 0, (cols * step) as i64, step as i64).unwrap();
        let b = match bcast {
            0 => input(&[rows, cols], dtype, seed + 1, tb, 0.1, 3.0),
            1 => input(&[1, cols], dtype, seed + 1, false, 0.1, 3.0),
            _ => input(&[rows, 1], dtype, seed + 1, false, 0.1, 3.0).expand(&[rows as i64, cols as i64]).unwrap(),
        };
        let args = [Arg::from(&a), Arg::from(&b), Arg::from(0.5)];
        let c = mixed(&a, &b, 0.5).unwrap();
        same(&format!("mixed {dtype:?} {:?}/{:?} {:?}/{:?}", a.shape(), a.stride(), b.shape(), b.stride()), &c, &mixed::compiled().run_eager(&args).unwrap()[0]);
        let c = w2(&a).unwrap();
        same("w2", &c, &w2::compiled().run_eager(&[Arg::from(&a)]).unwrap()[0]);
    }
}

/// The optimizer step of `examples/train_mlp.rs`.
#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

#[test]
fn written_inputs_take_the_calls_buffer_without_a_copy_or_a_copy_back() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let mk = || (input(&[64, 33], DType::F32, 1, false, -1.0, 1.0), input(&[64, 33], DType::F32, 2, false, -1.0, 1.0));
    let g = input(&[64, 33], DType::F32, 3, true, -1.0, 1.0);
    let ((mut p, mut buf), (ep, ebuf)) = (mk(), mk());
    let view = p.narrow(0, 2, 3).unwrap();
    let (vp, vb) = (p.version(), buf.version());
    let before = aot_runtime::compiled::__private::swapped_write_backs();
    let fresh = aot_runtime::compiled::__private::fresh_writes();
    sgd_momentum(&mut p, &mut buf, &g, 0.1, 0.9).unwrap();
    assert_eq!(aot_runtime::compiled::__private::swapped_write_backs(), before + 2, "p and buf took the new buffers");
    assert_eq!(aot_runtime::compiled::__private::fresh_writes(), fresh + 2, "buf.mul_ and p.sub_ ran out of place, without a copy");
    sgd_momentum::compiled().run_eager(&[Arg::from(&ep), Arg::from(&ebuf), Arg::from(&g), Arg::from(0.1), Arg::from(0.9)]).unwrap();
    same("p", &p, &ep);
    same("buf", &buf, &ebuf);
    same("a view of p sees the new values", &view, &ep.narrow(0, 2, 3).unwrap());
    assert!(p.version() > vp && buf.version() > vb, "the writes bump the versions");
}
