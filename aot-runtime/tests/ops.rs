//! Unit tests of every eager op of the contract: values in every float
//! dtype, broadcasting, type promotion, shapes and strides of views, and the
//! error cases (an `Err` whose message names the op; never a panic).

mod common;

use aot_runtime::prelude::*;
use common::*;
use half::{bf16, f16};
use std::sync::Mutex;

/// Serialises the tests that use the global generator (`manual_seed`,
/// `rand_like`, `dropout`), since tests of one binary run in parallel.
static GLOBAL_RNG: Mutex<()> = Mutex::new(());

fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner())
}

// ------------------------------------------------------------ construction

#[test]
fn construction_and_accessors() -> Result<()> {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &CPU)?;
    assert_eq!(a.shape(), vec![2, 3]);
    assert_eq!(a.stride(), vec![3, 1]);
    assert_eq!(a.storage_offset(), 0);
    assert_eq!(a.dtype(), DType::F32);
    assert_eq!(a.device(), Device::Cpu);
    assert_eq!(a.numel(), 6);
    assert!(a.is_contiguous());
    assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(a.to_vec::<i64>()?, vec![1, 2, 3, 4, 5, 6]);

    let h = Tensor::from_vec(vec![f16::from_f32(1.5), f16::from_f32(-2.0)], &[2], &CPU)?;
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(h.to_vec::<f64>()?, vec![1.5, -2.0]);
    let b = Tensor::from_vec(vec![bf16::from_f32(0.5)], &[], &CPU)?;
    assert_eq!(b.dtype(), DType::BF16);
    assert_eq!(b.shape(), Vec::<usize>::new());
    assert_eq!(b.item::<f64>()?, 0.5);
    let i = Tensor::from_vec(vec![3i64, -4], &[2, 1], &CPU)?;
    assert_eq!(i.dtype(), DType::I64);
    let bo = Tensor::from_vec(vec![true, false], &[2], &CPU)?;
    assert_eq!(bo.dtype(), DType::Bool);
    assert_eq!(bo.to_vec::<f64>()?, vec![1.0, 0.0]);

    for dt in DType::ALL {
        let z = Tensor::zeros(&[2, 2], dt, &CPU)?;
        assert_eq!(z.dtype(), dt);
        assert_eq!(vals(&z), vec![0.0; 4]);
        let o = Tensor::ones(&[3], dt, &CPU)?;
        assert_eq!(vals(&o), vec![1.0; 3]);
        let f = Tensor::full(&[2], 1.0, dt, &CPU)?;
        assert_eq!(vals(&f), vec![1.0; 2]);
    }
    assert_eq!(vals(&Tensor::full(&[2], 2.5, DType::F16, &CPU)?), vec![2.5, 2.5]);
    assert_eq!(vals(&Tensor::full(&[1], 2.7, DType::I64, &CPU)?), vec![2.0]);

    let r = Tensor::arange(0.0, 5.0, 1.0, DType::I64, &CPU)?;
    assert_eq!(r.to_vec::<i64>()?, vec![0, 1, 2, 3, 4]);
    let r = Tensor::arange(1.0, 2.0, 0.25, DType::F32, &CPU)?;
    assert_eq!(r.to_vec::<f32>()?, vec![1.0, 1.25, 1.5, 1.75]);
    let r = Tensor::arange(5.0, 0.0, -2.0, DType::F64, &CPU)?;
    assert_eq!(vals(&r), vec![5.0, 3.0, 1.0]);
    // i64 truncates start and step first, as PyTorch's integer arange (the
    // count stays f64's: ceil(13.5 / 2.9) = 5)
    let r = Tensor::arange(-3.5, 10.0, 2.9, DType::I64, &CPU)?;
    assert_eq!(r.to_vec::<i64>()?, vec![-3, -1, 1, 3, 5]);
    assert_eq!(Tensor::arange(0.0, 1.0, 0.3, DType::I64, &CPU)?.to_vec::<i64>()?, vec![0; 4]);
    assert_eq!(Tensor::arange(1e19, 1e19 + 4096.0, 2048.0, DType::F64, &CPU)?.numel(), 2);
    Ok(())
}

#[test]
fn construction_errors() {
    assert_op_err(Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[2, 2], &CPU), "from_vec");
    assert_op_err(Tensor::arange(0.0, 1.0, 0.0, DType::F32, &CPU), "arange");
    assert_op_err(Tensor::arange(0.0, 5.0, -1.0, DType::F32, &CPU), "arange");
    // PyTorch has no bool arange; an i64 range must hold its values
    assert_op_err(Tensor::arange(0.0, 2.0, 1.0, DType::Bool, &CPU), "arange");
    assert_op_err(Tensor::arange(1e19, 1e19 + 4096.0, 2048.0, DType::I64, &CPU), "arange");
    assert_op_err(Tensor::randn(&[2], DType::I64, &CPU, 0), "randn");
    assert_op_err(Tensor::from_vec(vec![1.0f32], &[1], &Device::Cuda(0)), "from_vec");
    assert_op_err(Tensor::zeros(&[1], DType::F32, &Device::Cuda(0)), "full");
    assert_op_err(Tensor::randn(&[2], DType::F32, &Device::Cuda(0), 0), "randn");
    let x = Tensor::zeros(&[2, 2], DType::F32, &CPU).unwrap();
    assert_op_err(x.item::<f32>(), "item");
    assert_op_err(x.to_device(&Device::Cuda(0)), "to_device");
    assert!(x.to_device(&Device::Cpu).unwrap().same_tensor(&x));
}

#[test]
fn randn_is_deterministic_per_seed() -> Result<()> {
    for dt in DType::FLOATS {
        let a = Tensor::randn(&[64], dt, &CPU, 7)?;
        let b = Tensor::randn(&[64], dt, &CPU, 7)?;
        let c = Tensor::randn(&[64], dt, &CPU, 8)?;
        assert_eq!(a.dtype(), dt);
        assert_eq!(vals(&a), vals(&b), "same seed, same values ({dt})");
        assert_ne!(vals(&a), vals(&c), "different seeds, different values ({dt})");
    }
    // Roughly standard normal.
    let x = vals(&Tensor::randn(&[20000], DType::F64, &CPU, 3)?);
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    assert!(mean.abs() < 0.05, "mean {mean}");
    assert!((var - 1.0).abs() < 0.05, "var {var}");
    // rand is uniform in [0, 1).
    let u = vals(&Tensor::rand(&[1000], DType::F32, &CPU, 1)?);
    assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
    Ok(())
}

// ------------------------------------------------------------ binary ops

type RefFn = fn(f64, f64) -> f64;

const BINARY: [(&str, RefFn); 7] = [
    ("add", |a, b| a + b),
    ("sub", |a, b| a - b),
    ("mul", |a, b| a * b),
    ("div", |a, b| a / b),
    ("pow", |a, b| a.powf(b)),
    ("maximum", |a, b| a.max(b)),
    ("minimum", |a, b| a.min(b)),
];

fn call_binary<'a>(name: &str, a: &Tensor, b: impl Into<aot_runtime::Operand<'a>>) -> Result<Tensor> {
    match name {
        "add" => a.add(b),
        "sub" => a.sub(b),
        "mul" => a.mul(b),
        "div" => a.div(b),
        "pow" => a.pow(b),
        "maximum" => a.maximum(b),
        "minimum" => a.minimum(b),
        "eq" => a.eq(b),
        "ne" => a.ne(b),
        "lt" => a.lt(b),
        "le" => a.le(b),
        "gt" => a.gt(b),
        "ge" => a.ge(b),
        _ => unreachable!(),
    }
}

/// Rounds f64 values to what `dtype` can hold.
fn rounded(v: &[f64], dtype: DType) -> Vec<f64> {
    vals(&tdt(v, &[v.len()], dtype))
}

#[test]
fn binary_tensor_tensor_all_float_dtypes() -> Result<()> {
    let av = [0.5, 1.25, 2.0, 3.5, 0.75, 1.5];
    let bv = [1.5, 0.5, 2.0, 0.25, 3.0, 1.0];
    for dt in DType::FLOATS {
        let a = tdt(&av, &[2, 3], dt);
        let b = tdt(&bv, &[2, 3], dt);
        let (ar, br) = (rounded(&av, dt), rounded(&bv, dt));
        for (name, f) in BINARY {
            let out = call_binary(name, &a, &b)?;
            assert_eq!(out.dtype(), dt, "{name} {dt}");
            assert_eq!(out.shape(), vec![2, 3]);
            let expected: Vec<f64> = ar.iter().zip(&br).map(|(&x, &y)| f(x, y)).collect();
            assert_close(&vals(&out), &expected, tol(dt));
        }
    }
    Ok(())
}

#[test]
fn binary_tensor_scalar_all_float_dtypes() -> Result<()> {
    let av = [0.5, 1.25, 2.0, 3.5];
    for dt in DType::FLOATS {
        let a = tdt(&av, &[4], dt);
        let ar = rounded(&av, dt);
        for (name, f) in BINARY {
            let out = call_binary(name, &a, 1.5f64)?;
            assert_eq!(out.dtype(), dt, "{name} with f64 scalar keeps {dt}");
            assert_close(&vals(&out), &ar.iter().map(|&x| f(x, 1.5)).collect::<Vec<_>>(), tol(dt));
            let out = call_binary(name, &a, 2i64)?;
            assert_eq!(out.dtype(), dt, "{name} with int scalar keeps {dt}");
            assert_close(&vals(&out), &ar.iter().map(|&x| f(x, 2.0)).collect::<Vec<_>>(), tol(dt));
            let out = call_binary(name, &a, 0.5f32)?;
            assert_eq!(out.dtype(), dt);
            assert_close(&vals(&out), &ar.iter().map(|&x| f(x, 0.5)).collect::<Vec<_>>(), tol(dt));
        }
        // Reversed-operand forms.
        assert_close(&vals(&a.rsub(1.0)?), &ar.iter().map(|x| 1.0 - x).collect::<Vec<_>>(), tol(dt));
        assert_close(&vals(&a.rdiv(1.0)?), &ar.iter().map(|x| 1.0 / x).collect::<Vec<_>>(), tol(dt));
        assert_close(&vals(&a.rpow(2.0)?), &ar.iter().map(|x| 2f64.powf(*x)).collect::<Vec<_>>(), tol(dt));
    }
    Ok(())
}

#[test]
fn binary_broadcasting() -> Result<()> {
    let a = iota(&[2, 1, 3]);
    let b = t64(&[10.0, 20.0, 30.0, 40.0], &[4, 1]);
    let c = a.add(&b)?;
    assert_eq!(c.shape(), vec![2, 4, 3]);
    let mut exp = vec![];
    for i in 0..2 {
        for j in 0..4 {
            for k in 0..3 {
                exp.push((i * 3 + k) as f64 + 10.0 * (j + 1) as f64);
            }
        }
    }
    assert_close(&vals(&c), &exp, 0.0);
    // Broadcasting with a 0-dim tensor and with size-1 dims both ways.
    let s = t64(&[2.0], &[]);
    assert_tensor(&a.mul(&s)?, &[2, 1, 3], &[0.0, 2.0, 4.0, 6.0, 8.0, 10.0], 0.0);
    assert_tensor(&s.mul(&a)?, &[2, 1, 3], &[0.0, 2.0, 4.0, 6.0, 8.0, 10.0], 0.0);
    let r = t64(&[1.0, 2.0, 3.0], &[3]);
    let col = t64(&[1.0, 2.0], &[2, 1]);
    assert_tensor(&col.sub(&r)?, &[2, 3], &[0.0, -1.0, -2.0, 1.0, 0.0, -1.0], 0.0);
    // Non-contiguous operands.
    let m = iota(&[3, 2]).t()?;
    assert_tensor(&m.add(&r.unsqueeze(0)?.t()?.expand(&[3, 2])?.t()?)?, &[2, 3], &[1.0, 4.0, 7.0, 2.0, 5.0, 8.0], 0.0);
    // Shape mismatch names the op.
    let e = assert_op_err(iota(&[2, 3]).add(&iota(&[4])), "add");
    assert!(matches!(e, AotError::ShapeMismatch { .. }), "{e:?}");
    assert_op_err(iota(&[2, 3]).mul(&iota(&[3, 2])), "mul");
    assert_op_err(iota(&[2, 3]).maximum(&iota(&[2])), "maximum");
    assert_op_err(iota(&[2, 3]).lt(&iota(&[2])), "lt");
    Ok(())
}

#[test]
fn type_promotion() -> Result<()> {
    let f16t = tdt(&[1.0, 2.0], &[2], DType::F16);
    let bf16t = tdt(&[1.0, 2.0], &[2], DType::BF16);
    let f32t = tdt(&[1.0, 2.0], &[2], DType::F32);
    let f64t = t64(&[1.0, 2.0], &[2]);
    let i64t = Tensor::from_vec(vec![1i64, 2], &[2], &CPU)?;
    let boolt = Tensor::from_vec(vec![true, false], &[2], &CPU)?;

    let cases: Vec<(&Tensor, &Tensor, DType)> = vec![
        (&f16t, &bf16t, DType::F32),
        (&bf16t, &f16t, DType::F32),
        (&f16t, &f32t, DType::F32),
        (&bf16t, &f64t, DType::F64),
        (&f32t, &f64t, DType::F64),
        (&i64t, &f16t, DType::F16),
        (&i64t, &bf16t, DType::BF16),
        (&boolt, &i64t, DType::I64),
        (&boolt, &f32t, DType::F32),
    ];
    for (a, b, want) in cases {
        let c = a.add(b)?;
        assert_eq!(c.dtype(), want, "{} + {}", a.dtype(), b.dtype());
        assert_eq!(vals(&c)[0], vals(a)[0] + vals(b)[0]);
        assert_eq!(a.mul(b)?.dtype(), want);
        assert_eq!(b.sub(a)?.dtype(), want);
    }
    // Python-number scalars: only a higher category promotes, to the default dtype.
    assert_eq!(i64t.add(2.5)?.dtype(), DType::F32);
    assert_close(&vals(&i64t.add(2.5)?), &[3.5, 4.5], 0.0);
    assert_eq!(i64t.mul(2.5f32)?.dtype(), DType::F32);
    assert_eq!(i64t.add(2i64)?.dtype(), DType::I64);
    assert_eq!(boolt.add(2i64)?.dtype(), DType::I64);
    assert_eq!(boolt.add(0.5)?.dtype(), DType::F32);
    assert_eq!(f16t.add(1e3)?.dtype(), DType::F16);
    assert_eq!(bf16t.mul(3i64)?.dtype(), DType::BF16);
    // Integer true division gives the default float dtype.
    let d = i64t.div(&Tensor::from_vec(vec![2i64, 4], &[2], &CPU)?)?;
    assert_eq!(d.dtype(), DType::F32);
    assert_close(&vals(&d), &[0.5, 0.5], 0.0);
    assert_eq!(i64t.div(2i64)?.dtype(), DType::F32);

    // 0-dim tensors: a dimensioned tensor wins within a category...
    let z64 = t64(&[2.0], &[]);
    assert_eq!(f32t.add(&z64)?.dtype(), DType::F32);
    assert_eq!(z64.add(&f16t)?.dtype(), DType::F16);
    assert_eq!(bf16t.mul(&z64)?.dtype(), DType::BF16);
    let zi = Tensor::from_vec(vec![3i64], &[], &CPU)?;
    assert_eq!(boolt.add(&zi)?.dtype(), DType::I64, "higher category 0-dim promotes");
    assert_eq!(f16t.add(&zi)?.dtype(), DType::F16);
    // ...a 0-dim of a higher category takes part with its own dtype...
    assert_eq!(i64t.add(&z64)?.dtype(), DType::F64);
    assert_eq!(i64t.add(&tdt(&[1.0], &[], DType::F16))?.dtype(), DType::F16);
    // ...and two 0-dim tensors promote normally.
    let z16 = tdt(&[1.0], &[], DType::F16);
    let zb16 = tdt(&[1.0], &[], DType::BF16);
    assert_eq!(z16.add(&zb16)?.dtype(), DType::F32);
    assert_eq!(z16.add(&z64)?.dtype(), DType::F64);
    assert_eq!(z16.add(&z64)?.shape(), Vec::<usize>::new());
    Ok(())
}

#[test]
fn integer_and_bool_arithmetic() -> Result<()> {
    let a = Tensor::from_vec(vec![3i64, -4, 5], &[3], &CPU)?;
    let b = Tensor::from_vec(vec![2i64, 2, -1], &[3], &CPU)?;
    assert_eq!(a.add(&b)?.to_vec::<i64>()?, vec![5, -2, 4]);
    assert_eq!(a.sub(&b)?.to_vec::<i64>()?, vec![1, -6, 6]);
    assert_eq!(a.mul(&b)?.to_vec::<i64>()?, vec![6, -8, -5]);
    assert_eq!(a.maximum(&b)?.to_vec::<i64>()?, vec![3, 2, 5]);
    assert_eq!(a.minimum(&b)?.to_vec::<i64>()?, vec![2, -4, -1]);
    let t = Tensor::from_vec(vec![true, true, false, false], &[4], &CPU)?;
    let f = Tensor::from_vec(vec![true, false, true, false], &[4], &CPU)?;
    assert_eq!(t.add(&f)?.dtype(), DType::Bool);
    assert_eq!(t.add(&f)?.to_vec::<bool>()?, vec![true, true, true, false]);
    assert_eq!(t.mul(&f)?.to_vec::<bool>()?, vec![true, false, false, false]);
    assert_op_err(t.sub(&f), "sub");
    Ok(())
}

/// PyTorch keeps integer `pow` integer: `torch.tensor([2, 3]) ** 2` is
/// `tensor([4, 9])` (int64); only a float exponent promotes.
#[test]
fn integer_pow_stays_integer() -> Result<()> {
    let a = Tensor::from_vec(vec![2i64, 3], &[2], &CPU)?;
    let p = a.pow(2i64)?;
    assert_eq!(p.dtype(), DType::I64, "int64 ** int gives int64 in PyTorch");
    assert_eq!(p.to_vec::<i64>()?, vec![4, 9]);
    let p = a.pow(&Tensor::from_vec(vec![3i64, 2], &[2], &CPU)?)?;
    assert_eq!(p.dtype(), DType::I64, "int64 ** int64 tensor gives int64 in PyTorch");
    assert_eq!(p.to_vec::<i64>()?, vec![8, 9]);
    let p = a.pow(0.5)?;
    assert_eq!(p.dtype(), DType::F32);
    Ok(())
}

#[test]
fn comparisons_give_bool() -> Result<()> {
    let av = [1.0, 2.0, 3.0, 4.0];
    let bv = [4.0, 2.0, 1.0, 4.0];
    type Cmp = fn(f64, f64) -> bool;
    let cmps: [(&str, Cmp); 6] = [
        ("eq", |a, b| a == b),
        ("ne", |a, b| a != b),
        ("lt", |a, b| a < b),
        ("le", |a, b| a <= b),
        ("gt", |a, b| a > b),
        ("ge", |a, b| a >= b),
    ];
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64] {
        let a = tdt(&av, &[2, 2], dt);
        let b = tdt(&bv, &[2, 2], dt);
        for (name, f) in cmps {
            let c = call_binary(name, &a, &b)?;
            assert_eq!(c.dtype(), DType::Bool, "{name} {dt}");
            assert_eq!(c.shape(), vec![2, 2]);
            let exp: Vec<bool> = av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).collect();
            assert_eq!(c.to_vec::<bool>()?, exp, "{name} {dt}");
            let c = call_binary(name, &a, 2.5)?;
            assert_eq!(c.dtype(), DType::Bool);
            let exp: Vec<bool> = av.iter().map(|&x| f(x, 2.5)).collect();
            assert_eq!(c.to_vec::<bool>()?, exp, "{name} {dt} vs 2.5");
        }
    }
    // Mixed dtypes and broadcasting.
    let a = tdt(&[1.0, 2.0, 3.0], &[3], DType::F16);
    let b = Tensor::from_vec(vec![2i64], &[1, 1], &CPU)?;
    let c = a.ge(&b)?;
    assert_eq!(c.shape(), vec![1, 3]);
    assert_eq!(c.to_vec::<bool>()?, vec![false, true, true]);
    // Comparisons do not require grad.
    let x = t64(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let c = x.gt(1.5)?;
    assert!(!c.requires_grad());
    assert!(c.is_leaf());
    Ok(())
}

#[test]
fn where_op() -> Result<()> {
    let cond = Tensor::from_vec(vec![true, false, false, true], &[2, 2], &CPU)?;
    for dt in DType::FLOATS {
        let a = tdt(&[1.0, 2.0, 3.0, 4.0], &[2, 2], dt);
        let b = tdt(&[-1.0, -2.0, -3.0, -4.0], &[2, 2], dt);
        let w = a.where_(&cond, &b)?;
        assert_eq!(w.dtype(), dt);
        assert_tensor(&w, &[2, 2], &[1.0, -2.0, -3.0, 4.0], 0.0);
        let w = a.where_(&cond, 0.5)?;
        assert_eq!(w.dtype(), dt);
        assert_tensor(&w, &[2, 2], &[1.0, 0.5, 0.5, 4.0], 0.0);
    }
    // Broadcast of condition, self and other.
    let c = Tensor::from_vec(vec![true, false], &[2, 1], &CPU)?;
    let a = iota(&[3]);
    let w = a.where_(&c, -1.0)?;
    assert_tensor(&w, &[2, 3], &[0.0, 1.0, 2.0, -1.0, -1.0, -1.0], 0.0);
    // Promotion between self and other.
    let a32 = tdt(&[1.0, 2.0], &[2], DType::F32);
    let b64 = t64(&[3.0, 4.0], &[2]);
    let c2 = Tensor::from_vec(vec![false, true], &[2], &CPU)?;
    let w = a32.where_(&c2, &b64)?;
    assert_eq!(w.dtype(), DType::F64);
    assert_close(&vals(&w), &[3.0, 2.0], 0.0);
    let i = Tensor::from_vec(vec![1i64, 2], &[2], &CPU)?;
    assert_eq!(i.where_(&c2, 0.5)?.dtype(), DType::F32);
    // Errors.
    assert_op_err(a32.where_(&a32, &b64), "where");
    assert_op_err(iota(&[3]).where_(&c2, 1.0), "where");
    assert_op_err(iota(&[2]).where_(&c2, &iota(&[3])), "where");
    Ok(())
}

// ------------------------------------------------------------ unary ops

#[test]
fn unary_ops_all_float_dtypes() -> Result<()> {
    type U = (&'static str, fn(&Tensor) -> Result<Tensor>, fn(f64) -> f64);
    let ops: [U; 15] = [
        ("neg", |t| t.neg(), |x| -x),
        ("exp", |t| t.exp(), f64::exp),
        ("log", |t| t.log(), f64::ln),
        ("sqrt", |t| t.sqrt(), f64::sqrt),
        ("rsqrt", |t| t.rsqrt(), |x| 1.0 / x.sqrt()),
        ("abs", |t| t.abs(), f64::abs),
        ("sin", |t| t.sin(), f64::sin),
        ("cos", |t| t.cos(), f64::cos),
        ("tanh", |t| t.tanh(), f64::tanh),
        ("sigmoid", |t| t.sigmoid(), sigmoid_ref),
        ("relu", |t| t.relu(), |x| x.max(0.0)),
        ("gelu", |t| t.gelu(), gelu_ref),
        ("silu", |t| t.silu(), |x| x * sigmoid_ref(x)),
        ("reciprocal", |t| t.reciprocal(), |x| 1.0 / x),
        ("square", |t| t.square(), |x| x * x),
    ];
    let pos = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0];
    let mixed = [-2.5, -1.0, -0.25, 0.0, 0.75, 2.0];
    for dt in DType::FLOATS {
        for (name, op, f) in ops {
            let domain: &[f64] = if matches!(name, "log" | "sqrt" | "rsqrt" | "reciprocal") { &pos } else { &mixed };
            let x = tdt(domain, &[2, 3], dt);
            let xr = rounded(domain, dt);
            let y = op(&x)?;
            assert_eq!(y.dtype(), dt, "{name} keeps {dt}");
            assert_eq!(y.shape(), vec![2, 3]);
            let exp: Vec<f64> = xr.iter().map(|&v| f(v)).collect();
            assert_close(&vals(&y), &exp, tol(dt) * 2.0);
            // Through a non-contiguous view.
            let xt = x.t()?;
            let yt = op(&xt)?;
            assert_eq!(yt.shape(), vec![3, 2]);
            let exp_t: Vec<f64> = (0..6).map(|k| exp[(k % 2) * 3 + k / 2]).collect();
            assert_close(&vals(&yt), &exp_t, tol(dt) * 2.0);
        }
    }
    // Special values.
    let x = t64(&[0.0, -1.0, f64::INFINITY], &[3]);
    assert_close(&vals(&x.log()?), &[f64::NEG_INFINITY, f64::NAN, f64::INFINITY], 0.0);
    assert_close(&vals(&x.relu()?), &[0.0, 0.0, f64::INFINITY], 0.0);
    assert_close(&vals(&t64(&[-1000.0, 1000.0], &[2]).sigmoid()?), &[0.0, 1.0], 0.0);
    assert_close(&vals(&t64(&[-40.0, 40.0], &[2]).gelu()?), &[0.0, 40.0], 1e-15);
    Ok(())
}

#[test]
fn unary_ops_on_integers_and_bool() -> Result<()> {
    let i = Tensor::from_vec(vec![-2i64, 0, 3], &[3], &CPU)?;
    assert_eq!(i.neg()?.to_vec::<i64>()?, vec![2, 0, -3]);
    assert_eq!(i.neg()?.dtype(), DType::I64);
    assert_eq!(i.abs()?.to_vec::<i64>()?, vec![2, 0, 3]);
    assert_eq!(i.square()?.to_vec::<i64>()?, vec![4, 0, 9]);
    assert_eq!(i.relu()?.to_vec::<i64>()?, vec![0, 0, 3]);
    let e = i.exp()?;
    assert_eq!(e.dtype(), DType::F32, "exp of int64 is float32");
    assert_close(&vals(&e), &[(-2f64).exp(), 1.0, 3f64.exp()], 2e-6);
    assert_eq!(i.sigmoid()?.dtype(), DType::F32);
    let b = Tensor::from_vec(vec![true, false], &[2], &CPU)?;
    assert_op_err(b.neg(), "neg");
    assert_op_err(b.exp(), "exp");
    assert_op_err(b.gelu(), "gelu");
    assert_op_err(b.clamp(0.0, 1.0), "clamp");
    Ok(())
}

#[test]
fn clamp_values() -> Result<()> {
    for dt in DType::FLOATS {
        let x = tdt(&[-2.0, -0.5, 0.0, 0.5, 2.0], &[5], dt);
        let y = x.clamp(-1.0, 1.0)?;
        assert_eq!(y.dtype(), dt);
        assert_close(&vals(&y), &[-1.0, -0.5, 0.0, 0.5, 1.0], 0.0);
        assert_close(&vals(&x.clamp_opt(Some(0.0), None)?), &[0.0, 0.0, 0.0, 0.5, 2.0], 0.0);
        assert_close(&vals(&x.clamp_opt(None, Some(0.0))?), &[-2.0, -0.5, 0.0, 0.0, 0.0], 0.0);
    }
    let i = Tensor::from_vec(vec![-5i64, 5], &[2], &CPU)?;
    assert_eq!(i.clamp(-1.0, 2.0)?.to_vec::<f64>()?, vec![-1.0, 2.0]);
    assert_op_err(iota(&[2]).clamp_opt(None, None), "clamp");
    Ok(())
}

// ------------------------------------------------------------ reductions

#[test]
fn sum_and_mean() -> Result<()> {
    for dt in DType::FLOATS {
        let x = tdt(&(0..24).map(|v| v as f64 * 0.25).collect::<Vec<_>>(), &[2, 3, 4], dt);
        let s = x.sum()?;
        assert_eq!(s.shape(), Vec::<usize>::new());
        assert_eq!(s.dtype(), dt);
        assert_close(&vals(&s), &[69.0], tol(dt));
        assert_close(&vals(&x.mean()?), &[69.0 / 24.0], tol(dt));

        let s1 = x.sum_dim(&[1], false)?;
        assert_eq!(s1.shape(), vec![2, 4]);
        let xv: Vec<f64> = (0..24).map(|v| v as f64 * 0.25).collect();
        let at = |i: usize, j: usize, k: usize| xv[i * 12 + j * 4 + k];
        let mut e1 = vec![];
        for i in 0..2 {
            for k in 0..4 {
                e1.push((0..3).map(|j| at(i, j, k)).sum::<f64>());
            }
        }
        assert_close(&vals(&s1), &e1, tol(dt));
        let s1k = x.sum_dim(&[-2], true)?;
        assert_eq!(s1k.shape(), vec![2, 1, 4]);
        assert_close(&vals(&s1k), &e1, tol(dt));

        let s02 = x.sum_dim(&[0, -1], false)?;
        assert_eq!(s02.shape(), vec![3]);
        let e02: Vec<f64> = (0..3).map(|j| (0..2).flat_map(|i| (0..4).map(move |k| (i, k))).map(|(i, k)| at(i, j, k)).sum()).collect();
        assert_close(&vals(&s02), &e02, tol(dt));
        let m02 = x.mean_dim(&[2, 0], true)?;
        assert_eq!(m02.shape(), vec![1, 3, 1]);
        assert_close(&vals(&m02), &e02.iter().map(|v| v / 8.0).collect::<Vec<_>>(), tol(dt));

        // Empty dim list reduces everything.
        let all = x.sum_dim(&[], false)?;
        assert_eq!(all.shape(), Vec::<usize>::new());
        assert_close(&vals(&all), &[69.0], tol(dt));
        let allk = x.sum_dim(&[], true)?;
        assert_eq!(allk.shape(), vec![1, 1, 1]);

        // Non-contiguous input.
        let xt = x.transpose(0, 2)?;
        let st = xt.sum_dim(&[1], false)?;
        assert_eq!(st.shape(), vec![4, 2]);
        let mut et = vec![];
        for k in 0..4 {
            for i in 0..2 {
                et.push((0..3).map(|j| at(i, j, k)).sum::<f64>());
            }
        }
        assert_close(&vals(&st), &et, tol(dt));
    }
    // Integer sums stay integer; mean of ints is refused like PyTorch.
    let i = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2], &CPU)?;
    assert_eq!(i.sum()?.dtype(), DType::I64);
    assert_eq!(i.sum_dim(&[0], false)?.to_vec::<i64>()?, vec![4, 6]);
    assert_op_err(i.mean(), "mean");
    assert_op_err(i.mean_dim(&[0], false), "mean_dim");
    // 0-dim input.
    let z = t64(&[3.0], &[]);
    assert_tensor(&z.sum_dim(&[0], false)?, &[], &[3.0], 0.0);
    assert_tensor(&z.sum_dim(&[-1], true)?, &[], &[3.0], 0.0);
    // Errors.
    let x = iota(&[2, 3]);
    let e = assert_op_err(x.sum_dim(&[2], false), "sum_dim");
    assert!(matches!(e, AotError::DimOutOfRange { .. }), "{e:?}");
    assert_op_err(x.sum_dim(&[-3], false), "sum_dim");
    assert_op_err(x.sum_dim(&[0, -2], false), "sum_dim");
    assert_op_err(x.mean_dim(&[5], true), "mean_dim");
    Ok(())
}

#[test]
fn amax_dim_values() -> Result<()> {
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64] {
        let x = tdt(&[1.0, 5.0, -3.0, 4.0, 2.0, 6.0], &[2, 3], dt);
        let m = x.amax_dim(&[1], false)?;
        assert_eq!(m.dtype(), dt);
        assert_tensor(&m, &[2], &[5.0, 6.0], 0.0);
        assert_tensor(&x.amax_dim(&[0], true)?, &[1, 3], &[4.0, 5.0, 6.0], 0.0);
        assert_tensor(&x.amax_dim(&[-1, -2], false)?, &[], &[6.0], 0.0);
        assert_tensor(&x.amax_dim(&[], true)?, &[1, 1], &[6.0], 0.0);
        assert_tensor(&x.t()?.amax_dim(&[0], false)?, &[2], &[5.0, 6.0], 0.0);
    }
    let n = t64(&[1.0, f64::NAN, 0.0], &[3]);
    assert!(vals(&n.amax_dim(&[0], false)?)[0].is_nan(), "amax propagates NaN");
    assert_op_err(iota(&[2]).amax_dim(&[1], false), "amax_dim");
    assert_op_err(Tensor::from_vec(vec![true], &[1], &CPU)?.amax_dim(&[0], false), "amax_dim");
    Ok(())
}

fn var_ref(v: &[f64], correction: f64) -> f64 {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - correction)
}

#[test]
fn var_dim_correction() -> Result<()> {
    let xv = [1.0, 2.0, 4.0, 7.0, 0.5, -3.0, 2.5, 9.0];
    for dt in DType::FLOATS {
        let x = tdt(&xv, &[2, 4], dt);
        let xr = rounded(&xv, dt);
        for correction in [0i64, 1, 2] {
            let v = x.var_dim(&[1], correction, false)?;
            assert_eq!(v.dtype(), dt);
            assert_tensor(&v, &[2], &[var_ref(&xr[0..4], correction as f64), var_ref(&xr[4..8], correction as f64)], tol(dt) * 4.0);
            let v = x.var_dim(&[-1], correction, true)?;
            assert_eq!(v.shape(), vec![2, 1]);
            let v = x.var_dim(&[0, 1], correction, false)?;
            assert_tensor(&v, &[], &[var_ref(&xr, correction as f64)], tol(dt) * 4.0);
            let v0 = x.var_dim(&[0], correction, true)?;
            assert_eq!(v0.shape(), vec![1, 4]);
            let e0: Vec<f64> = (0..4).map(|j| var_ref(&[xr[j], xr[4 + j]], correction as f64)).collect();
            assert_close(&vals(&v0), &e0, tol(dt) * 4.0);
        }
    }
    // Empty dims: all elements.
    let x = t64(&xv, &[2, 4]);
    assert_tensor(&x.var_dim(&[], 1, false)?, &[], &[var_ref(&xv, 1.0)], 1e-12);
    // N - correction <= 0 gives inf/nan like PyTorch, not an error.
    let v = t64(&[1.0, 2.0], &[2]).var_dim(&[0], 2, false)?;
    assert!(vals(&v)[0].is_infinite() || vals(&v)[0].is_nan());
    assert_op_err(Tensor::from_vec(vec![1i64, 2], &[2], &CPU)?.var_dim(&[0], 1, false), "var_dim");
    assert_op_err(x.var_dim(&[2], 1, false), "var_dim");
    Ok(())
}

#[test]
fn softmax_and_log_softmax() -> Result<()> {
    let xv = [1.0, 2.0, 3.0, -1.0, 0.0, 1.0];
    for dt in DType::FLOATS {
        let x = tdt(&xv, &[2, 3], dt);
        let xr = rounded(&xv, dt);
        let s = x.softmax(1)?;
        assert_eq!(s.dtype(), dt);
        let mut e = vec![];
        let mut le = vec![];
        for r in 0..2 {
            let row = &xr[r * 3..r * 3 + 3];
            let z: f64 = row.iter().map(|v| v.exp()).sum();
            e.extend(row.iter().map(|v| v.exp() / z));
            le.extend(row.iter().map(|v| v - z.ln()));
        }
        assert_close(&vals(&s), &e, tol(dt) * 2.0);
        assert_close(&vals(&x.softmax(-1)?), &e, tol(dt) * 2.0);
        assert_close(&vals(&x.log_softmax(1)?), &le, tol(dt) * 2.0);
        assert_close(&vals(&x.log_softmax(-1)?), &le, tol(dt) * 2.0);
        // Over dim 0.
        let s0 = x.softmax(0)?;
        let col: Vec<f64> = (0..3)
            .flat_map(|j| {
                let (a, b) = (xr[j], xr[3 + j]);
                let z = a.exp() + b.exp();
                [a.exp() / z, b.exp() / z]
            })
            .collect();
        let s0v = vals(&s0);
        for j in 0..3 {
            assert_close(&[s0v[j], s0v[3 + j]], &col[2 * j..2 * j + 2], tol(dt) * 2.0);
        }
        // Through a transposed view.
        let st = x.t()?.softmax(0)?;
        assert_eq!(st.shape(), vec![3, 2]);
        let stv = vals(&st);
        for r in 0..2 {
            for j in 0..3 {
                assert_close(&[stv[j * 2 + r]], &[e[r * 3 + j]], tol(dt) * 2.0);
            }
        }
    }
    // Numerically stable for large inputs.
    let big = t64(&[1000.0, 1000.0, 999.0], &[3]);
    let z = 2.0 + (-1f64).exp();
    assert_close(&vals(&big.softmax(0)?), &[1.0 / z, 1.0 / z, (-1f64).exp() / z], 1e-12);
    assert_close(&vals(&big.log_softmax(0)?), &[-z.ln(), -z.ln(), -1.0 - z.ln()], 1e-12);
    // 0-dim.
    assert_tensor(&t64(&[5.0], &[]).softmax(0)?, &[], &[1.0], 0.0);
    assert_tensor(&t64(&[5.0], &[]).log_softmax(-1)?, &[], &[0.0], 0.0);
    assert_op_err(iota(&[2, 3]).softmax(2), "softmax");
    assert_op_err(iota(&[2, 3]).log_softmax(-3), "log_softmax");
    assert_op_err(Tensor::from_vec(vec![1i64], &[1], &CPU)?.softmax(0), "softmax");
    Ok(())
}

// ------------------------------------------------------------ matmul

/// Reference matmul of row-major [m,k] x [k,n].
fn mm_ref(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    out
}

#[test]
fn matmul_ranks_and_dtypes() -> Result<()> {
    let av = rand_vals(1, 12, -1.0, 1.0);
    let bv = rand_vals(2, 20, -1.0, 1.0);
    for dt in DType::FLOATS {
        let (ar, br) = (rounded(&av, dt), rounded(&bv, dt));
        let t = tol(dt) * 8.0;
        // 2D x 2D
        let c = tdt(&av, &[3, 4], dt).matmul(&tdt(&bv, &[4, 5], dt))?;
        assert_eq!(c.dtype(), dt);
        assert_tensor(&c, &[3, 5], &mm_ref(&ar, &br, 3, 4, 5), t);
        let c = tdt(&av, &[3, 4], dt).mm(&tdt(&bv, &[4, 5], dt))?;
        assert_tensor(&c, &[3, 5], &mm_ref(&ar, &br, 3, 4, 5), t);
        // 1D x 1D -> 0-dim
        let d = tdt(&av[..4], &[4], dt).matmul(&tdt(&bv[..4], &[4], dt))?;
        assert_tensor(&d, &[], &[(0..4).map(|i| ar[i] * br[i]).sum()], t);
        // 2D x 1D -> [m]
        let mv = tdt(&av, &[3, 4], dt).matmul(&tdt(&bv[..4], &[4], dt))?;
        assert_tensor(&mv, &[3], &mm_ref(&ar, &br[..4], 3, 4, 1), t);
    }
    Ok(())
}

#[test]
fn matmul_batched_broadcast_and_strided() -> Result<()> {
    // [2,1,3,4] x [5,4,2] -> [2,5,3,2]
    let av = rand_vals(3, 24, -1.0, 1.0);
    let bv = rand_vals(4, 40, -1.0, 1.0);
    let c = t64(&av, &[2, 1, 3, 4]).matmul(&t64(&bv, &[5, 4, 2]))?;
    assert_eq!(c.shape(), vec![2, 5, 3, 2]);
    let cv = vals(&c);
    for i in 0..2 {
        for j in 0..5 {
            let r = mm_ref(&av[i * 12..i * 12 + 12], &bv[j * 8..j * 8 + 8], 3, 4, 2);
            assert_close(&cv[(i * 5 + j) * 6..(i * 5 + j) * 6 + 6], &r, 1e-12);
        }
    }
    // bmm
    let a = t64(&av, &[2, 3, 4]);
    let b = t64(&bv[..16], &[2, 4, 2]);
    let c = a.bmm(&b)?;
    assert_eq!(c.shape(), vec![2, 3, 2]);
    for i in 0..2 {
        assert_close(&vals(&c)[i * 6..i * 6 + 6], &mm_ref(&av[i * 12..i * 12 + 12], &bv[i * 8..i * 8 + 8], 3, 4, 2), 1e-12);
    }
    // 3D x 1D
    let v = t64(&bv[..4], &[4]);
    let c = a.matmul(&v)?;
    assert_eq!(c.shape(), vec![2, 3]);
    for i in 0..2 {
        assert_close(&vals(&c)[i * 3..i * 3 + 3], &mm_ref(&av[i * 12..i * 12 + 12], &bv[..4], 3, 4, 1), 1e-12);
    }
    // Non-contiguous operands: transposes, a narrowed slice and an expanded batch.
    let a_t = t64(&av[..12], &[4, 3]).t()?; // [3,4]
    let a_ref: Vec<f64> = (0..12).map(|k| av[(k % 4) * 3 + k / 4]).collect();
    let b_n = t64(&bv[..30], &[6, 5]).narrow(0, 1, 4)?; // [4,5]
    let c = a_t.matmul(&b_n)?;
    assert_tensor(&c, &[3, 5], &mm_ref(&a_ref, &bv[5..25], 3, 4, 5), 1e-12);
    let be = t64(&bv[..8], &[4, 2]).unsqueeze(0)?.expand(&[3, 4, 2])?;
    let c = t64(&bv[..36], &[3, 3, 4]).matmul(&be)?;
    for i in 0..3 {
        assert_close(&vals(&c)[i * 6..i * 6 + 6], &mm_ref(&bv[i * 12..i * 12 + 12], &bv[..8], 3, 4, 2), 1e-12);
    }
    Ok(())
}

/// `torch.matmul` of a 1-D first operand prepends a 1 to it and removes
/// that dim from the result: [4] @ [4, 5] -> [5], [4] @ [2, 4, 2] -> [2, 2].
#[test]
fn matmul_1d_times_nd() -> Result<()> {
    let av = rand_vals(1, 4, -1.0, 1.0);
    let bv = rand_vals(2, 20, -1.0, 1.0);
    for dt in DType::FLOATS {
        let (ar, br) = (rounded(&av, dt), rounded(&bv, dt));
        let vm = tdt(&av, &[4], dt).matmul(&tdt(&bv, &[4, 5], dt))?;
        assert_tensor(&vm, &[5], &mm_ref(&ar, &br, 1, 4, 5), tol(dt) * 8.0);
    }
    let v = t64(&av, &[4]);
    let c = v.matmul(&t64(&bv[..16], &[2, 4, 2]))?;
    assert_eq!(c.shape(), vec![2, 2]);
    for i in 0..2 {
        assert_close(&vals(&c)[i * 2..i * 2 + 2], &mm_ref(&av, &bv[i * 8..i * 8 + 8], 1, 4, 2), 1e-12);
    }
    Ok(())
}

/// `t()`/`t_()` refuse tensors above 2-D: "t() expects a tensor with <= 2
/// dimensions, but self is 3D".
#[test]
fn t_refuses_more_than_2d() -> Result<()> {
    assert_op_err(iota(&[2, 2, 2]).t(), "t");
    let y = iota(&[2, 2, 2]);
    assert_op_err(y.t_(), "t_");
    assert_eq!(y.shape(), vec![2, 2, 2]);
    assert_eq!(y.stride(), vec![4, 2, 1]);
    Ok(())
}

#[test]
fn matmul_errors() {
    let a = iota(&[2, 3]);
    assert_op_err(a.matmul(&iota(&[2, 3])), "matmul");
    assert_op_err(a.matmul(&t64(&[1.0], &[])), "matmul");
    assert_op_err(a.matmul(&tdt(&[0.0; 6], &[3, 2], DType::F32)), "matmul");
    let i = Tensor::from_vec(vec![1i64; 6], &[2, 3], &CPU).unwrap();
    assert_op_err(i.matmul(&Tensor::from_vec(vec![1i64; 6], &[3, 2], &CPU).unwrap()), "matmul");
    assert_op_err(iota(&[2, 2, 3]).matmul(&iota(&[3, 3, 2])), "matmul");
    assert_op_err(a.mm(&iota(&[3])), "mm");
    assert_op_err(iota(&[1, 2, 3]).mm(&iota(&[3, 2])), "mm");
    assert_op_err(a.bmm(&iota(&[3, 2])), "bmm");
    assert_op_err(iota(&[2, 2, 3]).bmm(&iota(&[3, 3, 2])), "bmm");
}

// ------------------------------------------------------------ views

#[track_caller]
fn assert_layout(t: &Tensor, shape: &[usize], stride: &[usize], offset: usize) {
    assert_eq!(t.shape(), shape.to_vec(), "shape");
    assert_eq!(t.stride(), stride.to_vec(), "stride");
    assert_eq!(t.storage_offset(), offset, "storage_offset");
}

#[test]
fn view_ops_geometry_and_values() -> Result<()> {
    for dt in DType::FLOATS {
        let x = tdt(&(0..24).map(|v| v as f64).collect::<Vec<_>>(), &[2, 3, 4], dt);
        let v = x.view(&[6, -1])?;
        assert_layout(&v, &[6, 4], &[4, 1], 0);
        assert!(v.shares_storage_with(&x));
        assert!(!v.same_tensor(&x));
        assert_eq!(v.dtype(), dt);
        assert_eq!(vals(&v), vals(&x));

        let tr = x.transpose(-1, 0)?;
        assert_layout(&tr, &[4, 3, 2], &[1, 4, 12], 0);
        assert!(!tr.is_contiguous());
        assert_eq!(vals(&tr)[..4], [0.0, 12.0, 4.0, 16.0]);

        let p = x.permute(&[-1, 0, 1])?;
        assert_layout(&p, &[4, 2, 3], &[1, 12, 4], 0);
        assert_eq!(vals(&p)[..4], [0.0, 4.0, 8.0, 12.0]);

        let u = x.unsqueeze(-1)?;
        assert_layout(&u, &[2, 3, 4, 1], &[12, 4, 1, 1], 0);
        let u0 = x.unsqueeze(0)?;
        assert_layout(&u0, &[1, 2, 3, 4], &[24, 12, 4, 1], 0);
        let u2 = x.unsqueeze(-3)?;
        assert_layout(&u2, &[2, 1, 3, 4], &[12, 12, 4, 1], 0);
        assert_layout(&u2.squeeze(1)?, &[2, 3, 4], &[12, 4, 1], 0);
        assert_layout(&u2.squeeze(-3)?, &[2, 3, 4], &[12, 4, 1], 0);
        assert_layout(&x.squeeze(0)?, &[2, 3, 4], &[12, 4, 1], 0);

        let s = x.select(1, -1)?;
        assert_layout(&s, &[2, 4], &[12, 1], 8);
        assert_eq!(vals(&s), vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]);
        let sl = x.slice(2, 1, 4, 2)?;
        assert_layout(&sl, &[2, 3, 2], &[12, 4, 2], 1);
        assert_eq!(vals(&sl)[..4], [1.0, 3.0, 5.0, 7.0]);
        let sl = x.slice(-1, -3, -1, 1)?;
        assert_layout(&sl, &[2, 3, 2], &[12, 4, 1], 1);
        let sl = x.slice(0, 0, 100, 1)?;
        assert_layout(&sl, &[2, 3, 4], &[12, 4, 1], 0);
        let sl = x.slice(1, 2, 1, 1)?;
        assert_eq!(sl.shape(), vec![2, 0, 4]);
        let n = x.narrow(-2, -2, 2)?;
        assert_layout(&n, &[2, 2, 4], &[12, 4, 1], 4);
        assert_eq!(vals(&n)[..5], [4.0, 5.0, 6.0, 7.0, 8.0]);

        let sq = tdt(&(0..9).map(|v| v as f64).collect::<Vec<_>>(), &[3, 3], dt);
        let d = sq.diagonal()?;
        assert_layout(&d, &[3], &[4], 0);
        assert_eq!(vals(&d), vec![0.0, 4.0, 8.0]);
        let d3 = x.diagonal()?;
        assert_layout(&d3, &[4, 2], &[1, 16], 0);
        assert_eq!(vals(&d3), vec![0.0, 16.0, 1.0, 17.0, 2.0, 18.0, 3.0, 19.0]);

        let e = tdt(&[1.0, 2.0, 3.0], &[3, 1], dt).expand(&[2, -1, 4])?;
        assert_layout(&e, &[2, 3, 4], &[0, 1, 0], 0);
        assert_eq!(vals(&e)[..8], [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]);

        let a = x.as_strided(&[2, 2], &[5, 2], 3)?;
        assert_layout(&a, &[2, 2], &[5, 2], 3);
        assert_eq!(vals(&a), vec![3.0, 5.0, 8.0, 10.0]);
        // as_strided offsets are absolute storage offsets, even from a view.
        let a2 = n.as_strided(&[3], &[1], 0)?;
        assert_eq!(vals(&a2), vec![0.0, 1.0, 2.0]);

        let t2 = sq.t()?;
        assert_layout(&t2, &[3, 3], &[1, 3], 0);
        assert_layout(&iota(&[3]).t()?, &[3], &[1], 0);
        assert_layout(&t64(&[1.0], &[]).t()?, &[], &[], 0);

        let det = x.detach()?;
        assert!(det.shares_storage_with(&x));
        assert_layout(&det, &[2, 3, 4], &[12, 4, 1], 0);
    }
    Ok(())
}

#[test]
fn reshape_view_vs_copy() -> Result<()> {
    let x = iota(&[2, 3, 4]);
    let r = x.reshape(&[4, -1])?;
    assert!(r.shares_storage_with(&x), "reshape of a contiguous tensor is a view");
    assert_layout(&r, &[4, 6], &[6, 1], 0);
    let p = x.permute(&[2, 0, 1])?; // [4,2,3] strides [1,12,4]
    let r = p.reshape(&[4, 6])?;
    assert!(r.shares_storage_with(&x), "merging dims that stay contiguous is a view");
    assert_layout(&r, &[4, 6], &[1, 4], 0);
    let t = x.transpose(0, 1)?; // [3,2,4] strides [4,12,1]
    let r = t.reshape(&[3, 2, 2, 2])?;
    assert!(r.shares_storage_with(&x), "splitting a dim is a view");
    assert_layout(&r, &[3, 2, 2, 2], &[4, 12, 2, 1], 0);
    let r = t.reshape(&[3, 8])?;
    assert!(!r.shares_storage_with(&x), "merging dims that are not contiguous copies");
    let r = t.reshape(&[-1])?;
    assert!(!r.shares_storage_with(&x), "reshape of a transposed tensor to 1-D copies");
    assert!(r.is_contiguous());
    let mut exp = vec![];
    for j in 0..3 {
        for i in 0..2 {
            for k in 0..4 {
                exp.push((i * 12 + j * 4 + k) as f64);
            }
        }
    }
    assert_tensor(&r, &[24], &exp, 0.0);
    assert_op_err(t.view(&[-1]), "view");
    assert_op_err(x.view(&[5, -1]), "view");
    assert_op_err(x.view(&[-1, -1]), "view");
    assert_op_err(x.reshape(&[7]), "reshape");
    // Expanded tensors reshape by copying.
    let e = t64(&[1.0, 2.0], &[2, 1]).expand(&[2, 3])?;
    let r = e.reshape(&[6])?;
    assert_eq!(vals(&r), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    // Scalars.
    let s = t64(&[4.0], &[]);
    assert_layout(&s.view(&[1, 1])?, &[1, 1], &[1, 1], 0);
    assert_layout(&iota(&[1, 1]).view(&[])?, &[], &[], 0);
    Ok(())
}

#[test]
fn view_errors() {
    let x = iota(&[2, 3]);
    let e = assert_op_err(x.transpose(0, 2), "transpose");
    assert!(matches!(e, AotError::DimOutOfRange { .. }), "{e:?}");
    assert_op_err(x.transpose(-3, 0), "transpose");
    assert_op_err(x.permute(&[0]), "permute");
    assert_op_err(x.permute(&[0, 0]), "permute");
    assert_op_err(x.permute(&[0, 2]), "permute");
    assert_op_err(x.unsqueeze(3), "unsqueeze");
    assert_op_err(x.unsqueeze(-4), "unsqueeze");
    assert_op_err(x.squeeze(2), "squeeze");
    assert_op_err(x.expand(&[3, 3]), "expand");
    assert_op_err(x.expand(&[3]), "expand");
    assert_op_err(x.expand(&[-1, 2, 3]), "expand");
    let e = assert_op_err(x.select(0, 2), "select");
    assert!(matches!(e, AotError::IndexOutOfRange { .. }), "{e:?}");
    assert_op_err(x.select(1, -4), "select");
    assert_op_err(x.select(2, 0), "select");
    assert_op_err(t64(&[1.0], &[]).select(0, 0), "select");
    assert_op_err(x.slice(1, 0, 2, 0), "slice");
    assert_op_err(x.slice(2, 0, 2, 1), "slice");
    assert_op_err(x.narrow(1, 2, 2), "narrow");
    assert_op_err(x.narrow(1, 4, 0), "narrow");
    assert_op_err(x.narrow(0, 0, -1), "narrow");
    assert_op_err(x.narrow(2, 0, 1), "narrow");
    assert_op_err(iota(&[3]).diagonal(), "diagonal");
    assert_op_err(x.as_strided(&[2, 4], &[3, 1], 0), "as_strided");
    assert_op_err(x.as_strided(&[2], &[1], 5), "as_strided");
    assert_op_err(x.as_strided(&[2], &[1, 1], 0), "as_strided");
}

// ------------------------------------------------------------ in-place data ops

#[test]
fn inplace_binary_ops_all_float_dtypes() -> Result<()> {
    let av = [1.0, 2.0, 3.0, 4.0];
    let bv = [0.5, 4.0, -1.0, 2.0];
    for dt in DType::FLOATS {
        type IP = (&'static str, fn(&Tensor, &Tensor) -> Result<Tensor>, fn(&Tensor, f64) -> Result<Tensor>, fn(f64, f64) -> f64);
        let ops: [IP; 4] = [
            ("add_", |a, b| a.add_(b), |a, s| a.add_(s), |x, y| x + y),
            ("sub_", |a, b| a.sub_(b), |a, s| a.sub_(s), |x, y| x - y),
            ("mul_", |a, b| a.mul_(b), |a, s| a.mul_(s), |x, y| x * y),
            ("div_", |a, b| a.div_(b), |a, s| a.div_(s), |x, y| x / y),
        ];
        for (name, tt, ts, f) in ops {
            let a = tdt(&av, &[2, 2], dt);
            let b = tdt(&bv, &[2, 2], dt);
            let v0 = a.version();
            let r = tt(&a, &b)?;
            assert!(r.same_tensor(&a), "{name} returns self");
            assert!(a.version() > v0, "{name} bumps the version");
            assert_eq!(a.dtype(), dt);
            assert_close(&vals(&a), &av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).collect::<Vec<_>>(), tol(dt));
            let a = tdt(&av, &[2, 2], dt);
            ts(&a, 2.0)?;
            assert_close(&vals(&a), &av.iter().map(|&x| f(x, 2.0)).collect::<Vec<_>>(), tol(dt));
            // Broadcast right-hand side.
            let a = tdt(&av, &[2, 2], dt);
            tt(&a, &tdt(&[2.0, 4.0], &[2], dt))?;
            assert_close(&vals(&a), &[f(1.0, 2.0), f(2.0, 4.0), f(3.0, 2.0), f(4.0, 4.0)], tol(dt));
            // Mixed dtypes: the result is cast back to the target's dtype.
            let a = tdt(&av, &[2, 2], dt);
            tt(&a, &t64(&bv, &[2, 2]))?;
            assert_eq!(a.dtype(), dt);
            assert_close(&vals(&a), &av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).collect::<Vec<_>>(), tol(dt));
            // The target cannot grow by broadcasting.
            let a = tdt(&av[..2], &[2], dt);
            assert_op_err(tt(&a, &tdt(&av, &[2, 2], dt)), name);
            assert_close(&vals(&a), &av[..2], 0.0);
        }
    }
    // Integer targets refuse float results.
    let i = Tensor::from_vec(vec![1i64, 2], &[2], &CPU)?;
    let e = assert_op_err(i.add_(0.5), "add_");
    assert!(matches!(e, AotError::DTypeMismatch { .. }), "{e:?}");
    assert_op_err(i.mul_(&t64(&[1.0, 2.0], &[2])), "mul_");
    assert_op_err(i.div_(2i64), "div_");
    assert_eq!(i.to_vec::<i64>()?, vec![1, 2], "a failed in-place op leaves the target intact");
    i.add_(3i64)?;
    assert_eq!(i.to_vec::<i64>()?, vec![4, 5]);
    Ok(())
}

#[test]
fn inplace_unary_and_fill_ops() -> Result<()> {
    for dt in DType::FLOATS {
        let xv = [-2.0, -0.5, 0.0, 1.5];
        let mk = || tdt(&xv, &[4], dt);
        let xr = rounded(&xv, dt);
        let x = mk();
        assert!(x.fill_(2.5)?.same_tensor(&x));
        assert_eq!(vals(&x), vec![2.5; 4]);
        let x = mk();
        x.zero_()?;
        assert_eq!(vals(&x), vec![0.0; 4]);
        let x = mk();
        x.clamp_(-1.0, 1.0)?;
        assert_eq!(vals(&x), vec![-1.0, -0.5, 0.0, 1.0]);
        let x = mk();
        x.relu_()?;
        assert_eq!(vals(&x), vec![0.0, 0.0, 0.0, 1.5]);
        let x = mk();
        x.sigmoid_()?;
        assert_close(&vals(&x), &xr.iter().map(|&v| sigmoid_ref(v)).collect::<Vec<_>>(), tol(dt));
        let x = mk();
        x.exp_()?;
        assert_close(&vals(&x), &xr.iter().map(|v| v.exp()).collect::<Vec<_>>(), tol(dt));
        let x = mk();
        x.neg_()?;
        assert_eq!(vals(&x), xr.iter().map(|v| -v).collect::<Vec<_>>());
    }
    let i = Tensor::from_vec(vec![-1i64, 2], &[2], &CPU)?;
    assert_op_err(i.sigmoid_(), "sigmoid_");
    assert_op_err(i.exp_(), "exp_");
    i.neg_()?;
    i.relu_()?;
    assert_eq!(i.to_vec::<i64>()?, vec![1, 0]);
    i.fill_(7.0)?;
    assert_eq!(i.to_vec::<i64>()?, vec![7, 7]);
    Ok(())
}

#[test]
fn copy_inplace() -> Result<()> {
    let dst = Tensor::zeros(&[2, 3], DType::F32, &CPU)?;
    let src = t64(&[1.5, 2.5, 3.5], &[3]);
    let v0 = dst.version();
    assert!(dst.copy_(&src)?.same_tensor(&dst));
    assert!(dst.version() > v0);
    assert_eq!(dst.dtype(), DType::F32);
    assert_eq!(vals(&dst), vec![1.5, 2.5, 3.5, 1.5, 2.5, 3.5]);
    // Into a transposed destination.
    let d = Tensor::zeros(&[3, 2], DType::F64, &CPU)?;
    d.t()?.copy_(&iota(&[2, 3]))?;
    assert_eq!(vals(&d), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // Casting float -> int truncates; -> bool is "nonzero".
    let i = Tensor::zeros(&[3], DType::I64, &CPU)?;
    i.copy_(&t64(&[1.7, -2.7, 0.2], &[3]))?;
    assert_eq!(i.to_vec::<i64>()?, vec![1, -2, 0]);
    let b = Tensor::zeros(&[3], DType::Bool, &CPU)?;
    b.copy_(&t64(&[1.7, 0.0, -0.2], &[3]))?;
    assert_eq!(b.to_vec::<bool>()?, vec![true, false, true]);
    // Shape errors.
    assert_op_err(dst.copy_(&iota(&[2])), "copy_");
    assert_op_err(iota(&[3]).copy_(&iota(&[2, 3])), "copy_");
    Ok(())
}

// ------------------------------------------------------------ metadata mutations

#[test]
fn metadata_mutations_visible_through_handles_not_views() -> Result<()> {
    let x = iota(&[2, 3]);
    let alias = x.clone();
    let before = x.narrow(1, 0, 2)?; // a view taken before the mutation
    x.t_()?;
    assert_layout(&x, &[3, 2], &[1, 3], 0);
    assert_layout(&alias, &[3, 2], &[1, 3], 0);
    assert!(alias.same_tensor(&x));
    assert_layout(&before, &[2, 2], &[3, 1], 0);
    assert_eq!(vals(&alias), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let after = x.select(0, 1)?; // a view of the new geometry
    assert_eq!(vals(&after), vec![1.0, 4.0]);

    let r = x.transpose_(-1, -2)?;
    assert!(r.same_tensor(&x));
    assert_layout(&alias, &[2, 3], &[3, 1], 0);
    x.unsqueeze_(1)?;
    assert_layout(&alias, &[2, 1, 3], &[3, 3, 1], 0);
    x.unsqueeze_(-1)?;
    assert_layout(&alias, &[2, 1, 3, 1], &[3, 3, 1, 1], 0);
    x.squeeze_(-1)?;
    x.squeeze_(1)?;
    assert_layout(&alias, &[2, 3], &[3, 1], 0);
    x.squeeze_(0)?; // size 2: no change
    assert_layout(&alias, &[2, 3], &[3, 1], 0);
    x.as_strided_(&[2, 2], &[1, 2], 1)?;
    assert_layout(&alias, &[2, 2], &[1, 2], 1);
    assert_eq!(vals(&alias), vec![1.0, 3.0, 2.0, 4.0]);
    assert_layout(&before, &[2, 2], &[3, 1], 0);
    assert_layout(&after, &[2], &[3], 1);
    // A view's metadata mutation does not touch its base.
    let v = alias.narrow(0, 0, 1)?;
    v.t_()?;
    assert_layout(&v, &[2, 1], &[2, 1], 1);
    assert_layout(&x, &[2, 2], &[1, 2], 1);
    // Data stays shared after metadata mutations.
    v.fill_(-1.0)?;
    assert_eq!(vals(&x), vec![-1.0, -1.0, 2.0, 4.0]);
    assert_eq!(vals(&before), vec![0.0, -1.0, -1.0, 4.0]);

    // Errors, and a failed mutation leaves the layout as it was.
    let y = iota(&[2, 2, 2]);
    assert_op_err(y.transpose_(0, 3), "transpose_");
    assert_op_err(y.unsqueeze_(4), "unsqueeze_");
    assert_op_err(y.squeeze_(3), "squeeze_");
    assert_op_err(y.as_strided_(&[9], &[1], 0), "as_strided");
    assert_layout(&y, &[2, 2, 2], &[4, 2, 1], 0);
    // t_ on 1-D and 0-D is a no-op.
    let z = iota(&[3]);
    z.t_()?;
    assert_layout(&z, &[3], &[1], 0);
    Ok(())
}

// ------------------------------------------------------------ copies and casts

#[test]
fn copy_contiguous_to_dtype() -> Result<()> {
    let x = iota(&[2, 3]);
    let c = x.copy()?;
    assert!(!c.shares_storage_with(&x));
    assert_eq!(vals(&c), vals(&x));
    c.fill_(1.0)?;
    assert_eq!(vals(&x), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let t = x.t()?;
    // clone() keeps the memory format (PyTorch: x.t().clone().stride() == (1, 3))
    let ct = t.copy()?;
    assert!(!ct.is_contiguous());
    assert_layout(&ct, &[3, 2], &[1, 3], 0);
    assert_eq!(vals(&ct), vals(&t));

    assert!(x.contiguous()?.same_tensor(&x), "contiguous() of a contiguous tensor is itself");
    let tc = t.contiguous()?;
    assert!(!tc.shares_storage_with(&x));
    assert!(tc.is_contiguous());
    assert_eq!(vals(&tc), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // A narrowed row is contiguous with an offset.
    let row = x.select(0, 1)?;
    assert!(row.is_contiguous());
    assert!(row.contiguous()?.same_tensor(&row));

    assert!(x.to_dtype(DType::F64)?.same_tensor(&x));
    for dt in DType::ALL {
        let y = t64(&[0.0, 1.0, 2.5, -3.75], &[2, 2]).to_dtype(dt)?;
        assert_eq!(y.dtype(), dt);
        assert_eq!(y.shape(), vec![2, 2]);
        let exp: Vec<f64> = match dt {
            DType::I64 => vec![0.0, 1.0, 2.0, -3.0],
            DType::Bool => vec![0.0, 1.0, 1.0, 1.0],
            _ => vec![0.0, 1.0, 2.5, -3.75],
        };
        assert_eq!(vals(&y), exp, "{dt}");
    }
    // Rounding in half precisions.
    assert_eq!(vals(&t64(&[1.0 + 1.0 / 4096.0], &[1]).to_dtype(DType::F16)?), vec![1.0]);
    assert_eq!(vals(&t64(&[1.0 + 1.0 / 256.0], &[1]).to_dtype(DType::BF16)?), vec![1.0]);
    assert_eq!(vals(&t64(&[70000.0], &[1]).to_dtype(DType::F16)?), vec![f64::INFINITY]);
    // Casting a strided view.
    assert_eq!(vals(&t.to_dtype(DType::F32)?), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    Ok(())
}

#[test]
fn like_constructors() -> Result<()> {
    for dt in DType::ALL {
        let x = tdt(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], dt).t()?;
        let z = x.zeros_like()?;
        assert_eq!((z.dtype(), z.shape()), (dt, vec![3, 2]));
        assert_eq!(vals(&z), vec![0.0; 6]);
        let o = x.ones_like()?;
        assert_eq!((o.dtype(), o.shape()), (dt, vec![3, 2]));
        assert_eq!(vals(&o), vec![1.0; 6]);
        let f = x.full_like(1.0)?;
        assert_eq!((f.dtype(), f.shape()), (dt, vec![3, 2]));
        assert_eq!(vals(&f), vec![1.0; 6]);
        assert!(!z.shares_storage_with(&x));
    }
    assert_eq!(vals(&iota(&[2]).full_like(-2.5)?), vec![-2.5, -2.5]);
    let _g = rng_lock();
    for dt in DType::FLOATS {
        let x = Tensor::zeros(&[100], dt, &CPU)?;
        let r = x.rand_like()?;
        assert_eq!((r.dtype(), r.shape()), (dt, vec![100]));
        assert!(vals(&r).iter().all(|&v| (0.0..=1.0).contains(&v)));
        aot_runtime::ops::manual_seed(42);
        let a = vals(&x.rand_like()?);
        aot_runtime::ops::manual_seed(42);
        let b = vals(&x.rand_like()?);
        assert_eq!(a, b, "rand_like is deterministic after manual_seed");
        let c = vals(&x.rand_like()?);
        assert_ne!(a, c);
    }
    assert_op_err(Tensor::zeros(&[2], DType::I64, &CPU)?.rand_like(), "rand_like");
    Ok(())
}

#[test]
fn dropout_scaling() -> Result<()> {
    let _g = rng_lock();
    for dt in DType::FLOATS {
        let x = Tensor::ones(&[4000], dt, &CPU)?;
        let y = x.dropout(0.0)?;
        assert_eq!(y.dtype(), dt);
        assert_eq!(vals(&y), vec![1.0; 4000]);
        let y = x.dropout(1.0)?;
        assert_eq!(vals(&y), vec![0.0; 4000]);
        for p in [0.25, 0.5] {
            let y = vals(&x.dropout(p)?);
            let scale = 1.0 / (1.0 - p);
            let kept = y.iter().filter(|&&v| v != 0.0).count();
            assert!(y.iter().all(|&v| v == 0.0 || (v - scale).abs() <= tol(dt) * scale), "{dt} p={p}: values are 0 or 1/(1-p)");
            let frac = kept as f64 / y.len() as f64;
            assert!((frac - (1.0 - p)).abs() < 0.05, "{dt} p={p}: kept fraction {frac}");
            // The mean is preserved in expectation.
            let mean = y.iter().sum::<f64>() / y.len() as f64;
            assert!((mean - 1.0).abs() < 0.1, "mean {mean}");
        }
        aot_runtime::ops::manual_seed(5);
        let a = vals(&x.dropout(0.5)?);
        aot_runtime::ops::manual_seed(5);
        let b = vals(&x.dropout(0.5)?);
        assert_eq!(a, b, "dropout is deterministic after manual_seed");
    }
    // Non-contiguous input keeps its shape.
    let y = iota(&[3, 2]).t()?.dropout(0.0)?;
    assert_tensor(&y, &[2, 3], &[0.0, 2.0, 4.0, 1.0, 3.0, 5.0], 0.0);
    assert_op_err(iota(&[2]).dropout(1.5), "dropout");
    assert_op_err(iota(&[2]).dropout(-0.1), "dropout");
    assert_op_err(Tensor::ones(&[2], DType::I64, &CPU)?.dropout(0.5), "dropout");
    Ok(())
}

/// PyTorch: `torch.tensor([-5, 5]).clamp(-1.0, 2.0)` is `tensor([-1., 2.])`
/// (float32): float bounds promote an integer tensor like any float scalar.
#[test]
fn clamp_of_int_tensor_with_float_bounds_promotes() -> Result<()> {
    let i = Tensor::from_vec(vec![-5i64, 5], &[2], &CPU)?;
    let c = i.clamp(-1.0, 2.0)?;
    assert_eq!(c.dtype(), DType::F32, "torch.tensor([-5, 5]).clamp(-1.0, 2.0).dtype is float32");
    assert_eq!(vals(&c), vec![-1.0, 2.0]);
    // and so the in-place form is refused: "result type Float can't be cast to ... long"
    assert_op_err(i.clamp_(-1.0, 2.0), "clamp_");
    assert_eq!(i.to_vec::<i64>()?, vec![-5, 5]);
    Ok(())
}

/// PyTorch: the sum of a bool tensor counts (int64).
#[test]
fn sum_of_bool_is_int64() -> Result<()> {
    let b = Tensor::from_vec(vec![true, false, true, true], &[2, 2], &CPU)?;
    let s = b.sum()?;
    assert_eq!(s.dtype(), DType::I64, "torch.tensor([True, False]).sum().dtype is int64");
    assert_eq!(s.to_vec::<i64>()?, vec![3]);
    assert_eq!(b.sum_dim(&[0], false)?.to_vec::<i64>()?, vec![2, 1]);
    Ok(())
}

/// PyTorch allows `fill_`/`zero_` on a tensor with internal overlap
/// (`torch.zeros(2, 1).expand(2, 3).fill_(1.0)` works): fill skips the
/// memory-overlap check since every element gets the same value.
#[test]
fn fill_on_expanded_tensor_is_allowed() -> Result<()> {
    let x = Tensor::zeros(&[2, 1], DType::F32, &CPU)?;
    x.expand(&[2, 3])?.fill_(1.0)?;
    assert_eq!(vals(&x), vec![1.0, 1.0]);
    x.expand(&[2, 3])?.zero_()?;
    assert_eq!(vals(&x), vec![0.0, 0.0]);
    Ok(())
}

#[test]
fn nan_inf_and_empty_edge_cases() -> Result<()> {
    let n = f64::NAN;
    // maximum/minimum/relu propagate NaN; NaN is "true" as a bool.
    let a = t64(&[n, 1.0], &[2]);
    let b = t64(&[0.0, n], &[2]);
    assert!(vals(&a.maximum(&b)?).iter().all(|v| v.is_nan()));
    assert!(vals(&a.minimum(&b)?).iter().all(|v| v.is_nan()));
    assert!(vals(&t64(&[n], &[1]).relu()?)[0].is_nan());
    assert_eq!(t64(&[n, 0.0], &[2]).to_dtype(DType::Bool)?.to_vec::<bool>()?, vec![true, false]);
    // Division by zero gives inf, also for integers (true division).
    assert_eq!(vals(&Tensor::from_vec(vec![1i64, 2], &[2], &CPU)?.div(0i64)?), vec![f64::INFINITY; 2]);
    assert_eq!(vals(&t64(&[1.0], &[1]).div(0.0)?), vec![f64::INFINITY]);
    // Empty tensors: sum is 0, mean is NaN, amax over an empty dim is refused.
    let e = Tensor::zeros(&[0, 3], DType::F32, &CPU)?;
    assert_tensor(&e.sum_dim(&[0], false)?, &[3], &[0.0; 3], 0.0);
    assert!(vals(&e.mean_dim(&[0], false)?).iter().all(|v| v.is_nan()));
    assert!(vals(&e.mean()?)[0].is_nan());
    assert_op_err(e.amax_dim(&[0], false), "amax");
    assert_eq!(e.amax_dim(&[1], false)?.shape(), vec![0]);
    assert_eq!(e.softmax(0)?.shape(), vec![0, 3]);
    assert_eq!(e.reshape(&[3, 0, 5])?.stride(), vec![5, 5, 1]);
    assert_eq!(e.t()?.copy()?.shape(), vec![3, 0]);
    let v = Tensor::zeros(&[2, 0], DType::F64, &CPU)?.var_dim(&[1], 1, false)?;
    assert!(vals(&v).iter().all(|x| x.is_nan()));
    Ok(())
}
