//! Kernels over several dtypes: comparisons, `where_`, casts, integer and
//! bool values, and promotion between the values of one kernel. Random
//! programs of these ops on inputs of random dtypes and broadcast shapes
//! must give eager's dtype, layout and bits (or eager's error), and run
//! fused whenever eager computes them; the compiled backward of `relu`
//! (`gt`, `cast_like`, `mul`) is one fused kernel.

use aot_ir::graph::args::{dtype as dtype_arg, f, i, t};
use aot_ir::{GraphBuilder, OpKind, ReturnKind, ValueId};
use aot_runtime::prelude::*;
use aot_runtime::testing::kernel_stats;
use aot_runtime::{Arg, CompiledFn};
use proptest::prelude::*;
use std::sync::Mutex;

/// The kernel counters are process-wide: tests that read them take turns.
static STATS: Mutex<()> = Mutex::new(());

/// Random programs that ran at least one fused kernel.
static FUSED_CASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

const DTYPES: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];

/// The elements of `x` as bit patterns that compare exactly: i64 as
/// itself, everything else through f64 (exact for every float dtype and
/// bool), NaNs as one pattern.
fn bits(x: &Tensor) -> Vec<u64> {
    if x.dtype() == DType::I64 {
        return x.to_vec::<i64>().unwrap().into_iter().map(|v| v as u64).collect();
    }
    x.to_vec::<f64>().unwrap().into_iter().map(|v| if v.is_nan() { u64::MAX } else { v.to_bits() }).collect()
}

/// Compiled and eager agree on dtype, shape, strides and every bit.
fn same_bits(what: &str, c: &Tensor, e: &Tensor) {
    assert_eq!((c.dtype(), c.shape(), c.stride()), (e.dtype(), e.shape(), e.stride()), "{what}: metadata");
    assert_eq!(bits(c), bits(e), "{what}: values\ncompiled {:?}\neager    {:?}", c.to_vec::<f64>(), e.to_vec::<f64>());
}

/// A tensor of `shape` and `dtype` from the seed, with repeated small
/// values (so comparisons see ties), zeros, halves, large values and, in
/// floats, NaN; transposed (a strided input) when asked.
fn input(shape: &[usize], dtype: DType, seed: u64, transposed: bool) -> Tensor {
    let mut s = shape.to_vec();
    let transposed = transposed && s.len() == 2;
    if transposed {
        s.swap(0, 1);
    }
    let n: usize = s.iter().product();
    let pick = |k: u64| -> f64 {
        match k % 11 {
            0 => 0.0,
            1 => -1.0,
            2 => 2.0,
            3 => 0.5,
            4 => -2.5,
            5 if dtype.is_float() => f64::NAN,
            6 => 3.0e9,
            7 => 1.0,
            k => k as f64 - 7.25,
        }
    };
    let vals: Vec<f64> = (0..n as u64).map(|k| pick(k.wrapping_mul(2_654_435_761).wrapping_add(seed * 7919) >> 3)).collect();
    let x = Tensor::from_vec(vals, &s, &Device::Cpu).unwrap().to_dtype(dtype).unwrap();
    if transposed {
        x.transpose(0, 1).unwrap()
    } else {
        x
    }
}

/// One op of a random program, over the values made so far.
#[derive(Clone, Debug)]
enum Step {
    /// A comparison with another value or a scalar.
    Cmp(usize, usize, Option<f64>, usize),
    /// Arithmetic (add, sub, mul, div, maximum, minimum) with a value or
    /// a scalar (an integer scalar when `int`).
    Arith(usize, usize, Option<f64>, bool, usize),
    /// A unary op (neg, abs, relu, square, exp, tanh).
    Unary(usize, usize),
    /// `to_dtype`.
    Cast(usize, usize),
    /// `where_(cond, other)`: value, condition (made a bool by `ne 0`
    /// first when it is not), other value or scalar.
    Where(usize, usize, usize, Option<f64>),
}

const CMPS: [OpKind; 6] = [OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge];
const ARITH: [OpKind; 6] = [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Maximum, OpKind::Minimum];
const UNARY: [OpKind; 6] = [OpKind::Neg, OpKind::Abs, OpKind::Relu, OpKind::Square, OpKind::Exp, OpKind::Tanh];

fn step_strategy() -> impl Strategy<Value = Step> {
    let v = 0usize..64;
    let s = prop::option::of(prop_oneof![Just(0.0), Just(1.0), Just(-2.0), Just(0.5), Just(2.5)]);
    prop_oneof![
        (0..6usize, v.clone(), v.clone(), s.clone()).prop_map(|(k, a, b, s)| Step::Cmp(k, a, s, b)),
        (0..6usize, v.clone(), v.clone(), s.clone(), any::<bool>()).prop_map(|(k, a, b, s, int)| Step::Arith(k, a, s, int, b)),
        (0..6usize, v.clone()).prop_map(|(k, a)| Step::Unary(k, a)),
        (0..6usize, v.clone()).prop_map(|(d, a)| Step::Cast(d, a)),
        (v.clone(), v.clone(), v, s).prop_map(|(a, c, b, s)| Step::Where(a, c, b, s)),
    ]
}

/// A scalar argument: an integer when asked and the value is one.
fn scalar(x: f64, int: bool) -> aot_ir::Arg {
    if int && x.fract() == 0.0 {
        i(x as i64)
    } else {
        f(x)
    }
}

/// The program of `steps` over `inputs` inputs, returning its last value.
fn program(inputs: usize, steps: &[Step]) -> aot_ir::Graph {
    let mut g = GraphBuilder::new("dtypes");
    let mut vals: Vec<ValueId> = (0..inputs).map(|k| g.tensor(&format!("x{k}"), false)).collect();
    for s in steps {
        let pick = |k: usize| vals[k % vals.len()];
        let rhs = |b: usize, s: Option<f64>, int: bool| s.map_or(t(pick(b)), |x| scalar(x, int));
        let v = match *s {
            Step::Cmp(k, a, s, b) => g.call(CMPS[k], pick(a), vec![rhs(b, s, false)]),
            Step::Arith(k, a, s, int, b) => g.call(ARITH[k], pick(a), vec![rhs(b, s, int)]),
            Step::Unary(k, a) => g.call(UNARY[k], pick(a), vec![]),
            Step::Cast(d, a) => g.call(OpKind::ToDtype, pick(a), vec![dtype_arg(DTYPES[d])]),
            Step::Where(a, c, b, s) => {
                let cond = g.call(OpKind::Ne, pick(c), vec![i(0)]);
                g.call(OpKind::Where, pick(a), vec![t(cond), rhs(b, s, false)])
            }
        };
        vals.push(v);
    }
    g.finish(vec![*vals.last().unwrap()], ReturnKind::Single)
}

/// Calls `f` compiled and eagerly on `args`: both fail, or both give the
/// same result bit for bit, with every kernel fused (every op of these
/// programs that eager computes is one the fused path computes).
fn check(f: &CompiledFn, args: &[Arg], what: &str) {
    // The kernel stage's kernels (the listing also names the primitives
    // the call runs outside it).
    let kernels = f.kernels(args).map_or(0, |k| k.iter().filter(|k| k.name.starts_with("fused_")).count()) as u64;
    let before = kernel_stats();
    let c = f.__call(args);
    let after = kernel_stats();
    match (c, f.run_eager(args)) {
        (Ok(c), Ok(e)) => {
            same_bits(what, &c[0], &e[0]);
            assert_eq!((after.0 - before.0, after.1 - before.1), (kernels, 0), "{what}: every kernel ran fused");
            FUSED_CASES.fetch_add(u64::from(kernels > 0), std::sync::atomic::Ordering::Relaxed);
        }
        (Err(_), Err(_)) => {}
        (c, e) => panic!("{what}: compiled {:?} but eager {:?}", c.map(|_| ()), e.map(|_| ())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Random kernels of comparisons, `where_`, casts, arithmetic and
    /// unary ops over inputs of any dtypes, broadcast shapes (0-dim
    /// included, which promote with a lower priority) and strides: eager's
    /// dtype, layout and bits. A program eager computes runs fused unless
    /// it holds an op eager computes only op by op.
    #[test]
    fn mixed_dtype_kernels_match_eager_bit_for_bit(
        dts in prop::collection::vec(0..6usize, 3),
        shapes in prop::collection::vec(0..5usize, 3),
        rows in 1usize..5, cols in 1usize..40, big in any::<bool>(), tr in any::<bool>(),
        steps in prop::collection::vec(step_strategy(), 1..7), seed in 0u64..1000,
    ) {
        let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
        let cols = if big { cols * 61 } else { cols };
        let inputs: Vec<Tensor> = (0..3).map(|k| {
            let shape = match shapes[k] {
                0 | 1 => vec![rows, cols],
                2 => vec![1, cols],
                3 => vec![rows, 1],
                _ => vec![],
            };
            input(&shape, DTYPES[dts[k]], seed + k as u64, tr && k == 0)
        }).collect();
        let g = program(3, &steps);
        let listing = g.to_string();
        let f = CompiledFn::new(g).unwrap();
        let args: Vec<Arg> = inputs.iter().map(Arg::from).collect();
        check(&f, &args, &format!("{listing}\ninputs {:?}", inputs.iter().map(|x| (x.dtype(), x.shape())).collect::<Vec<_>>()));
    }
}

/// The random programs above are not all refused or trivial: a run of the
/// property (here, another one) runs fused kernels in many of its cases.
#[test]
fn random_programs_mostly_run_fused_kernels() {
    mixed_dtype_kernels_match_eager_bit_for_bit();
    let n = FUSED_CASES.load(std::sync::atomic::Ordering::Relaxed);
    assert!(n >= 40, "only {n} random programs ran a fused kernel");
}

/// `a` and `b` through integer arithmetic, comparisons and `where_`: two
/// kernels (`n` is read twice), fused, bit for bit eager's, overflow
/// wrapping as eager's does.
#[test]
fn integer_kernels_run_fused_and_wrap_as_eager() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let mut g = GraphBuilder::new("ints");
    let (a, b) = (g.tensor("a", false), g.tensor("b", false));
    let p = g.call(OpKind::Mul, a, vec![t(b)]);
    let q = g.call(OpKind::Add, p, vec![i(3)]);
    let r = g.call(OpKind::Maximum, q, vec![t(a)]);
    let n = g.call(OpKind::Neg, r, vec![]);
    let m = g.call(OpKind::Gt, n, vec![t(b)]);
    let w = g.call(OpKind::Where, n, vec![t(m), i(-7)]);
    let s = g.call(OpKind::Abs, w, vec![]);
    let out = g.call(OpKind::Sub, s, vec![t(b)]);
    let graph = g.finish(vec![out], ReturnKind::Single);
    let f = CompiledFn::new(graph).unwrap();
    let av: Vec<i64> = (0..3000).map(|k| (k * 7919 % 201) - 100).chain([i64::MAX, i64::MIN, 1 << 40]).collect();
    let bv: Vec<i64> = (0..3003).map(|k| (k * 104_729 % 37) - 18).collect();
    let x = Tensor::from_vec(av, &[3003], &Device::Cpu).unwrap();
    let y = Tensor::from_vec(bv, &[3003], &Device::Cpu).unwrap();
    let args = [Arg::from(&x), Arg::from(&y)];
    let kernels = f.kernels(&args).unwrap();
    assert_eq!(kernels.len(), 2, "{kernels:?}");
    let before = kernel_stats();
    let c = f.__call(&args).unwrap();
    assert_eq!(kernel_stats(), (before.0 + 2, before.1), "the integer kernels ran fused");
    let e = f.run_eager(&args).unwrap();
    assert_eq!(c[0].dtype(), DType::I64);
    same_bits("ints", &c[0], &e[0]);
    // Division and float functions of integers promote to f32, in the kernel.
    let mut g = GraphBuilder::new("int_div");
    let a = g.tensor("a", false);
    let d = g.call(OpKind::Div, a, vec![i(3)]);
    let x2 = g.call(OpKind::Exp, a, vec![]);
    let out = g.call(OpKind::Add, d, vec![t(x2)]);
    let f = CompiledFn::new(g.finish(vec![out], ReturnKind::Single)).unwrap();
    let small = Tensor::from_vec((0..50i64).map(|k| k % 9 - 4).collect::<Vec<_>>(), &[5, 10], &Device::Cpu).unwrap();
    let args = [Arg::from(&small)];
    check(&f, &args, "int div");
    assert_eq!(f.__call(&args).unwrap()[0].dtype(), DType::F32);
}

/// Ops eager refuses for their dtypes leave the kernel op by op, which
/// reports eager's error.
#[test]
fn ops_eager_refuses_run_op_by_op_with_eagers_error() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let mut g = GraphBuilder::new("bools");
    let a = g.tensor("a", false);
    let m = g.call(OpKind::Gt, a, vec![f(0.0)]);
    let e = g.call(OpKind::Exp, m, vec![]);
    let f = CompiledFn::new(g.finish(vec![e], ReturnKind::Single)).unwrap();
    let x = input(&[4, 5], DType::F32, 1, false);
    let before = kernel_stats();
    let err = f.__call(&[Arg::from(&x)]).unwrap_err().to_string();
    assert_eq!(kernel_stats().1, before.1 + 1, "ran op by op");
    assert!(err.contains("exp") && err.contains("bool"), "{err}");
}

/// A layer whose backward masks the gradient with `relu`'s.
#[aot_fn]
fn relu_layer(x: &Tensor, w: &Tensor, v: &Tensor) -> Tensor {
    x.matmul(w).relu().matmul(v).sum()
}

/// relu's compiled backward, `mul(g, cast_like(gt(h, 0), g))`, is one
/// fused kernel, and the gradients are eager's bit for bit.
#[test]
fn the_relu_backward_is_one_fused_kernel() {
    let _g = STATS.lock().unwrap_or_else(|e| e.into_inner());
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let make = || {
            // Finite, moderate values (no NaN), as leaves.
            let leaf = |x: Tensor| x.where_(&x.eq(&x).unwrap(), 0.0).unwrap().clamp(-3.0, 3.0).unwrap().detach().unwrap();
            let x = leaf(input(&[6, 5], dtype, 1, false)).requires_grad_(true).unwrap();
            let w = leaf(input(&[5, 7], dtype, 2, true)).requires_grad_(true).unwrap();
            let v = leaf(input(&[7, 3], dtype, 3, false)).requires_grad_(true).unwrap();
            (x, w, v)
        };
        let (x, w, v) = make();
        let args = [Arg::from(&x), Arg::from(&w), Arg::from(&v)];
        let kernels = relu_layer::compiled().kernels(&args).unwrap();
        let mask: Vec<_> = kernels.iter().filter(|k| k.source.contains("= gt(") && k.source.contains("= cast_like(")).collect();
        assert_eq!(mask.len(), 1, "{kernels:#?}");
        assert!(mask[0].source.contains("= mul("), "{}", mask[0].source);
        let out = relu_layer(&x, &w, &v).unwrap();
        let before = kernel_stats();
        out.backward().unwrap();
        let after = kernel_stats();
        assert!(after.0 > before.0 && after.1 == before.1, "{dtype:?}: the backward's kernels ran fused: {before:?} -> {after:?}");
        let (ex, ew, ev) = make();
        let e = relu_layer::compiled().run_eager(&[Arg::from(&ex), Arg::from(&ew), Arg::from(&ev)]).unwrap().remove(0);
        e.backward().unwrap();
        same_bits("loss", &out.detach().unwrap(), &e.detach().unwrap());
        for (what, c, e) in [("x", &x, &ex), ("w", &w, &ew), ("v", &v, &ev)] {
            same_bits(&format!("{dtype:?} grad {what}"), &c.grad().unwrap(), &e.grad().unwrap());
        }
    }
}
