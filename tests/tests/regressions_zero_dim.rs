//! Regressions, parts 7, 8 and 9.
//!
//! - Reductions over dim 0 or -1 of a 0-d tensor (`sum_dim`, `mean_dim`,
//!   `amax_dim`, `var_dim`, `softmax`, `log_softmax`, with `keepdim` both
//!   ways) run compiled with a leaf that requires grad: the output and the
//!   gradient equal the eager reference's and PyTorch's (a 0-d result;
//!   gradient 1 for sum/mean/amax, 0 for softmax/log_softmax and for var
//!   with correction 0, NaN for var with correction 1 as `2 / (1 - 1) * 0`).
//! - Integer `pow` with a negative integer scalar exponent is PyTorch's
//!   error, eager and compiled; a tensor exponent follows PyTorch's integer
//!   kernel (no error: `1`, `±1` for base `-1`, else `0`).
//! - The saved-tensor rule of compiled backward: it refuses exactly when a
//!   tensor it saved was modified in place. Which tensors it saves is the
//!   partitioner's choice, so it may accept a call eager refuses (the
//!   modified value was recomputed, and the gradient is still the true one).

use aot_runtime::prelude::*;
use aot_runtime::{Arg, CompiledFn};

fn scalar_leaf(v: f64) -> Tensor {
    Tensor::from_vec(vec![v], &[], &Device::Cpu).unwrap().requires_grad_(true).unwrap()
}

fn value(t: &Tensor) -> f64 {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()[0]
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

// ---------------------------------------------------------------------------
// Part 7: reductions of a 0-d tensor

#[aot_fn]
fn sum0(x: &Tensor, d: i64, k: bool) -> Tensor {
    x.sum_dim(&[d], k)
}

#[aot_fn]
fn mean0(x: &Tensor, d: i64, k: bool) -> Tensor {
    x.mean_dim(&[d], k)
}

#[aot_fn]
fn amax0(x: &Tensor, d: i64, k: bool) -> Tensor {
    x.amax_dim(&[d], k)
}

#[aot_fn]
fn var0_corr0(x: &Tensor, d: i64, k: bool) -> Tensor {
    x.var_dim(&[d], 0, k)
}

#[aot_fn]
fn var0_corr1(x: &Tensor, d: i64, k: bool) -> Tensor {
    x.var_dim(&[d], 1, k)
}

#[aot_fn]
fn softmax0(x: &Tensor, d: i64) -> Tensor {
    x.softmax(d)
}

#[aot_fn]
fn log_softmax0(x: &Tensor, d: i64) -> Tensor {
    x.log_softmax(d)
}

/// The reproducer, with its literal dims.
#[aot_fn]
fn var0_literal(x: &Tensor) -> Tensor {
    x.var_dim(&[0], 1, false)
}

#[aot_fn]
fn sum_mean_amax_literal(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    (x.sum_dim(&[0], false), x.mean_dim(&[-1], true), x.amax_dim(&[0], false))
}

/// (output shape, output value, gradient of `out.sum()`) of one call.
type Outcome = (Vec<usize>, f64, f64);

fn outcome(name: &str, call: impl Fn(&Tensor) -> Result<Vec<Tensor>>, compiled: bool) -> Outcome {
    let x = scalar_leaf(2.0);
    let outs = call(&x).unwrap_or_else(|e| panic!("{name}: call failed: {e}"));
    let out = &outs[0];
    if compiled {
        assert_eq!(out.grad_fn_name(), Some("CompiledFunctionBackward"), "{name}: the call was not compiled");
    }
    out.sum().and_then(|s| s.backward()).unwrap_or_else(|e| panic!("{name}: backward failed: {e}"));
    let g = x.grad().unwrap_or_else(|| panic!("{name}: no gradient"));
    assert_eq!(g.shape(), Vec::<usize>::new(), "{name}: the gradient is not 0-d");
    (out.shape(), value(out), value(&g))
}

/// Runs `f` compiled and eager with a 0-d leaf of value 2 and checks both
/// against the expected (output value, gradient), output 0-d.
fn check(name: &str, compiled: impl Fn(&Tensor) -> Result<Vec<Tensor>>, eager: impl Fn(&Tensor) -> Result<Vec<Tensor>>, want: (f64, f64)) {
    let c = outcome(name, compiled, true);
    let e = outcome(name, eager, false);
    assert_eq!(c.0, e.0, "{name}: output shape, compiled vs eager");
    assert!(same(c.1, e.1) && same(c.2, e.2), "{name}: compiled (out, grad) = ({}, {}), eager ({}, {})", c.1, c.2, e.1, e.2);
    assert_eq!(e.0, Vec::<usize>::new(), "{name}: a 0-d tensor reduced gives a 0-d result");
    assert!(same(e.1, want.0) && same(e.2, want.1), "{name}: (out, grad) = ({}, {}), PyTorch gives {want:?}", e.1, e.2);
}

macro_rules! reduction_case {
    ($f:ident, $d:expr, $k:expr, $want:expr) => {
        check(
            &format!("{}(dim {}, keepdim {})", stringify!($f), $d, $k),
            |x| Ok(vec![$f(x, $d, $k)?]),
            |x| $f::compiled().run_eager(&[Arg::from(x), Arg::from($d as i64), Arg::from($k)]),
            $want,
        )
    };
}

#[test]
fn reductions_of_a_0d_tensor_over_dim_0_and_minus_1() {
    for d in [0i64, -1] {
        for k in [false, true] {
            reduction_case!(sum0, d, k, (2.0, 1.0));
            reduction_case!(mean0, d, k, (2.0, 1.0));
            reduction_case!(amax0, d, k, (2.0, 1.0));
            reduction_case!(var0_corr0, d, k, (0.0, 0.0));
            reduction_case!(var0_corr1, d, k, (f64::NAN, f64::NAN));
        }
    }
}

#[test]
fn softmax_and_log_softmax_of_a_0d_tensor() {
    for d in [0i64, -1] {
        let name = format!("softmax0(dim {d})");
        check(&name, |x| Ok(vec![softmax0(x, d)?]), |x| softmax0::compiled().run_eager(&[Arg::from(x), Arg::from(d)]), (1.0, 0.0));
        let name = format!("log_softmax0(dim {d})");
        check(&name, |x| Ok(vec![log_softmax0(x, d)?]), |x| log_softmax0::compiled().run_eager(&[Arg::from(x), Arg::from(d)]), (0.0, 0.0));
    }
}

#[test]
fn issue_reproducers_with_literal_dims() {
    check("var0_literal", |x| Ok(vec![var0_literal(x)?]), |x| var0_literal::compiled().run_eager(&[Arg::from(x)]), (f64::NAN, f64::NAN));
    // Each output alone, then all three into one loss.
    for i in 0..3 {
        let pick = |outs: Vec<Tensor>| outs.into_iter().nth(i).map(|o| vec![o]).ok_or_else(|| unreachable!());
        check(
            &format!("sum_mean_amax_literal output {i}"),
            |x| {
                let (a, b, c) = sum_mean_amax_literal(x)?;
                pick(vec![a, b, c])
            },
            |x| pick(sum_mean_amax_literal::compiled().run_eager(&[Arg::from(x)])?),
            (2.0, 1.0),
        );
    }
    let x = scalar_leaf(2.0);
    let (a, b, c) = sum_mean_amax_literal(&x).unwrap();
    a.add(&b).unwrap().add(&c).unwrap().backward().unwrap();
    assert_eq!(value(&x.grad().unwrap()), 3.0);
}

// ---------------------------------------------------------------------------
// Part 8: integer pow

#[aot_fn]
fn pow_scalar_neg(x: &Tensor) -> Tensor {
    x.pow(-1)
}

#[aot_fn]
fn pow_scalar_arg(x: &Tensor, e: i64) -> Tensor {
    x.pow(e)
}

#[aot_fn]
fn pow_tensor(x: &Tensor, e: &Tensor) -> Tensor {
    x.pow(e)
}

const NEG_POW: &str = "Integers to negative integer powers are not allowed.";

fn assert_neg_pow_error(what: &str, r: Result<Vec<Tensor>>) {
    match r {
        Ok(v) => panic!("{what}: expected PyTorch's error, got {:?}", v.iter().map(|t| t.to_vec::<i64>()).collect::<Vec<_>>()),
        Err(e) => assert!(e.to_string().contains(NEG_POW) && e.to_string().contains("pow"), "{what}: wrong error: {e}"),
    }
}

fn ints(v: Vec<i64>) -> Tensor {
    let n = v.len();
    Tensor::from_vec(v, &[n], &Device::Cpu).unwrap()
}

#[test]
fn integer_pow_with_a_negative_scalar_exponent_is_an_error() {
    let x = ints(vec![1, 2, 3, 4]);
    assert_neg_pow_error("eager pow(-1)", x.pow(-1i64).map(|t| vec![t]));
    assert_neg_pow_error("eager pow(-3)", x.pow(-3i64).map(|t| vec![t]));
    let b = Tensor::from_vec(vec![true, false], &[2], &Device::Cpu).unwrap();
    assert_neg_pow_error("eager bool pow(-1)", b.pow(-1i64).map(|t| vec![t]));
    assert_neg_pow_error("compiled literal", pow_scalar_neg(&x).map(|t| vec![t]));
    assert_neg_pow_error("compiled argument", pow_scalar_arg(&x, -2).map(|t| vec![t]));
    assert_neg_pow_error("eager reference", pow_scalar_neg::compiled().run_eager(&[Arg::from(&x)]));
    // The same calls with exponents PyTorch allows.
    assert_eq!(x.pow(0i64).unwrap().to_vec::<i64>().unwrap(), vec![1, 1, 1, 1]);
    assert_eq!(pow_scalar_arg(&x, 3).unwrap().to_vec::<i64>().unwrap(), vec![1, 8, 27, 64]);
    assert_eq!(x.pow(-1.0).unwrap().to_vec::<f32>().unwrap(), vec![1.0, 0.5, 1.0 / 3.0, 0.25]);
}

#[test]
fn integer_pow_with_a_tensor_exponent_follows_pytorch() {
    // PyTorch checks only a scalar exponent; its integer kernel gives a
    // negative power 1 for base 1, +-1 for base -1 and 0 otherwise (0 too).
    let base = ints(vec![1, -1, -1, 2, -3, 0, 3, 7]);
    let exp = ints(vec![-5, -1, -2, -1, -1, -1, 39, 0]);
    let want = vec![1, -1, 1, 0, 0, 0, 4052555153018976267, 1];
    assert_eq!(base.pow(&exp).unwrap().to_vec::<i64>().unwrap(), want);
    assert_eq!(pow_tensor(&base, &exp).unwrap().to_vec::<i64>().unwrap(), want);
    // `s ** t` is the tensor-tensor op in PyTorch.
    assert_eq!(exp.rpow(2i64).unwrap().to_vec::<i64>().unwrap(), vec![0, 0, 0, 0, 0, 0, 549755813888, 1]);
    // Overflow wraps, as PyTorch's repeated multiplication does.
    let wrapped = ints(vec![3]).pow(&ints(vec![41])).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(wrapped, vec![3i64.wrapping_pow(41)]);
}

// ---------------------------------------------------------------------------
// Part 9: the saved-tensor rule

/// exp's backward reads its output, which the partitioner saves (as eager
/// and PyTorch's partitioner do: recomputing it would cost more).
#[aot_fn]
fn exp_of(x: &Tensor) -> Tensor {
    x.exp()
}

/// relu's backward reads a Bool mask of its output, which the partitioner
/// saves in place of the output (a quarter of its bytes).
#[aot_fn]
fn relu_of(x: &Tensor) -> Tensor {
    x.relu()
}

/// softmax is not recomputed: its output is saved.
#[aot_fn]
fn softmax_of(x: &Tensor) -> Tensor {
    x.softmax(0)
}

fn leaf3() -> Tensor {
    Tensor::from_vec(vec![0.3f64, -1.2, 0.7], &[3], &Device::Cpu).unwrap().requires_grad_(true).unwrap()
}

/// `y = f(x); y.mul_(2); (y * w).sum().backward()`: the result of backward
/// and x's gradient.
fn modify_then_backward(f: impl Fn(&Tensor) -> Result<Tensor>) -> (Result<()>, Tensor) {
    let x = leaf3();
    let y = f(&x).unwrap();
    y.mul_(2.0).unwrap();
    let w = Tensor::from_vec(vec![1.0f64, -0.5, 2.0], &[3], &Device::Cpu).unwrap();
    let r = y.mul(&w).and_then(|l| l.sum()).and_then(|l| l.backward());
    (r, x)
}

fn assert_saved_modified(what: &str, r: Result<()>, node: &str) {
    match r {
        Ok(()) => panic!("{what}: backward succeeded; it must refuse (a saved tensor was modified)"),
        Err(AotError::Autograd { op, msg }) => {
            assert_eq!(op, node, "{what}: the error names the wrong node: {msg}");
            assert!(msg.contains("modified by an inplace operation"), "{what}: wrong message: {msg}");
        }
        Err(e) => panic!("{what}: wrong error kind: {e}"),
    }
}

#[test]
fn compiled_backward_refuses_when_a_saved_output_was_modified() {
    for (what, f) in [("compiled softmax", softmax_of as fn(&Tensor) -> Result<Tensor>), ("compiled exp", exp_of)] {
        let (r, x) = modify_then_backward(f);
        assert_saved_modified(what, r, "CompiledFunctionBackward");
        assert!(x.grad().is_none(), "{what}: a refused backward accumulated a gradient");
    }
}

#[test]
fn compiled_backward_that_saved_a_mask_gives_the_true_gradient() {
    let (r, x) = modify_then_backward(relu_of);
    r.expect("the compiled backward reads the saved mask relu(x) > 0, not y");
    let g = x.grad().unwrap().to_vec::<f64>().unwrap();
    // d/dx sum(2 * relu(x) * w) = 2 * w where x > 0, and by central differences.
    let (xs, w) = ([0.3f64, -1.2, 0.7], [1.0f64, -0.5, 2.0]);
    let loss = |xs: &[f64]| xs.iter().zip(w).map(|(x, w)| 2.0 * x.max(0.0) * w).sum::<f64>();
    for i in 0..3 {
        let by_hand = if xs[i] > 0.0 { 2.0 * w[i] } else { 0.0 };
        assert_eq!(g[i], by_hand, "grad {i}");
        let (mut hi, mut lo) = (xs, xs);
        hi[i] += 1e-6;
        lo[i] -= 1e-6;
        let fd = (loss(&hi) - loss(&lo)) / 2e-6;
        assert!((g[i] - fd).abs() <= 1e-6 * fd.abs().max(1.0), "grad {i}: {} vs finite differences {fd}", g[i]);
    }
}

#[test]
fn eager_refuses_all_three() {
    fn eager(f: &CompiledFn) -> impl Fn(&Tensor) -> Result<Tensor> + '_ {
        move |x: &Tensor| f.run_eager(&[Arg::from(x)]).map(|mut v| v.remove(0))
    }
    let (r, x) = modify_then_backward(eager(exp_of::compiled()));
    assert_saved_modified("eager exp", r, "ExpBackward0");
    assert!(x.grad().is_none());
    let (r, x) = modify_then_backward(eager(softmax_of::compiled()));
    assert_saved_modified("eager softmax", r, "SoftmaxBackward0");
    assert!(x.grad().is_none());
    let (r, x) = modify_then_backward(eager(relu_of::compiled()));
    assert_saved_modified("eager relu", r, "ReluBackward0");
    assert!(x.grad().is_none());
    // The same with the tensor methods themselves.
    let (r, _) = modify_then_backward(|x| x.exp());
    assert_saved_modified("Tensor::exp", r, "ExpBackward0");
    let (r, _) = modify_then_backward(|x| x.softmax(0));
    assert_saved_modified("Tensor::softmax", r, "SoftmaxBackward0");
}

/// An empty slice past the end of its storage (a size-1 dim of stride 2
/// sliced at 1..1) scans to an empty result rather than panicking.
#[test]
fn cumsum_of_an_empty_view_past_the_buffer() -> Result<()> {
    let base = Tensor::from_vec(vec![1.0f64], &[1], &Device::Cpu)?;
    let v = base.as_strided(&[1], &[2], 0)?.slice(0, 1, 1, 1)?;
    assert_eq!(v.numel(), 0);
    assert_eq!(v.cumsum(-1)?.numel(), 0);
    Ok(())
}
