//! Values and gradients of calls with composite arguments, against
//! PyTorch: the modules of `oracle/gen_modules.py` (batch norm with running
//! statistics and a step counter, an MLP of a list of layers, an EMA of a
//! weight, a language model whose head is tied to its embedding, a frozen
//! backbone under a trainable head, a KV cache buffer written in place)
//! are structs that derive `TensorTree`, passed to `#[aot_fn]` functions.
//! PyTorch ran each through `torch.func.functional_call` under
//! `aot_function` (`oracle/modules.json`). Each case checks:
//! - `explain()`'s `fw_metadata` against PyTorch's, input by input by name
//!   (PyTorch's inputs are the state, then the user inputs; ours are the
//!   graph's inputs, then the leaves the body never reads);
//! - the struct flattens to PyTorch's parameter and buffer names, in the
//!   recorded order, each a parameter or a buffer as PyTorch has it;
//! - the outputs;
//! - every parameter and buffer after the call (buffers updated in place);
//! - the gradient of every parameter and input that requires grad (and
//!   none for a frozen one), for gen.py's loss over the outputs.

use aot_runtime::prelude::*;
use aot_runtime::tree::LeafKind;
use aot_runtime::{Arg, CompiledFn};
use aot_tests::{check_golden_cases, check_record, close, golden_list, leaf_values, oracle_loss, values};
use serde_json::Value;

#[derive(TensorTree)]
struct BatchNorm {
    weight: Tensor,
    bias: Tensor,
    #[buffer]
    running_mean: Tensor,
    #[buffer]
    running_var: Tensor,
    #[buffer]
    steps: Tensor,
}

#[aot_fn]
fn batch_norm(m: &mut BatchNorm, x: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        m.running_mean.mul_(0.9).add_(&(&mean * 0.1));
        m.running_var.mul_(0.9).add_(&(x.var_dim(&[0], 1, false) * 0.1));
        m.steps.add_(1.0);
    }
    (x - &mean) / (var + 1e-5).sqrt() * m.weight + m.bias
}

#[derive(TensorTree)]
struct Linear {
    w: Tensor,
    b: Tensor,
}

#[derive(TensorTree)]
struct Mlp {
    layers: Vec<Linear>,
}

#[aot_fn]
fn mlp(m: &Mlp, x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let h0 = (x.matmul(&m.layers[0].w) + m.layers[0].b).tanh();
    let h1 = (h0.matmul(&m.layers[1].w) + m.layers[1].b).tanh();
    let h = h1.matmul(&m.layers[2].w) + m.layers[2].b;
    ((&h - y).pow(2.0).mean(), h)
}

#[derive(TensorTree)]
struct Ema {
    w: Tensor,
    #[buffer]
    shadow: Tensor,
}

#[aot_fn]
fn ema(m: &mut Ema, x: &Tensor) -> (Tensor, Tensor) {
    no_grad! {
        m.shadow.mul_(0.99).add_(&(&m.w * 0.01));
    }
    (x.matmul(&m.w), x.matmul(&m.shadow))
}

#[derive(TensorTree)]
struct TiedLm {
    emb: Tensor,
    norm: Tensor,
}

#[aot_fn]
fn tied_lm(m: &TiedLm, ids: &Tensor, targets: &Tensor) -> Tensor {
    let h = ids.embedding(&m.emb);
    let h = &h * (h.pow(2.0).mean_dim(&[-1], true) + 1e-6).rsqrt() * m.norm;
    let logits = h.matmul(&m.emb.t());
    logits.reshape(&[-1, 6]).cross_entropy(&targets.reshape(&[-1]))
}

#[derive(TensorTree)]
struct Frozen {
    backbone: Linear,
    head: Linear,
}

#[aot_fn]
fn frozen_backbone(m: &Frozen, x: &Tensor) -> Tensor {
    let feats = (x.matmul(&m.backbone.w) + m.backbone.b).relu();
    feats.matmul(&m.head.w) + m.head.b
}

#[derive(TensorTree)]
struct KvCache {
    wk: Tensor,
    #[buffer]
    cache: Tensor,
}

#[aot_fn]
fn kv_cache(m: &mut KvCache, x: &Tensor, q: &Tensor) -> Tensor {
    let k = x.matmul(&m.wk);
    no_grad! {
        m.cache.narrow(1, 2, 1).copy_(&k.unsqueeze(1));
    }
    let att = q.unsqueeze(1).matmul(&m.cache.transpose(1, 2)).softmax(-1);
    att.matmul(&m.cache).squeeze(1) + k
}

/// A struct's leaves as it flattens: path and kind.
type Leaves = Vec<(String, LeafKind)>;

/// What a case's call gave: the outputs, the struct's leaves, and what
/// `explain()` said before the call, with the name of each of its inputs.
struct Called {
    outs: Vec<Tensor>,
    leaves: Leaves,
    report: Value,
    names: Vec<String>,
}

/// `explain()` of `f` for these arguments (the struct argument `m`), and
/// the name of each input it reports: the graph's inputs, then the
/// struct's leaves the body never reads, in declaration order.
fn explain(f: &CompiledFn, args: &[Arg], m: &dyn TensorTree) -> Result<(Value, Vec<String>)> {
    let report = serde_json::to_value(f.explain(args)?).expect("the report serialises");
    let mut names: Vec<String> = f.graph().params.iter().map(|p| p.name.clone()).collect();
    for l in m.flatten() {
        let name = format!("m.{}", l.path);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok((report, names))
}

/// Builds the case's struct from its state tensors (in the recorded
/// order), explains and calls its function.
fn call(name: &str, s: &[Tensor], x: &[Tensor]) -> Result<Called> {
    let c = |k: usize| s[k].clone();
    let lin = |k: usize| Linear { w: c(k), b: c(k + 1) };
    let leaves = |t: &dyn TensorTree| t.flatten().into_iter().map(|l| (l.path, l.kind)).collect::<Vec<_>>();
    let done =
        |outs: Vec<Tensor>, m: &dyn TensorTree, (report, names): (Value, Vec<String>)| Called { outs, leaves: leaves(m), report, names };
    Ok(match name {
        "batch_norm" => {
            let mut m = BatchNorm { weight: c(0), bias: c(1), running_mean: c(2), running_var: c(3), steps: c(4) };
            let e = explain(batch_norm::compiled(), &[Arg::tree(&m), (&x[0]).into()], &m)?;
            done(vec![batch_norm(&mut m, &x[0])?], &m, e)
        }
        "mlp" => {
            let m = Mlp { layers: vec![lin(0), lin(2), lin(4)] };
            let e = explain(mlp::compiled(), &[Arg::tree(&m), (&x[0]).into(), (&x[1]).into()], &m)?;
            let (l, h) = mlp(&m, &x[0], &x[1])?;
            done(vec![l, h], &m, e)
        }
        "ema" => {
            let mut m = Ema { w: c(0), shadow: c(1) };
            let e = explain(ema::compiled(), &[Arg::tree(&m), (&x[0]).into()], &m)?;
            let (a, b) = ema(&mut m, &x[0])?;
            done(vec![a, b], &m, e)
        }
        "tied_lm" => {
            let m = TiedLm { emb: c(0), norm: c(1) };
            let e = explain(tied_lm::compiled(), &[Arg::tree(&m), (&x[0]).into(), (&x[1]).into()], &m)?;
            done(vec![tied_lm(&m, &x[0], &x[1])?], &m, e)
        }
        "frozen_backbone" => {
            let m = Frozen { backbone: lin(0), head: lin(2) };
            let e = explain(frozen_backbone::compiled(), &[Arg::tree(&m), (&x[0]).into()], &m)?;
            done(vec![frozen_backbone(&m, &x[0])?], &m, e)
        }
        "kv_cache" => {
            let mut m = KvCache { wk: c(0), cache: c(1) };
            let e = explain(kv_cache::compiled(), &[Arg::tree(&m), (&x[0]).into(), (&x[1]).into()], &m)?;
            done(vec![kv_cache(&mut m, &x[0], &x[1])?], &m, e)
        }
        other => panic!("no Rust module for the oracle case `{other}`"),
    })
}

/// Our `fw_metadata` against PyTorch's, input by input by name (the
/// orders differ: ours lists the graph's inputs first), outputs and
/// counts exactly. As for the other corpora, `mutations_hidden_from_autograd`
/// of an input that is not mutated at all is not compared (PyTorch says
/// `true`).
fn check_meta(ours: &Value, our_names: &[String], theirs: &Value, their_names: &[String], errs: &mut Vec<String>) {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if v["mutates_data"] == false && v["mutates_metadata"] == false {
            v.as_object_mut().map(|o| o.remove("mutations_hidden_from_autograd"));
        }
        v
    };
    let info = |m: &Value, k: usize| strip(&m["input_info"][k]);
    for (k, name) in their_names.iter().enumerate() {
        match our_names.iter().position(|n| n == name) {
            Some(j) if info(ours, j) == info(theirs, k) => {}
            Some(j) => errs.push(format!("input_info of {name}: ours {}, PyTorch {}", info(ours, j), info(theirs, k))),
            None => errs.push(format!("no input_info for {name} (ours: {our_names:?})")),
        }
    }
    let mutated = |m: &Value, names: &[String]| {
        let mut v: Vec<String> = m["mutated_inp_runtime_indices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| names.get(i.as_u64()? as usize).cloned())
            .collect();
        v.sort();
        v
    };
    if mutated(ours, our_names) != mutated(theirs, their_names) {
        errs.push(format!("mutated inputs: ours {:?}, PyTorch {:?}", mutated(ours, our_names), mutated(theirs, their_names)));
    }
    for key in [
        "output_info",
        "num_intermediate_bases",
        "keep_input_mutations",
        "num_outputs",
        "num_outputs_non_aliased",
        "num_outputs_aliased_to_inputs",
        "num_outputs_aliased_to_intermediates",
        "num_forward_returns",
        "num_forward",
    ] {
        if ours[key] != theirs[key] {
            errs.push(format!("{key}: ours {}, PyTorch {}", ours[key], theirs[key]));
        }
    }
}

/// Leaf `k` of the case: its recorded values and dtype, or the leaf formula.
fn make(k: usize, spec: &Value) -> Result<Tensor> {
    let shape: Vec<usize> = spec["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
    let n = shape.iter().product();
    let t = match (spec["dtype"].as_str(), spec["values"].as_array()) {
        (Some("i64"), Some(v)) => Tensor::from_vec(v.iter().map(|x| x.as_i64().expect("i64")).collect(), &shape, &Device::Cpu)?,
        _ => Tensor::from_vec(leaf_values(k, n), &shape, &Device::Cpu)?,
    };
    t.requires_grad_(spec["requires_grad"].as_bool().unwrap_or(false))
}

/// Runs one case; returns its mismatches.
fn check(case: &Value) -> Result<Vec<String>> {
    let name = case["name"].as_str().expect("name");
    let specs = case["state"].as_array().expect("state");
    let inputs = case["inputs"].as_array().expect("inputs");
    let state: Vec<Tensor> = specs.iter().enumerate().map(|(k, s)| make(k, s)).collect::<Result<_>>()?;
    let xs: Vec<Tensor> = inputs.iter().enumerate().map(|(k, s)| make(specs.len() + k, s)).collect::<Result<_>>()?;
    let Called { outs, leaves, report, names } = call(name, &state, &xs)?;
    let mut errs = vec![];
    let their_names: Vec<String> = specs
        .iter()
        .map(|s| format!("m.{}", s["path"].as_str().expect("path")))
        .chain(inputs.iter().map(|s| s["name"].as_str().expect("name").to_string()))
        .collect();
    check_meta(&report["fw_metadata"], &names, &case["result"]["fw_metadata"], &their_names, &mut errs);
    let want_leaves: Leaves = specs
        .iter()
        .map(|s| {
            let kind = if s["kind"] == "buffer" { LeafKind::Buffer } else { LeafKind::Parameter };
            (s["path"].as_str().expect("path").to_string(), kind)
        })
        .collect();
    if leaves != want_leaves {
        errs.push(format!("the struct flattens to {leaves:?}, PyTorch's module has {want_leaves:?}"));
    }
    let result = &case["result"];
    let want_outs = result["outputs"].as_array().expect("outputs");
    if want_outs.len() != outs.len() {
        errs.push(format!("{} outputs, PyTorch {}", outs.len(), want_outs.len()));
    }
    for (k, (o, w)) in outs.iter().zip(want_outs).enumerate() {
        check_record(&format!("output {k}"), o, w, &mut errs);
        if w["requires_grad"].as_bool() != Some(o.requires_grad()) {
            errs.push(format!("output {k}: requires_grad {}, PyTorch {}", o.requires_grad(), w["requires_grad"]));
        }
    }
    for ((t, w), s) in state.iter().zip(result["state_after"].as_array().expect("state_after")).zip(specs) {
        check_record(&format!("{} after the call", s["path"]), t, w, &mut errs);
    }
    if let Some(loss) = oracle_loss(&outs)? {
        loss.backward()?;
    }
    let named = specs.iter().map(|s| &s["path"]).chain(inputs.iter().map(|s| &s["name"]));
    for (t, name) in state.iter().chain(&xs).zip(named) {
        let name = name.as_str().expect("a name");
        let want = result["grads"].get(name);
        match (t.grad(), want.and_then(golden_list)) {
            (None, None) => {}
            (Some(g), Some(w)) => {
                if !close(&values(&g), &w, 1e-4) {
                    errs.push(format!("grad of {name}: ours {:?}, PyTorch {w:?}", values(&g)));
                }
            }
            (g, w) => errs.push(format!("grad of {name}: ours {:?}, PyTorch {w:?}", g.map(|g| values(&g)))),
        }
    }
    Ok(errs)
}

#[test]
fn composite_arguments_match_pytorch() {
    check_golden_cases(include_str!("../oracle/modules.json"), 6, "rerun tests/oracle/gen_modules.py", check);
}
