//! The layouts of computed tensors against PyTorch on random operand
//! layouts (permuted, sliced, expanded, odd strides on size-1 dims, mixed
//! dtypes, broadcasting): tests/layout_cases.py ran each op in PyTorch and
//! recorded the result's shape and strides in tests/layout_cases.json.

use aot_runtime::prelude::*;
use serde_json::Value;

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_u64).map(|x| x as usize).collect()).unwrap_or_default()
}

/// The operand `[shape, stride, offset, dtype]` over a buffer of
/// `(i % 7) - 3` values, as the generator builds it.
fn operand(v: &Value) -> Result<Tensor> {
    let (shape, stride, off) = (usizes(&v[0]), usizes(&v[1]), v[2].as_u64().unwrap_or(0) as usize);
    let reach: usize = if shape.contains(&0) { 0 } else { shape.iter().zip(&stride).map(|(&n, &s)| (n - 1) * s).sum() };
    let n = off + reach + 2;
    let base = Tensor::from_vec((0..n).map(|i| (i % 7) as f64 - 3.0).collect::<Vec<_>>(), &[n], &Device::Cpu)?;
    let base = match v[3].as_str() {
        Some("bool") => base.gt(0.0)?,
        Some("f32") => base.to_dtype(DType::F32)?,
        Some("i64") => base.to_dtype(DType::I64)?,
        _ => base,
    };
    base.as_strided(&shape, &stride, off)
}

fn run(op: &str, dim: i64, t: &[Tensor]) -> Result<Tensor> {
    let x = &t[0];
    match op {
        "neg" => x.neg(),
        "exp" => x.exp(),
        "add_t" => x.add(&t[1]),
        "div_t" => x.div(&t[1]),
        "add_s" => x.add(1.5),
        "mul_s" => x.mul(2i64),
        "rsub" => x.rsub(1.0),
        "rdiv" => x.rdiv(2.0),
        "rpow" => x.rpow(2.0),
        "pow_s" => x.pow(2.0),
        "pow_t" => x.pow(&t[1]),
        "max_t" => x.maximum(&t[1]),
        "max_s" => x.maximum(0.5),
        "eq_t" => x.eq(&t[1]),
        "eq_s" => x.eq(1i64),
        "where_t" => t[1].where_(&t[0], &t[2]),
        "where_s" => t[1].where_(&t[0], 0.0),
        "clamp" => x.clamp(-1.0, 1.0),
        "copy" => x.copy(),
        "contiguous" => x.contiguous(),
        "to_dtype" => x.to_dtype(if x.dtype() == DType::F64 { DType::F32 } else { DType::F64 }),
        "zeros_like" => x.zeros_like(),
        "rand_like" => x.rand_like(),
        "logical_not" => x.logical_not(),
        "logical_and" => x.logical_and(&t[1]),
        "sum_dim" => x.sum_dim(&[dim], false),
        "sum_dim_keep" => x.sum_dim(&[dim], true),
        "softmax" => x.softmax(dim),
        other => Err(AotError::Unsupported { op: "layout_cases", msg: format!("unknown op {other}") }),
    }
}

#[test]
fn result_layouts_match_pytorch() -> Result<()> {
    let cases: Vec<Value> = serde_json::from_str(include_str!("layout_cases.json")).expect("layout_cases.json");
    assert!(cases.len() >= 500);
    let mut failures = vec![];
    for c in &cases {
        let op = c[0].as_str().unwrap_or("?");
        let ins: Vec<Tensor> = c[2].as_array().into_iter().flatten().map(operand).collect::<Result<_>>()?;
        let r = run(op, c[1].as_i64().unwrap_or(0), &ins)?;
        if r.shape() != usizes(&c[3]) || r.stride() != usizes(&c[4]) {
            failures.push(format!("{op} of {}: ours {:?} / {:?}, PyTorch {} / {}", c[2], r.shape(), r.stride(), c[3], c[4]));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
    Ok(())
}
