//! The ops for models, part A: `log1p`/`expm1`, `clamp`,
//! `masked_fill`, `tril`/`triu`, `cumsum`, `flatten`/`view_as`,
//! `argmax`/`argmin`, `max_dim`/`min_dim` and the losses `cross_entropy`
//! and `nll_loss`.
//!
//! - Eager values against hand-computed ones, dtypes, shapes, aliasing and
//!   errors (each naming the op, never a panic).
//! - Gradients of compiled functions (f64) against central finite
//!   differences, and compiled against the eager reference
//!   (`run_eager`), values and gradients.
//! - Bad targets in a compiled call are an error naming the op.
//!
//! PyTorch's own values for these ops are in the oracle corpus
//! (`oracle/cases_ops_a.py`, run by `tests/oracle.rs`).

use aot_runtime::prelude::*;
use aot_runtime::Arg;

fn t64(values: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

fn ids(values: Vec<i64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

fn mask(values: Vec<bool>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

fn v64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan()), "{got:?} vs {want:?}");
    }
}

// ---------------------------------------------------------------------------
// Eager values

#[test]
fn log1p_and_expm1_are_accurate_near_zero() {
    let xs = vec![0.0, 1e-10, -1e-7, 0.5, -0.5, 3.0, -0.999];
    let x = t64(xs.clone(), &[7]);
    assert_close(&v64(&x.log1p().unwrap()), &xs.iter().map(|v| v.ln_1p()).collect::<Vec<_>>(), 1e-15);
    assert_close(&v64(&x.expm1().unwrap()), &xs.iter().map(|v| v.exp_m1()).collect::<Vec<_>>(), 1e-15);
    // f32 through the kernel: tiny inputs keep all their digits (1 + x would lose them).
    let x32 = Tensor::from_vec(vec![1e-10f32, -3e-9, -0.0, -1.0, -2.0, f32::INFINITY], &[6], &Device::Cpu).unwrap();
    let l = x32.log1p().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&l[..2], &[1e-10f32, -3e-9]);
    assert!(l[2] == 0.0 && l[2].is_sign_negative(), "log1p(-0) is -0: {l:?}");
    assert_eq!(l[3], f32::NEG_INFINITY);
    assert!(l[4].is_nan());
    assert_eq!(l[5], f32::INFINITY);
    let e = x32.expm1().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&e[..2], &[1e-10f32, -3e-9]);
    assert_eq!(e[3], (-1.0f64).exp_m1() as f32);
    // integers promote to f32, as PyTorch
    assert_eq!(ids(vec![0, 1], &[2]).log1p().unwrap().dtype(), DType::F32);
}

#[test]
fn clamp_is_out_of_place() {
    let x = t64(vec![-2.0, -0.2, 0.4, 3.0], &[4]);
    let y = x.clamp(-1.0, 1.0).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![-1.0, -0.2, 0.4, 1.0]);
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![-2.0, -0.2, 0.4, 3.0]);
    assert!(!y.shares_storage_with(&x));
}

#[test]
fn masked_fill_fills_and_broadcasts() {
    let x = t64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let m = mask(vec![true, false, true], &[3]);
    let y = x.masked_fill(&m, -9.0).unwrap();
    assert_eq!(y.shape(), vec![2, 3]);
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![-9.0, 2.0, -9.0, -9.0, 5.0, -9.0]);
    // The input broadcasts to the mask's shape.
    let row = t64(vec![1.0, 2.0], &[1, 2]);
    let y = row.masked_fill(&mask(vec![false, true, true, false], &[2, 2]), 0.5).unwrap();
    assert_eq!((y.shape(), y.to_vec::<f64>().unwrap()), (vec![2, 2], vec![1.0, 0.5, 0.5, 2.0]));
    // Integers stay integers.
    let i = ids(vec![1, 2, 3], &[3]).masked_fill(&m, 7.0).unwrap();
    assert_eq!((i.dtype(), i.to_vec::<i64>().unwrap()), (DType::I64, vec![7, 2, 7]));
    let err = x.masked_fill(&ids(vec![1, 0, 1], &[3]), 0.0).unwrap_err();
    assert!(matches!(err, AotError::DTypeMismatch { op: "masked_fill", .. }), "{err}");
    let err = x.masked_fill(&mask(vec![true, false], &[2]), 0.0).unwrap_err();
    assert!(err.to_string().contains("shape"), "{err}");
}

#[test]
fn tril_and_triu_keep_their_triangles() {
    let x = t64((1..=12).map(f64::from).collect(), &[3, 4]);
    let lower = x.tril(0).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(lower, vec![1.0, 0.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 9.0, 10.0, 11.0, 0.0]);
    let upper = x.triu(1).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(upper, vec![0.0, 2.0, 3.0, 4.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0, 0.0, 12.0]);
    let below = x.tril(-1).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(below, vec![0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 9.0, 10.0, 0.0, 0.0]);
    // Batched: the last two dims.
    let b = t64((1..=8).map(f64::from).collect(), &[2, 2, 2]).triu(0).unwrap();
    assert_eq!(b.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 0.0, 4.0, 5.0, 6.0, 0.0, 8.0]);
    let err = t64(vec![1.0, 2.0], &[2]).tril(0).unwrap_err();
    assert!(matches!(err, AotError::ShapeMismatch { op: "tril", .. }), "{err}");
}

#[test]
fn cumsum_sums_along_the_dim() {
    let x = t64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(x.cumsum(1).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
    assert_eq!(x.cumsum(-2).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
    // Integers and bools sum into i64, exactly.
    let big = ids(vec![i64::MAX - 1, 1, -5], &[3]).cumsum(0).unwrap();
    assert_eq!((big.dtype(), big.to_vec::<i64>().unwrap()), (DType::I64, vec![i64::MAX - 1, i64::MAX, i64::MAX - 5]));
    let b = mask(vec![true, false, true], &[3]).cumsum(0).unwrap();
    assert_eq!((b.dtype(), b.to_vec::<i64>().unwrap()), (DType::I64, vec![1, 1, 2]));
    // A 0-d tensor is its own cumsum.
    assert_eq!(t64(vec![2.5], &[]).cumsum(0).unwrap().to_vec::<f64>().unwrap(), vec![2.5]);
    let err = x.cumsum(2).unwrap_err();
    assert!(matches!(err, AotError::DimOutOfRange { op: "cumsum", dim: 2, .. }), "{err}");
}

#[test]
fn argmax_argmin_take_the_first_extreme() {
    let x = t64(vec![1.0, 3.0, 3.0, -2.0, 0.5, 0.5, -1.0, -1.0], &[2, 4]);
    assert_eq!(x.argmax(1, false).unwrap().to_vec::<i64>().unwrap(), vec![1, 0]);
    assert_eq!(x.argmin(-1, false).unwrap().to_vec::<i64>().unwrap(), vec![3, 2]);
    let k = x.argmax(0, true).unwrap();
    assert_eq!((k.dtype(), k.shape(), k.to_vec::<i64>().unwrap()), (DType::I64, vec![1, 4], vec![0, 0, 0, 1]));
    // NaN counts as the extreme, as PyTorch.
    let n = t64(vec![1.0, f64::NAN, 5.0], &[3]);
    assert_eq!(n.argmax(0, false).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    assert_eq!(n.argmin(0, false).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    assert_eq!(ids(vec![4, 9, 9], &[3]).argmax(0, false).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    let err = Tensor::zeros(&[2, 0], DType::F32, &Device::Cpu).unwrap().argmax(1, false).unwrap_err();
    assert!(matches!(err, AotError::ShapeMismatch { op: "argmax", .. }), "{err}");
    let err = x.argmin(-3, false).unwrap_err();
    assert!(matches!(err, AotError::DimOutOfRange { op: "argmin", .. }), "{err}");
}

#[test]
fn max_dim_and_min_dim_give_values_and_indices() {
    let x = t64(vec![1.0, 3.0, 3.0, -2.0, 0.5, 0.5, -1.0, -1.0], &[2, 4]);
    let (v, i) = x.max_dim(1, false).unwrap();
    assert_eq!((v.to_vec::<f64>().unwrap(), i.to_vec::<i64>().unwrap()), (vec![3.0, 0.5], vec![1, 0]));
    let (v, i) = x.min_dim(0, true).unwrap();
    assert_eq!(v.shape(), vec![1, 4]);
    assert_eq!((v.to_vec::<f64>().unwrap(), i.to_vec::<i64>().unwrap()), (vec![0.5, 0.5, -1.0, -2.0], vec![1, 1, 1, 0]));
    let (v, _) = ids(vec![3, -4], &[2]).min_dim(0, false).unwrap();
    assert_eq!((v.dtype(), v.to_vec::<i64>().unwrap()), (DType::I64, vec![-4]));
    // The gradient goes to the first maximum only.
    let x = x.requires_grad_(true).unwrap();
    let (v, _) = x.max_dim(1, false).unwrap();
    assert_eq!(v.grad_fn_name(), Some("MaxBackward0"));
    v.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn losses_match_hand_computed_values() {
    let ln2 = std::f64::consts::LN_2;
    // Two equal logits: -log(1/2) whatever the target.
    let x = t64(vec![0.0, 0.0, 0.0, ln2], &[2, 2]);
    // row 2: softmax = [1/3, 2/3]; target 1 gives -log(2/3)
    let ce = x.cross_entropy(&ids(vec![0, 1], &[2])).unwrap();
    assert_eq!(ce.shape(), Vec::<usize>::new());
    assert_close(&v64(&ce), &[(ln2 - (2.0f64 / 3.0).ln()) / 2.0], 1e-15);
    let lp = t64(vec![-0.5, -1.0, -2.0, -0.25], &[2, 2]);
    assert_close(&v64(&lp.nll_loss(&ids(vec![1, 0], &[2])).unwrap()), &[1.5], 1e-15);
    // -100 is ignored, and the mean is over the targets that count.
    assert_close(&v64(&lp.nll_loss(&ids(vec![-100, 1], &[2])).unwrap()), &[0.25], 1e-15);
    // One sample: input [C], 0-d target.
    assert_close(&v64(&t64(vec![-0.5, -1.0], &[2]).nll_loss(&ids(vec![1], &[])).unwrap()), &[1.0], 1e-15);
    // Gradient of cross_entropy: (softmax - onehot) / N.
    let x = x.requires_grad_(true).unwrap();
    x.cross_entropy(&ids(vec![0, 1], &[2])).unwrap().backward().unwrap();
    let third = 1.0 / 3.0;
    assert_close(&v64(&x.grad().unwrap()), &[-0.25, 0.25, third / 2.0, (2.0 * third - 1.0) / 2.0], 1e-12);
}

#[test]
fn loss_errors_name_the_op() {
    let x = t64(vec![0.0; 6], &[2, 3]);
    let err = x.cross_entropy(&ids(vec![0, 3], &[2])).unwrap_err();
    assert!(matches!(err, AotError::IndexOutOfRange { op: "cross_entropy", index: 3, size: 3, .. }), "{err}");
    let err = x.nll_loss(&ids(vec![-1, 0], &[2])).unwrap_err();
    assert!(matches!(err, AotError::IndexOutOfRange { op: "nll_loss", index: -1, .. }), "{err}");
    let err = x.nll_loss(&t64(vec![0.0, 1.0], &[2])).unwrap_err();
    assert!(matches!(err, AotError::DTypeMismatch { op: "nll_loss", .. }), "{err}");
    let err = x.cross_entropy(&ids(vec![0, 1, 2], &[3])).unwrap_err();
    assert!(matches!(err, AotError::ShapeMismatch { op: "cross_entropy", .. }), "{err}");
    let err = t64(vec![0.0; 8], &[2, 2, 2]).cross_entropy(&ids(vec![0, 1], &[2])).unwrap_err();
    assert!(matches!(err, AotError::ShapeMismatch { op: "cross_entropy", .. }), "{err}");
}

#[test]
fn flatten_and_view_as_are_views_when_they_can_be() {
    let x = t64((0..24).map(f64::from).collect(), &[2, 3, 4]);
    let f = x.flatten(1, 2).unwrap();
    assert_eq!(f.shape(), vec![2, 12]);
    assert!(f.shares_storage_with(&x));
    assert_eq!(x.flatten(0, -1).unwrap().shape(), vec![24]);
    assert_eq!(x.flatten(-2, -1).unwrap().shape(), vec![2, 12]);
    assert_eq!(t64(vec![5.0], &[]).flatten(0, -1).unwrap().shape(), vec![1]);
    // A transposed input cannot be viewed flat: a copy, as reshape.
    let t = x.transpose(0, 2).unwrap().flatten(0, 1).unwrap();
    assert!(!t.shares_storage_with(&x));
    assert_eq!(t.to_vec::<f64>().unwrap()[..4], [0.0, 12.0, 4.0, 16.0]);
    let err = x.flatten(2, 1).unwrap_err();
    assert!(matches!(err, AotError::Unsupported { op: "flatten", .. }), "{err}");
    let v = x.view_as(&t64(vec![0.0; 24], &[4, 6])).unwrap();
    assert_eq!(v.shape(), vec![4, 6]);
    assert!(v.shares_storage_with(&x));
    assert!(x.view_as(&t64(vec![0.0; 5], &[5])).is_err());
}

// ---------------------------------------------------------------------------
// Compiled functions: gradients against finite differences and eager

#[aot_fn]
fn g_elementwise(x: &Tensor, y: &Tensor) -> Tensor {
    (x.expm1() * y).log1p() + x.clamp(-0.3, 0.4) * y
}

#[aot_fn]
fn g_masks(x: &Tensor, m: &Tensor) -> (Tensor, Tensor) {
    let s = x.masked_fill(m, -0.5).tril(0) + x.triu(1) * 2.0;
    (s.sin(), x.tril(-1).masked_fill(m, 3.0).exp())
}

#[aot_fn]
fn g_scans(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let (v, i) = x.max_dim(1, false);
    let (w, _j) = x.min_dim(0, true);
    (x.cumsum(1) * x, v * w.sum(), i)
}

#[aot_fn]
fn g_loss(x: &Tensor, w: &Tensor, t: &Tensor) -> Tensor {
    let logits = x.matmul(w);
    logits.cross_entropy(t) + logits.log_softmax(1).nll_loss(t) * 0.5
}

#[aot_fn]
fn g_views(x: &Tensor, like: &Tensor) -> (Tensor, Tensor) {
    (x.flatten(0, 1).square(), x.view_as(like).cumsum(0))
}

/// Deterministic values in (-1, 1), distinct (no ties for max_dim).
fn leaf(seed: u64, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    t64((0..n).map(|i| ((i as f64 + 1.0) * 0.618_034 + seed as f64 * 0.37).sin() * 0.9).collect(), shape)
}

/// `sum_k sum(out_k * w_k)` with fixed weights, over the outputs that are floats.
fn weighted(outs: &[Tensor]) -> Result<Tensor> {
    let mut total = Tensor::zeros(&[], DType::F64, &Device::Cpu)?;
    for (k, o) in outs.iter().enumerate().filter(|(_, o)| o.dtype() == DType::F64) {
        let w: Vec<f64> = (0..o.numel()).map(|i| ((i * 7 + k * 3) as f64 * 0.41).cos()).collect();
        total = total.add(&o.mul(&t64(w, &o.shape()))?.sum()?)?;
    }
    Ok(total)
}

/// Checks the gradients of `f` (`fixed` are integer or bool arguments
/// after the float leaves) against central differences and `run_eager`.
#[track_caller]
fn gradcheck(
    name: &str,
    leaves: &[Tensor],
    fixed: &[Tensor],
    f: &dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    eager: &dyn Fn(&[Arg]) -> Result<Vec<Tensor>>,
) {
    let req: Vec<Tensor> = leaves.iter().map(|l| l.copy().unwrap().requires_grad_(true).unwrap()).collect();
    let mut all = req.clone();
    all.extend(fixed.iter().cloned());
    let outs = f(&all).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(outs.iter().any(|o| o.grad_fn_name() == Some("CompiledFunctionBackward")), "{name}: not compiled");
    weighted(&outs).unwrap().backward().unwrap();
    let grads: Vec<Vec<f64>> = req.iter().map(|l| v64(&l.grad().expect("a gradient"))).collect();
    // The eager reference: same values and gradients.
    let ereq: Vec<Tensor> = leaves.iter().map(|l| l.copy().unwrap().requires_grad_(true).unwrap()).collect();
    let mut eall = ereq.clone();
    eall.extend(fixed.iter().cloned());
    let eouts = eager(&eall.iter().map(Arg::from).collect::<Vec<_>>()).unwrap();
    for (o, e) in outs.iter().zip(&eouts) {
        assert_eq!((o.shape(), o.dtype()), (e.shape(), e.dtype()), "{name}");
        assert_close(&v64(o), &v64(e), 1e-12);
    }
    weighted(&eouts).unwrap().backward().unwrap();
    for (g, l) in grads.iter().zip(&ereq) {
        assert_close(g, &v64(&l.grad().unwrap()), 1e-10);
    }
    // Central differences of the inference path.
    let loss = |ls: &[Tensor]| {
        let mut a = ls.to_vec();
        a.extend(fixed.iter().cloned());
        v64(&weighted(&f(&a).unwrap()).unwrap())[0]
    };
    for (li, l) in leaves.iter().enumerate() {
        let base = v64(l);
        for j in 0..base.len() {
            let at = |d: f64| {
                let mut ls = leaves.to_vec();
                let mut v = base.clone();
                v[j] += d;
                ls[li] = t64(v, &l.shape());
                loss(&ls)
            };
            let num = (at(1e-6) - at(-1e-6)) / 2e-6;
            let a = grads[li][j];
            assert!((a - num).abs() <= 1e-6 + 1e-5 * num.abs(), "{name}: leaf {li}[{j}]: analytic {a}, numeric {num}");
        }
    }
}

#[test]
fn gradients_of_elementwise_ops() {
    gradcheck("elementwise", &[leaf(1, &[2, 3]), leaf(2, &[3]).abs().unwrap()], &[], &|a| Ok(vec![g_elementwise(&a[0], &a[1])?]), &|a| {
        g_elementwise::compiled().run_eager(a)
    });
}

#[test]
fn gradients_of_masks_and_triangles() {
    let m = mask(vec![true, false, false, true, false, true, false, false, true, true, false, false], &[3, 4]);
    gradcheck("masks", &[leaf(3, &[3, 4])], &[m], &|a| g_masks(&a[0], &a[1]).map(|(p, q)| vec![p, q]), &|a| {
        g_masks::compiled().run_eager(a)
    });
}

#[test]
fn gradients_of_scans_and_extremes() {
    gradcheck("scans", &[leaf(4, &[3, 4])], &[], &|a| g_scans(&a[0]).map(|(p, q, r)| vec![p, q, r]), &|a| g_scans::compiled().run_eager(a));
}

#[test]
fn gradients_of_losses() {
    let t = ids(vec![2, 0, 1, 2], &[4]);
    gradcheck("losses", &[leaf(5, &[4, 3]), leaf(6, &[3, 3])], &[t], &|a| Ok(vec![g_loss(&a[0], &a[1], &a[2])?]), &|a| {
        g_loss::compiled().run_eager(a)
    });
}

#[test]
fn gradients_of_views() {
    let like = t64(vec![0.0; 6], &[3, 2]);
    gradcheck("views", &[leaf(7, &[2, 3])], &[like], &|a| g_views(&a[0], &a[1]).map(|(p, q)| vec![p, q]), &|a| {
        g_views::compiled().run_eager(a)
    });
}

#[test]
fn max_dim_gives_indices_in_the_dsl() {
    let x = t64(vec![0.0, 2.0, 2.0, 1.0, -1.0, -3.0], &[2, 3]);
    let (_, _, i) = g_scans(&x).unwrap();
    assert_eq!((i.dtype(), i.to_vec::<i64>().unwrap()), (DType::I64, vec![1, 0]));
}

#[test]
fn compiled_bad_targets_are_errors_naming_the_op() {
    let (x, w) = (leaf(5, &[4, 3]), leaf(6, &[3, 3]));
    let bad = ids(vec![2, 0, 3, 2], &[4]);
    let err = g_loss(&x, &w, &bad).unwrap_err();
    assert!(err.to_string().contains("cross_entropy") && err.to_string().contains("3"), "{err}");
    let xr = x.requires_grad_(true).unwrap();
    let err = g_loss(&xr, &w, &bad).unwrap_err();
    assert!(err.to_string().contains("cross_entropy"), "{err}");
    let err = g_loss(&x, &w, &t64(vec![0.0; 4], &[4])).unwrap_err();
    assert!(err.to_string().contains("i64"), "{err}");
}

#[aot_fn]
fn fused_log1p(x: &Tensor) -> Tensor {
    (x * 2.0).log1p().expm1() + 1.0
}

/// `log1p`/`expm1` are kernel-stage ops: the chain is one generated kernel.
#[test]
fn log1p_and_expm1_fuse_into_one_kernel() {
    let x = Tensor::from_vec(vec![0.1f32, -0.2, 1e-9, 0.7], &[4], &Device::Cpu).unwrap();
    let ks = fused_log1p::compiled().kernels(&[Arg::from(&x)]).unwrap();
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(ks[0].source.contains("log1p") && ks[0].source.contains("expm1"), "{}", ks[0].source);
    let y = fused_log1p(&x).unwrap().to_vec::<f32>().unwrap();
    let want = x.mul(2.0).unwrap().log1p().unwrap().expm1().unwrap().add(1.0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y, want, "the kernel computes what eager does, bit for bit");
}

/// `cumsum`, the extremes and the loss run outside the kernel stage, and
/// both listings name them where the call runs them, between the stage's
/// kernels: `kernels()` on the CPU by the native routine (there is no
/// generated source, as for matmul), `kernels_for` on CUDA by the kernels
/// the backend launches.
#[test]
fn the_scan_and_loss_kernels_are_listed_on_both_devices() {
    let (x, w) = (leaf(5, &[4, 3]).requires_grad_(true).unwrap(), leaf(6, &[3, 3]));
    let t = ids(vec![2, 0, 1, 2], &[4]);
    let args = [Arg::from(&x), Arg::from(&w), Arg::from(&t)];
    let cpu: Vec<String> = g_loss::compiled().kernels(&args).unwrap().into_iter().map(|k| k.name).collect();
    let at = |name: &str| cpu.iter().position(|n| n == name).unwrap_or_else(|| panic!("{name} is not listed: {cpu:?}"));
    assert!(at("cpu_nll_loss") < at("cpu_nll_loss_backward"), "{cpu:?}");
    let cuda = g_loss::compiled().kernels_for(&args, &Device::Cuda(0));
    if !cfg!(feature = "cuda") {
        assert!(matches!(cuda, Err(AotError::DeviceUnavailable { .. })), "{cuda:?}");
        return;
    }
    let cuda: Vec<String> = cuda.unwrap().into_iter().map(|k| k.name).collect();
    let at = |name: &str| cuda.iter().position(|n| n == name).unwrap_or_else(|| panic!("{name} is not listed: {cuda:?}"));
    // The forward's losses, then the backward's gradients.
    let (fw, bw) = (at("aot_nll_loss_float64"), at("aot_nll_loss_backward_float64_float64"));
    assert!(fw < bw, "{cuda:?}");
    let sx = [Arg::from(&x)];
    let scans: Vec<String> = g_scans::compiled().kernels_for(&sx, &Device::Cuda(0)).unwrap().into_iter().map(|k| k.name).collect();
    for want in ["aot_max_dim_float64", "aot_min_dim_float64", "aot_cumsum_float64"] {
        assert!(scans.iter().any(|n| n == want), "{want} is not listed: {scans:?}");
    }
}

/// The CUDA C of the fused chain calls the f32 helpers rendered from the
/// one definition; on a device (or `AOT_CUDA_SIM=1`) the kernel gives the
/// CPU's bits, and the scan and loss kernels (`cuda/scan.rs`) the CPU's
/// values.
#[cfg(feature = "cuda")]
#[test]
fn ops_for_models_on_cuda() {
    let x = Tensor::from_vec(vec![0.1f32, -0.2, 1e-9, 0.7], &[4], &Device::Cpu).unwrap();
    let ks = fused_log1p::compiled().kernels_for(&[Arg::from(&x)], &Device::Cuda(0)).unwrap();
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(ks[0].source.contains("aot_log1p(") && ks[0].source.contains("aot_expm1("), "{}", ks[0].source);
    if !aot_runtime::cuda::is_available() {
        return;
    }
    let gpu = Device::Cuda(0);
    let xc = x.to_device(&gpu).unwrap();
    assert_eq!(fused_log1p(&xc).unwrap().to_vec::<f32>().unwrap(), fused_log1p(&x).unwrap().to_vec::<f32>().unwrap());
    let (xs, ws) = (leaf(5, &[4, 3]), leaf(6, &[3, 3]));
    let t = ids(vec![2, 0, 1, 2], &[4]);
    let on = |v: &Tensor| v.to_device(&gpu).unwrap();
    let cpu = g_loss(&xs, &ws, &t).unwrap();
    let dev = g_loss(&on(&xs), &on(&ws), &on(&t)).unwrap();
    assert_eq!(dev.device(), gpu);
    assert_close(&v64(&dev), &v64(&cpu), 1e-12);
    let (a, b, c) = g_scans(&on(&xs)).unwrap();
    let (a0, b0, c0) = g_scans(&xs).unwrap();
    assert_close(&v64(&a), &v64(&a0), 1e-12);
    assert_close(&v64(&b), &v64(&b0), 1e-12);
    assert_eq!(c.to_vec::<i64>().unwrap(), c0.to_vec::<i64>().unwrap());
    let err = g_loss(&on(&xs), &on(&ws), &on(&ids(vec![0, 0, 0, 9], &[4]))).unwrap_err();
    assert!(err.to_string().contains("cross_entropy"), "{err}");
}

#[aot_fn]
fn write_through_flatten(a: &mut Tensor, like: &Tensor) -> Tensor {
    a.flatten(0, 1).mul_(2.0);
    a.flatten(0, -1).add_(1.0);
    a.view_as(like)
}

#[aot_fn]
fn write_through_view_as(a: &mut Tensor, like: &Tensor) {
    a.view_as(like).mul_(2.0);
}

/// Writes through `flatten` views reach the input, and a returned
/// `view_as` view aliases it. A write through a `view_as` view is a clean
/// error for now (its geometry comes from another tensor), never a panic.
#[test]
fn writes_through_flatten_and_view_as() {
    let a = t64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let like = t64(vec![0.0; 6], &[3, 2]);
    let mut arg = a.clone();
    let out = write_through_flatten(&mut arg, &like).unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![3.0, 5.0, 7.0, 9.0, 11.0, 13.0]);
    assert_eq!(out.shape(), vec![3, 2]);
    assert!(out.shares_storage_with(&a));
    // With autograd: the gradient flows through both writes.
    let leaf = t64(vec![1.0; 6], &[2, 3]).requires_grad_(true).unwrap();
    let mut x = leaf.copy().unwrap();
    let out = write_through_flatten(&mut x, &like).unwrap();
    out.sum().unwrap().backward().unwrap();
    assert_eq!(leaf.grad().unwrap().to_vec::<f64>().unwrap(), vec![2.0; 6]);
    let mut arg = a.copy().unwrap();
    let err = write_through_view_as(&mut arg, &like).unwrap_err();
    assert!(err.to_string().contains("view_as"), "{err}");
    assert_eq!(arg.to_vec::<f64>().unwrap(), a.to_vec::<f64>().unwrap(), "nothing written on failure");
}

#[aot_fn]
fn weighted_cumsum(x: &Tensor, w: &Tensor) -> Tensor {
    (x.cumsum(0) * w).sum()
}

/// cumsum's gradient is the cumulative sum from the end, summed exactly so
/// (not `sum - cumsum + g`, which loses the small tail next to a large head).
#[test]
fn cumsum_gradient_sums_from_the_end() {
    let w = Tensor::from_vec(vec![1e8f32, 1.0, 1.0], &[3], &Device::Cpu).unwrap();
    let want = vec![1e8f32 + 2.0, 2.0, 1.0];
    let x = Tensor::zeros(&[3], DType::F32, &Device::Cpu).unwrap().requires_grad_(true).unwrap();
    x.cumsum(0).unwrap().mul(&w).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), want, "eager");
    let x = Tensor::zeros(&[3], DType::F32, &Device::Cpu).unwrap().requires_grad_(true).unwrap();
    weighted_cumsum(&x, &w).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), want, "compiled");
}
