//! Tensor subclasses against PyTorch: `oracle/gen_subclass.py` runs
//! functions of PyTorch's `TwoTensor` (inner tensors `a` and `b`, every op
//! applied to both) under `aot_function` (`oracle/subclass.json`); here the
//! same functions take and return a `#[tensor_subclass]` struct and apply
//! each op to both inner tensors. Each case checks:
//! - the creation metadata of every argument and output
//!   (`create_subclass_meta`, with its start counted over all the flat
//!   tensors, as PyTorch's `subclass_inp_meta` and
//!   `subclass_fw_graph_out_meta` count it; a plain tensor is its flat
//!   index): where the inner tensors start, how many, their names, the
//!   outer size and strides;
//! - the outputs' inner tensors, the arguments' inner tensors after the
//!   call (a subclass input updated in place), and the gradients of every
//!   inner and plain tensor that requires grad (a plain tensor's against
//!   the sum of PyTorch's two, see `check`).

use aot_runtime::prelude::*;
use aot_runtime::subclass::{create_subclass_meta, SubclassCreationMeta};
use aot_tests::{check_golden_cases, check_record, close, golden_list, leaf_values, values};
use serde_json::{json, Value};

#[derive(TensorTree)]
#[tensor_subclass(size = a, dtype = a)]
struct TwoTensor {
    a: Tensor,
    b: Tensor,
}

#[aot_fn]
fn mul_sin(w: &TwoTensor, x: &Tensor) -> TwoTensor {
    TwoTensor { a: (w.a * x).sin() + 1.0, b: (w.b * x).sin() + 1.0 }
}

#[aot_fn]
fn two_subclasses(u: &TwoTensor, x: &Tensor, v: &TwoTensor) -> TwoTensor {
    TwoTensor { a: u.a * v.a + x.exp(), b: u.b * v.b + x.exp() }
}

#[aot_fn]
fn matmul(x: &Tensor, w: &TwoTensor) -> TwoTensor {
    TwoTensor { a: x.matmul(&w.a).relu() * 2.0, b: x.matmul(&w.b).relu() * 2.0 }
}

#[aot_fn]
fn mutate(w: &mut TwoTensor, x: &Tensor) -> TwoTensor {
    no_grad! {
        w.a.mul_(0.5);
        w.b.mul_(0.5);
    }
    TwoTensor { a: w.a * x, b: w.b * x }
}

/// An argument: a subclass or a plain tensor.
enum Input {
    Sub(TwoTensor),
    Plain(Tensor),
}

impl Input {
    fn inner(&self) -> Vec<&Tensor> {
        match self {
            Input::Sub(t) => vec![&t.a, &t.b],
            Input::Plain(t) => vec![t],
        }
    }
}

/// The metadata of values in flat order, as PyTorch lists it: a subclass's
/// creation metadata with its start counted over all the flat tensors, a
/// plain tensor's flat index.
fn metas<'a>(values: impl Iterator<Item = Option<&'a TwoTensor>>) -> Vec<Value> {
    let mut flat = 0;
    let mut out = vec![];
    for v in values {
        match v {
            Some(t) => {
                let m: SubclassCreationMeta = create_subclass_meta(t).remove(0);
                out.push(json!({
                    "kind": "subclass",
                    "flat_tensor_start_idx": flat + m.flat_tensor_start_idx,
                    "arg_count": m.arg_count,
                    "attrs": m.inner,
                    "outer_size": m.outer_size,
                    "outer_stride": m.outer_stride,
                }));
                flat += m.arg_count;
            }
            None => {
                out.push(json!({"kind": "plain", "unwrapped_idx": flat}));
                flat += 1;
            }
        }
    }
    out
}

/// PyTorch's record without what we do not model (`outer_size_from_attr`
/// is our `#[tensor_subclass(size = a)]`).
fn strip(v: &Value) -> Value {
    let mut v = v.clone();
    v.as_object_mut().map(|o| o.remove("outer_size_from_attr"));
    v
}

/// Calls the case's function on its arguments.
fn run(name: &str, args: &mut [Input]) -> Result<TwoTensor> {
    match (name, args) {
        ("mul_sin", [Input::Sub(w), Input::Plain(x)]) => mul_sin(w, x),
        ("two_subclasses", [Input::Sub(u), Input::Plain(x), Input::Sub(v)]) => two_subclasses(u, x, v),
        ("matmul", [Input::Plain(x), Input::Sub(w)]) => matmul(x, w),
        ("mutate", [Input::Sub(w), Input::Plain(x)]) => mutate(w, x),
        (other, _) => panic!("no Rust function for the oracle case `{other}` with these arguments"),
    }
}

fn check(case: &Value) -> Result<Vec<String>> {
    let name = case["name"].as_str().expect("name");
    let rg = case["requires_grad"].as_bool().unwrap_or(false);
    let mut k = 0;
    let mut leaf = |shape: &[usize]| -> Result<Tensor> {
        let t = Tensor::from_vec(leaf_values(k, shape.iter().product()), shape, &Device::Cpu)?.requires_grad_(rg);
        k += 1;
        t
    };
    let mut args = vec![];
    for a in case["args"].as_array().expect("args") {
        let shape: Vec<usize> = serde_json::from_value(a["shape"].clone()).expect("shape");
        args.push(match a["kind"].as_str() {
            Some("sub") => Input::Sub(TwoTensor { a: leaf(&shape)?, b: leaf(&shape)? }),
            _ => Input::Plain(leaf(&shape)?),
        });
    }
    let want = &case["result"];
    let mut errs = vec![];
    let ours_in = metas(args.iter().map(|a| match a {
        Input::Sub(t) => Some(t),
        Input::Plain(_) => None,
    }));
    let theirs_in: Vec<Value> = want["subclass_inp_meta"].as_array().expect("inp meta").iter().map(strip).collect();
    if ours_in != theirs_in {
        errs.push(format!("subclass_inp_meta: ours {ours_in:?}, PyTorch {theirs_in:?}"));
    }
    let out = run(name, &mut args)?;
    let ours_out = metas(std::iter::once(Some(&out)));
    let theirs_out: Vec<Value> = want["subclass_fw_graph_out_meta"].as_array().expect("out meta").iter().map(strip).collect();
    if ours_out != theirs_out {
        errs.push(format!("subclass_fw_graph_out_meta: ours {ours_out:?}, PyTorch {theirs_out:?}"));
    }
    for (j, (t, w)) in [&out.a, &out.b].into_iter().zip(want["outputs"][0].as_array().expect("outputs")).enumerate() {
        check_record(&format!("output inner {j}"), t, w, &mut errs);
    }
    for (i, (a, w)) in args.iter().zip(want["args_after"].as_array().expect("args_after")).enumerate() {
        for (j, (t, w)) in a.inner().into_iter().zip(w.as_array().expect("inner")).enumerate() {
            check_record(&format!("argument {i} inner {j} after the call"), t, w, &mut errs);
        }
    }
    if out.a.requires_grad() {
        // gen_subclass.py's loss: output inner tensor j weighted by the
        // leaf values with k = 100 + j.
        let term = |t: &Tensor, j: usize| -> Result<Tensor> {
            t.mul(&Tensor::from_vec(leaf_values(100 + j, t.numel()), &t.shape(), &Device::Cpu)?)?.sum()
        };
        term(&out.a, 0)?.add(&term(&out.b, 1)?)?.backward()?;
    }
    for (i, a) in args.iter().enumerate() {
        let want_g: Option<Vec<Option<Vec<f64>>>> =
            want["grads"].get(i.to_string()).and_then(Value::as_array).map(|g| g.iter().map(golden_list).collect());
        // PyTorch's loss is a `TwoTensor` seeded with ones in both inner
        // tensors, so a plain tensor's gradient is a `TwoTensor` too, one
        // per inner computation; ours is the gradient of their sum.
        let want_g = match (a, want_g) {
            (Input::Plain(_), Some(g)) => Some(vec![g.into_iter().flatten().reduce(|x, y| x.iter().zip(&y).map(|(p, q)| p + q).collect())]),
            (_, g) => g,
        };
        for (j, t) in a.inner().into_iter().enumerate() {
            match (t.grad(), want_g.as_ref().and_then(|g| g.get(j).cloned().flatten())) {
                (None, None) => {}
                (Some(g), Some(w)) if close(&values(&g), &w, 1e-4) => {}
                (g, w) => errs.push(format!("grad of argument {i} inner {j}: ours {:?}, PyTorch {w:?}", g.map(|g| values(&g)))),
            }
        }
    }
    Ok(errs)
}

#[test]
fn subclasses_match_pytorch() {
    check_golden_cases(include_str!("../oracle/subclass.json"), 4, "rerun tests/oracle/gen_subclass.py", check);
}
