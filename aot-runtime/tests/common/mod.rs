//! Shared helpers of the eager-runtime integration tests: tensor builders,
//! closeness checks, error checks and a finite-difference `gradcheck`.
#![allow(dead_code)]

use aot_runtime::prelude::*;

pub const CPU: Device = Device::Cpu;

/// A small deterministic generator (xorshift64*), independent of the runtime's.
pub struct TestRng(u64);

impl TestRng {
    pub fn new(seed: u64) -> Self {
        TestRng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.range(lo, hi)).collect()
    }
}

/// Values in [lo, hi) from `seed`.
pub fn rand_vals(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    TestRng::new(seed).vec(n, lo, hi)
}

/// An f64 tensor.
pub fn t64(vals: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(vals.to_vec(), shape, &CPU).expect("from_vec f64")
}

/// A tensor of `dtype` made by casting f64 values.
pub fn tdt(vals: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    t64(vals, shape).to_dtype(dtype).expect("to_dtype")
}

/// An f64 tensor of `shape` with values in [lo, hi) from `seed`.
pub fn rand64(seed: u64, shape: &[usize], lo: f64, hi: f64) -> Tensor {
    let n = shape.iter().product();
    t64(&rand_vals(seed, n, lo, hi), shape)
}

/// 0, 1, 2, ... as an f64 tensor of `shape`.
pub fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    t64(&(0..n).map(|i| i as f64).collect::<Vec<_>>(), shape)
}

/// The values of `t` as f64.
pub fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("to_vec")
}

/// A relative tolerance that suits `dtype` for a few chained roundings.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

/// Asserts `|a - e| <= tol * max(1, |e|)` elementwise (NaN equals NaN).
#[track_caller]
pub fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "length: actual {actual:?} expected {expected:?}");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        if a.is_nan() && e.is_nan() {
            continue;
        }
        if a.is_infinite() || e.is_infinite() {
            assert_eq!(a, e, "element {i}: actual {actual:?} expected {expected:?}");
            continue;
        }
        let bound = tol * e.abs().max(1.0);
        assert!((a - e).abs() <= bound, "element {i}: {a} vs {e} (tol {tol}); actual {actual:?} expected {expected:?}");
    }
}

/// Asserts the values of `t` are close to `expected`.
#[track_caller]
pub fn assert_tensor(t: &Tensor, shape: &[usize], expected: &[f64], tol: f64) {
    assert_eq!(t.shape(), shape.to_vec(), "shape");
    assert_close(&vals(t), expected, tol);
}

/// Asserts `r` is an error whose message contains every one of `needles`.
#[track_caller]
pub fn assert_err<T: std::fmt::Debug>(r: Result<T>, needles: &[&str]) -> AotError {
    match r {
        Ok(v) => panic!("expected an error containing {needles:?}, got Ok({v:?})"),
        Err(e) => {
            let msg = e.to_string();
            for n in needles {
                assert!(msg.contains(n), "error message {msg:?} does not contain {n:?}");
            }
            e
        }
    }
}

/// Asserts `r` is an error whose message starts with the op name `op` (`"{op}: ..."`).
#[track_caller]
pub fn assert_op_err<T: std::fmt::Debug>(r: Result<T>, op: &str) -> AotError {
    let e = assert_err(r, &[op]);
    let msg = e.to_string();
    assert!(msg.starts_with(&format!("{op}:")) || msg.contains(&format!("{op}:")), "error {msg:?} does not name op {op:?}");
    e
}

/// Element-wise reference of `f` over the values of `t`.
pub fn map_ref(t: &Tensor, f: impl Fn(f64) -> f64) -> Vec<f64> {
    vals(t).into_iter().map(f).collect()
}

/// `erf` to about 1e-13 (series for |x| < 3, continued fraction beyond).
pub fn erf(x: f64) -> f64 {
    if x.abs() < 3.0 {
        let mut term = x;
        let mut sum = x;
        let x2 = x * x;
        let mut n = 0.0;
        loop {
            n += 1.0;
            term *= -x2 / n;
            let add = term / (2.0 * n + 1.0);
            sum += add;
            if add.abs() < 1e-17 * sum.abs().max(1e-300) {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc continued fraction (Lentz), accurate for |x| >= 3.
        let ax = x.abs();
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (ax + f);
        }
        let erfc = (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f);
        (1.0 - erfc).copysign(x)
    }
}

pub fn gelu_ref(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}
pub fn sigmoid_ref(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Row-major strides of a shape (size-0/1 dims treated like PyTorch).
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i].max(1);
    }
    s
}

/// Values read from `storage` through a layout, in row-major order.
pub fn read_strided(storage: &[f64], shape: &[usize], stride: &[usize], offset: usize) -> Vec<f64> {
    strided_offsets(shape, stride, offset).into_iter().map(|o| storage[o]).collect()
}

/// Storage offsets of a layout's elements in row-major order.
pub fn strided_offsets(shape: &[usize], stride: &[usize], offset: usize) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(offset + idx.iter().zip(stride).map(|(i, s)| i * s).sum::<usize>());
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

// ------------------------------------------------------------- gradcheck

/// Options of [`gradcheck_with`].
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOpts {
    pub eps: f64,
    pub rtol: f64,
    pub atol: f64,
    /// Seed of the fixed random weights of the loss.
    pub seed: u64,
}

impl Default for GradcheckOpts {
    fn default() -> Self {
        GradcheckOpts { eps: 1e-6, rtol: 1e-5, atol: 1e-6, seed: 1234 }
    }
}

fn fresh_leaves(inputs: &[(Vec<f64>, Vec<usize>)], requires_grad: bool) -> Result<Vec<Tensor>> {
    inputs
        .iter()
        .map(|(v, s)| {
            let t = Tensor::from_vec(v.clone(), s, &CPU)?;
            if requires_grad {
                t.requires_grad_(true)
            } else {
                Ok(t)
            }
        })
        .collect()
}

/// `sum(f(inputs) * w)` evaluated under `no_grad`, from fresh copies of the values.
fn loss_no_grad(f: &dyn Fn(&[Tensor]) -> Result<Tensor>, inputs: &[(Vec<f64>, Vec<usize>)], w: &[f64]) -> Result<f64> {
    aot_runtime::no_grad(|| {
        let leaves = fresh_leaves(inputs, false)?;
        let out = f(&leaves)?;
        let o = out.to_vec::<f64>()?;
        assert_eq!(o.len(), w.len(), "output size changed between evaluations");
        Ok(o.iter().zip(w).map(|(a, b)| a * b).sum())
    })
}

/// Checks the gradients of `f` with respect to every input against central
/// finite differences, in f64. `inputs` are f64 tensors (only their values
/// and shapes are used: each is rebuilt as a fresh leaf that requires grad).
/// The loss is `(f(inputs) * w).sum()` with fixed random weights `w`.
/// Panics with a readable message on a mismatch; returns runtime errors.
#[track_caller]
pub fn gradcheck(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) -> Result<()> {
    gradcheck_with(f, inputs, GradcheckOpts::default())
}

#[track_caller]
pub fn gradcheck_with(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], opts: GradcheckOpts) -> Result<()> {
    let raw: Vec<(Vec<f64>, Vec<usize>)> = inputs.iter().map(|t| Ok((t.to_vec::<f64>()?, t.shape()))).collect::<Result<_>>()?;
    let leaves = fresh_leaves(&raw, true)?;
    let out = f(&leaves)?;
    assert_eq!(out.dtype(), DType::F64, "gradcheck expects an f64 output");
    assert!(out.requires_grad(), "output of f does not require grad");
    let out_vals = out.to_vec::<f64>()?;
    let w_vals = rand_vals(opts.seed, out.numel(), -1.0, 1.0);
    let w = Tensor::from_vec(w_vals.clone(), &out.shape(), &CPU)?;
    let loss = out.mul(&w)?.sum()?;
    loss.backward()?;
    for l in &leaves {
        assert!(l.is_leaf(), "an input stopped being a leaf");
    }
    // The forward in grad mode and under no_grad agree.
    let f_dyn: &dyn Fn(&[Tensor]) -> Result<Tensor> = &f;
    let ng = aot_runtime::no_grad(|| -> Result<Vec<f64>> { f(&fresh_leaves(&raw, false)?)?.to_vec::<f64>() })?;
    assert_close(&ng, &out_vals, 1e-12);

    for (i, leaf) in leaves.iter().enumerate() {
        let analytic = match leaf.grad() {
            Some(g) => {
                assert_eq!(g.shape(), leaf.shape(), "grad of input {i} has the wrong shape");
                assert_eq!(g.dtype(), DType::F64, "grad of input {i} has the wrong dtype");
                g.to_vec::<f64>()?
            }
            None => vec![0.0; leaf.numel()],
        };
        let numeric: Vec<f64> = (0..raw[i].0.len())
            .map(|j| {
                let mut plus = raw.clone();
                plus[i].0[j] += opts.eps;
                let mut minus = raw.clone();
                minus[i].0[j] -= opts.eps;
                let lp = loss_no_grad(f_dyn, &plus, &w_vals)?;
                let lm = loss_no_grad(f_dyn, &minus, &w_vals)?;
                Ok((lp - lm) / (2.0 * opts.eps))
            })
            .collect::<Result<_>>()?;
        for (j, (&a, &n)) in analytic.iter().zip(&numeric).enumerate() {
            assert!(
                (a - n).abs() <= opts.atol + opts.rtol * n.abs(),
                "gradcheck: input {i}, element {j}: analytic {a} vs numeric {n}\n analytic {analytic:?}\n numeric  {numeric:?}"
            );
        }
    }
    Ok(())
}
