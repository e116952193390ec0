//! `rsqrt` on f16/bf16 against PyTorch bit for bit (`oracle/half_rsqrt.json`,
//! from `oracle/gen_half_rsqrt.py`): contiguous inputs of lengths around
//! PyTorch's 32-lane vectors, a transposed input (read as one run), a
//! stepped slice and narrow rows (read element by element), an expanded
//! input (per-row tails), and a bf16/f16 RMSNorm whose `rsqrt` follows a
//! reduction. PyTorch rounds the square root first on the elements its
//! vector loop leaves over (`cpu::fused::scalar_tail`); eager and compiled
//! calls must give exactly its values.

use aot_runtime::prelude::*;
use serde_json::Value;

#[aot_fn]
fn rsqrt_of(x: &Tensor) -> Tensor {
    x.rsqrt()
}

#[aot_fn]
fn rms_norm(x: &Tensor) -> Tensor {
    x * (x.square().mean_dim(&[-1], true) + 1e-5).rsqrt()
}

fn base(shape: &[usize], dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (0.05 + 25.0 * (1.0 + (0.37 * i as f64 + 0.1).sin())) as f32).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap().to_dtype(dtype).unwrap()
}

fn layout(x: &Tensor, name: &str) -> Tensor {
    match name {
        "none" => x.clone(),
        "t" => x.t().unwrap(),
        "step2" => x.slice(1, 0, x.shape()[1] as i64, 2).unwrap(),
        "narrow3" => x.narrow(1, 0, 3).unwrap(),
        "expand8" => x.narrow(0, 0, 1).unwrap().expand(&[8, x.shape()[1] as i64]).unwrap(),
        other => panic!("unknown layout {other}"),
    }
}

fn cases() -> Vec<Value> {
    let doc: Value = serde_json::from_str(include_str!("../oracle/half_rsqrt.json")).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

#[test]
fn half_rsqrt_matches_pytorch_bit_for_bit() {
    let mut failures = Vec::new();
    let mut differs_from_single_rounding = 0;
    for c in cases() {
        let dtype = if c["dtype"] == "f16" { DType::F16 } else { DType::BF16 };
        let shape: Vec<usize> = c["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        let want: Vec<f64> = c["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let x = layout(&base(&shape, dtype), c["layout"].as_str().unwrap());
        let label = format!("{} {} {:?} {}", c["op"], c["dtype"], shape, c["layout"]);
        let (eager, compiled) = if c["op"] == "rsqrt" {
            (x.rsqrt().unwrap(), rsqrt_of(&x).unwrap())
        } else {
            let m = x.square().unwrap().mean_dim(&[-1], true).unwrap().add(1e-5).unwrap().rsqrt().unwrap();
            (x.mul(&m).unwrap(), rms_norm(&x).unwrap())
        };
        for (how, got) in [("eager", &eager), ("compiled", &compiled)] {
            let got = got.to_vec::<f64>().unwrap();
            if got != want {
                let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                failures.push(format!("{label} {how}: {bad} of {} elements differ", want.len()));
            }
        }
        // The single-rounding result, for the count below.
        let once = x.to_dtype(DType::F32).unwrap().rsqrt().unwrap().to_dtype(dtype).unwrap();
        if c["op"] == "rsqrt" && once.to_vec::<f64>().unwrap() != want {
            differs_from_single_rounding += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The cases exercise the element-by-element path: rounding once would
    // miss most of them.
    assert!(differs_from_single_rounding >= 12, "only {differs_from_single_rounding} cases need two roundings");
}
