//! The kernel stage: fused elementwise kernels against eager, on random
//! shapes, strides and dtypes, for inference and training calls; and
//! checks that the fused path is the one taken.

use aot_runtime::prelude::*;
use aot_runtime::testing::kernel_stats;
use aot_runtime::Arg;
use proptest::prelude::*;
use std::sync::Mutex;

/// The kernel counters are process-wide: tests that read them take turns.
static STATS: Mutex<()> = Mutex::new(());

/// The W2 benchmark.
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
    use aot_runtime::testing::{copied_write_backs, in_place_kernels, swapped_write_backs};
    let (swapped, copied, in_place) = (swapped_write_backs(), copied_write_backs(), in_place_kernels());
    sgd_momentum(&mut p, &mut buf, &g, 0.1, 0.9).unwrap();
    // Reinplacing: one kernel stored over buf and p themselves.
    assert_eq!(in_place_kernels(), in_place + 1, "buf and p were written in place by one kernel");
    assert_eq!((swapped_write_backs(), copied_write_backs()), (swapped, copied), "no new buffer handed over, no copy-back");
    sgd_momentum::compiled().run_eager(&[Arg::from(&ep), Arg::from(&ebuf), Arg::from(&g), Arg::from(0.1), Arg::from(0.9)]).unwrap();
    same("p", &p, &ep);
    same("buf", &buf, &ebuf);
    same("a view of p sees the new values", &view, &ep.narrow(0, 2, 3).unwrap());
    assert!(p.version() > vp && buf.version() > vb, "the writes bump the versions");
}

/// The forward and loss of W3 (`examples/train_mlp.rs`).
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn w3_loss(x: &Tensor, y_onehot: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, w3: &Tensor, b3: &Tensor) -> Tensor {
    let h1 = (x.matmul(w1) + b1).relu();
    let h2 = (h1.matmul(w2) + b2).relu();
    let logits = h2.matmul(w3) + b3;
    let nll = -(logits.log_softmax(1) * y_onehot).sum_dim(&[1], false);
    nll.mean()
}

#[test]
fn the_w3_loss_runs_its_reductions_as_fused_kernels_forward_and_backward() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let make = || {
        let p = |s: &[usize], seed| input(s, DType::F32, seed, false, -0.5, 0.5).requires_grad_(true).unwrap();
        (p(&[6, 5], 3), p(&[5], 4), p(&[5, 5], 5), p(&[5], 6), p(&[5, 3], 7), p(&[3], 8))
    };
    let x = input(&[8, 6], DType::F32, 1, false, -1.0, 1.0);
    let y = input(&[8, 3], DType::F32, 2, false, 0.0, 1.0);
    let (w1, b1, w2, b2, w3, b3) = make();
    let args = [&x, &y, &w1, &b1, &w2, &b2, &w3, &b3].map(Arg::from);
    let names: Vec<String> = w3_loss::compiled().kernels(&args).unwrap().into_iter().map(|k| k.name).collect();
    for want in ["fused_add_relu_0", "fused_add_relu_1", "fused_add_log_softmax_2", "fused_sum_dim_neg_3", "fused_exp_sum_dim_mul_sub_1"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    let (fused, op_by_op) = kernel_stats();
    let c = w3_loss(&x, &y, &w1, &b1, &w2, &b2, &w3, &b3).unwrap();
    let (f1, o1) = kernel_stats();
    // Forward: each add_relu is one kernel (the partitioner saves the
    // relu's output, which the next matmul reads, not the sum before it),
    // and so are the softmax and sum_dim.
    assert_eq!((f1 - fused, o1 - op_by_op), (4, 0), "the forward's kernels ran fused");
    c.backward().unwrap();
    let (f2, o2) = kernel_stats();
    // Backward: the loss's two kernels (one a row kernel) and the two relu
    // masks (`gt`, `cast_like`, `mul`).
    assert_eq!((f2 - f1, o2 - o1), (4, 0), "the backward's kernels ran fused");
    let (ew1, eb1, ew2, eb2, ew3, eb3) = make();
    let e = w3_loss::compiled().run_eager(&[&x, &y, &ew1, &eb1, &ew2, &eb2, &ew3, &eb3].map(Arg::from)).unwrap().remove(0);
    e.backward().unwrap();
    same("loss", &c.detach().unwrap(), &e.detach().unwrap());
    for (name, a, b) in [("w1", &w1, &ew1), ("b1", &b1, &eb1), ("w2", &w2, &ew2), ("b2", &b2, &eb2), ("w3", &w3, &ew3), ("b3", &b3, &eb3)] {
        same(&format!("grad {name}"), &a.grad().unwrap(), &b.grad().unwrap());
    }
}

/// A reduction over a broadcasting prologue, with an epilogue.
#[aot_fn]
fn sum_k(x: &Tensor, b: &Tensor, d: i64, k: bool) -> Tensor {
    ((x * b).tanh() + 1.0).sum_dim(&[d], k) * 0.5
}

#[aot_fn]
fn mean_k(x: &Tensor, b: &Tensor, d: i64, k: bool) -> Tensor {
    (x.abs() + b).mean_dim(&[d], k).log()
}

#[aot_fn]
fn amax_k(x: &Tensor, b: &Tensor, d: i64, k: bool) -> Tensor {
    (x - b).amax_dim(&[d], k).neg()
}

#[aot_fn]
fn var_k(x: &Tensor, b: &Tensor, d: i64, k: bool) -> Tensor {
    ((x * b).var_dim(&[d], 1, k) + 1.0).sqrt()
}

/// Two dims, then every dim.
#[aot_fn]
fn multi(x: &Tensor, b: &Tensor, k: bool) -> (Tensor, Tensor) {
    ((x + b).exp().sum_dim(&[0, 2], k), (x * b).square().mean().sqrt())
}

#[aot_fn]
fn softmax_k(x: &Tensor, b: &Tensor, d: i64) -> Tensor {
    (x + b).softmax(d) * 2.0
}

#[aot_fn]
fn log_softmax_k(x: &Tensor, b: &Tensor, d: i64) -> Tensor {
    (x * b).log_softmax(d).neg()
}

/// log_softmax's gradient: a keepdim reduction broadcast back along its rows.
#[aot_fn]
fn row_k(g: &Tensor, ls: &Tensor, d: i64) -> Tensor {
    g - ls.exp() * g.sum_dim(&[d], true)
}

/// Runs `f` compiled and eagerly, checks they agree and that `kernels`
/// kernels ran fused.
fn check_fused(what: &str, f: &aot_runtime::CompiledFn, args: &[Arg], compiled: Vec<Tensor>, before: (u64, u64), kernels: u64) {
    assert_eq!(kernel_stats(), (before.0 + kernels, before.1), "{what}: its kernels ran fused");
    let eager = f.run_eager(args).unwrap();
    assert_eq!(compiled.len(), eager.len());
    for (c, e) in compiled.iter().zip(&eager) {
        same(what, c, e);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Reduction kernels against eager on random shapes, strides, dims,
    /// keepdim and dtypes: values, dtype, shape and strides agree.
    #[test]
    fn reduction_kernels_match_eager(
        shape in proptest::collection::vec(1usize..7, 3), dtype in dtype_strategy(), t in any::<bool>(),
        bshape in 0usize..3, d in 0i64..3, neg in any::<bool>(), k in any::<bool>(), seed in 0u64..1000,
    ) {
        let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
        let x = input(&shape, dtype, seed, t, -2.0, 2.0);
        let b = match bshape {
            0 => input(&shape, dtype, seed + 1, !t, 0.5, 1.5),
            1 => input(&shape[1..], dtype, seed + 1, false, 0.5, 1.5),
            _ => input(&[shape[0], 1, 1], dtype, seed + 1, false, 0.5, 1.5),
        };
        let d = if neg { d - 3 } else { d };
        let what = format!("{dtype:?} {:?}/{:?} b {:?} d {d} keepdim {k}", x.shape(), x.stride(), b.shape());
        for (name, f, run) in [
            ("sum", sum_k::compiled(), sum_k as fn(&Tensor, &Tensor, i64, bool) -> aot_runtime::Result<Tensor>),
            ("mean", mean_k::compiled(), mean_k),
            ("amax", amax_k::compiled(), amax_k),
            ("var", var_k::compiled(), var_k),
        ] {
            let before = kernel_stats();
            let c = run(&x, &b, d, k).unwrap();
            check_fused(&format!("{name} {what}"), f, &[Arg::from(&x), Arg::from(&b), Arg::from(d), Arg::from(k)], vec![c], before, 1);
        }
        let before = kernel_stats();
        let (c0, c1) = multi(&x, &b, k).unwrap();
        check_fused(&format!("multi {what}"), multi::compiled(), &[Arg::from(&x), Arg::from(&b), Arg::from(k)], vec![c0, c1], before, 2);
        for (name, f, run) in [
            ("softmax", softmax_k::compiled(), softmax_k as fn(&Tensor, &Tensor, i64) -> aot_runtime::Result<Tensor>),
            ("log_softmax", log_softmax_k::compiled(), log_softmax_k),
        ] {
            let before = kernel_stats();
            let c = run(&x, &b, d).unwrap();
            check_fused(&format!("{name} {what}"), f, &[Arg::from(&x), Arg::from(&b), Arg::from(d)], vec![c], before, 1);
        }
        let g = b.expand(&shape.iter().map(|&n| n as i64).collect::<Vec<_>>()).unwrap();
        let before = kernel_stats();
        let c = row_k(&g, &x, d).unwrap();
        check_fused(&format!("row {what}"), row_k::compiled(), &[Arg::from(&g), Arg::from(&x), Arg::from(d)], vec![c], before, 1);
    }
}

#[test]
fn large_reduction_kernels_split_rows_across_threads() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    // Few long rows: each row split across threads.
    for (shape, t) in [(vec![40usize, 30, 50], false), (vec![50, 40, 30], true), (vec![1, 2, 70000], false)] {
        let x = input(&shape, DType::F32, 7, t, -2.0, 2.0);
        let b = input(&shape[1..], DType::F32, 8, false, 0.5, 1.5);
        for k in [false, true] {
            let before = kernel_stats();
            let (c0, c1) = multi(&x, &b, k).unwrap();
            check_fused(
                &format!("multi {shape:?} transposed={t}"),
                multi::compiled(),
                &[Arg::from(&x), Arg::from(&b), Arg::from(k)],
                vec![c0, c1],
                before,
                2,
            );
        }
    }
    for (shape, t) in [([300usize, 257], false), ([300, 257], true), ([3, 40000], false), ([1, 100_000], false)] {
        let x = input(&shape, DType::F32, 5, t, -2.0, 2.0);
        let b = input(&shape[1..], DType::F32, 6, false, 0.5, 1.5);
        for d in [0i64, 1] {
            let what = format!("{shape:?} transposed={t} d {d}");
            let before = kernel_stats();
            let c = sum_k(&x, &b, d, false).unwrap();
            check_fused(
                &format!("sum {what}"),
                sum_k::compiled(),
                &[Arg::from(&x), Arg::from(&b), Arg::from(d), Arg::from(false)],
                vec![c],
                before,
                1,
            );
            let before = kernel_stats();
            let c = log_softmax_k(&x, &b, d).unwrap();
            check_fused(
                &format!("log_softmax {what}"),
                log_softmax_k::compiled(),
                &[Arg::from(&x), Arg::from(&b), Arg::from(d)],
                vec![c],
                before,
                1,
            );
            let before = kernel_stats();
            let c = var_k(&x, &b, d, true).unwrap();
            check_fused(
                &format!("var {what}"),
                var_k::compiled(),
                &[Arg::from(&x), Arg::from(&b), Arg::from(d), Arg::from(true)],
                vec![c],
                before,
                1,
            );
        }
    }
}

#[test]
fn a_reduction_kernel_outside_the_fused_path_runs_op_by_op_with_eager_errors() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let x = input(&[3, 4], DType::F32, 1, false, -1.0, 1.0);
    let b = input(&[4], DType::F32, 2, false, 0.5, 1.5);
    // A dim out of range: eager's error, naming the op.
    let e = sum_k(&x, &b, 5, false).unwrap_err().to_string();
    let r = sum_k::compiled().run_eager(&[Arg::from(&x), Arg::from(&b), Arg::from(5i64), Arg::from(false)]).unwrap_err().to_string();
    assert_eq!(e, r);
    assert!(e.contains("sum_dim"), "{e}");
    // Empty rows: op by op, eager's values.
    let z = input(&[3, 0], DType::F32, 1, false, -1.0, 1.0);
    let zb = input(&[0], DType::F32, 2, false, 0.5, 1.5);
    let (fused, op_by_op) = kernel_stats();
    let c = mean_k(&z, &zb, 1, false).unwrap();
    assert_eq!(kernel_stats(), (fused, op_by_op + 1));
    same("empty mean", &c, &mean_k::compiled().run_eager(&[Arg::from(&z), Arg::from(&zb), Arg::from(1i64), Arg::from(false)]).unwrap()[0]);
}
