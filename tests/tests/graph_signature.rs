//! `graph_signature()` against PyTorch's `aot_export_module`
//! (`oracle/signatures.json`, written by `oracle/gen_signature.py` from the
//! same modules): batch norm with running statistics (inference, and
//! trained with a loss), an MLP (with and without an input's gradient), a
//! list of layers, a frozen backbone under a trainable head, nested
//! modules with a buffer, and a module that writes a user input.
//!
//! The mapping between PyTorch's names and ours, and nothing else, is
//! translated before an exact comparison of the whole signature:
//! - a parameter or buffer FQN `w1` of the module is the field path `m.w1`
//!   of the struct parameter `m` (also our graph input's name, so PyTorch's
//!   placeholder `arg0_1` for `w1` becomes `m.w1`);
//! - user inputs are matched by position (PyTorch's placeholders `argN_1`,
//!   our parameter names), as are user outputs (FX node names both, but of
//!   different graphs: PyTorch's decomposed ATen graph, our DSL graph);
//! - the outputs that carry a mutated buffer or input and the gradient
//!   outputs are matched by what they update or are the gradient of.
//!
//! So the lists, the roles of every input, which buffers and inputs are
//! mutated, which inputs get gradients and which output is the loss must
//! all agree.

use aot_runtime::compiled::GraphSignature;
use aot_runtime::prelude::*;
use aot_tests::models::{mlp_loss, Mlp};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

#[derive(TensorTree)]
struct BatchNormLike {
    weight: Tensor,
    bias: Tensor,
    #[buffer]
    running_mean: Tensor,
    #[buffer]
    running_var: Tensor,
}

#[aot_fn]
fn batch_norm(m: &mut BatchNormLike, x: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        m.running_mean.mul_(0.9).add_(&(mean * 0.1));
        m.running_var.mul_(0.9).add_(&(x.var_dim(&[0], 1, false) * 0.1));
    }
    (x - mean) / (var + 1e-5).sqrt() * m.weight + m.bias
}

#[derive(TensorTree)]
struct AccumulateInto {
    scale: Tensor,
    #[buffer]
    count: Tensor,
}

#[aot_fn]
fn accumulate_into(m: &mut AccumulateInto, acc: &mut Tensor, x: &Tensor) -> (Tensor, Tensor) {
    acc.add_(&(x * m.scale));
    m.count.add_(1.0);
    ((acc * 2.0).sum(), x.exp())
}

#[aot_fn]
fn batch_norm_train(m: &mut BatchNormLike, x: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        m.running_mean.mul_(0.9).add_(&(&mean * 0.1));
        m.running_var.mul_(0.9).add_(&(x.var_dim(&[0], 1, false) * 0.1));
    }
    ((x - mean) / (var + 1e-5).sqrt() * m.weight + m.bias).pow(2.0).sum()
}

#[derive(TensorTree)]
struct Linear {
    w: Tensor,
    b: Tensor,
}

/// PyTorch's `nn.ModuleList`: names `m.layers.0.w`, ...
#[derive(TensorTree)]
struct Stack {
    layers: Vec<Linear>,
}

#[aot_fn]
fn stack_loss(m: &Stack, x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let h = (x.matmul(&m.layers[0].w) + m.layers[0].b).tanh();
    let h = (h.matmul(&m.layers[1].w) + m.layers[1].b).tanh();
    let h = h.matmul(&m.layers[2].w) + m.layers[2].b;
    ((&h - y).pow(2.0).mean(), h.detach())
}

#[derive(TensorTree)]
struct Frozen {
    backbone: Linear,
    head: Linear,
}

#[aot_fn]
fn frozen_backbone(m: &Frozen, x: &Tensor, y: &Tensor) -> Tensor {
    let feats = (x.matmul(&m.backbone.w) + m.backbone.b).relu();
    (feats.matmul(&m.head.w) + m.head.b - y).pow(2.0).mean()
}

#[derive(TensorTree)]
struct NormWithSteps {
    weight: Tensor,
    #[buffer]
    steps: Tensor,
}

/// Nested structs: `m.norm.weight`, the buffer `m.norm.steps`, `m.proj.w`.
#[derive(TensorTree)]
struct Block {
    norm: NormWithSteps,
    proj: Linear,
}

#[aot_fn]
fn block(m: &mut Block, x: &Tensor) -> (Tensor, Tensor) {
    no_grad! { m.norm.steps.add_(1.0); }
    let n = x * (x.pow(2.0).mean_dim(&[-1], true) + 1e-6).rsqrt() * m.norm.weight;
    let h = x + (n.matmul(&m.proj.w) + m.proj.b).relu();
    (h.pow(2.0).mean(), h.detach())
}

fn oracle() -> Vec<Value> {
    let v: Value = serde_json::from_str(include_str!("../oracle/signatures.json")).expect("signatures.json");
    v["cases"].as_array().expect("cases").clone()
}

fn randn(shape: &[usize], seed: u64, requires_grad: bool) -> Tensor {
    let t = Tensor::randn(shape, DType::F32, &Device::Cpu, seed).expect("randn");
    t.requires_grad_(requires_grad).expect("requires_grad_")
}

/// Our signature of the case's function, called as PyTorch's export was.
fn ours(case: &Value) -> Result<GraphSignature> {
    let pg = case["params_require_grad"].as_bool().unwrap_or(false);
    let ag = |i: usize| case["args_require_grad"][i].as_bool().unwrap_or(false);
    match case["name"].as_str().unwrap_or("") {
        "batch_norm" => {
            let m = BatchNormLike {
                weight: randn(&[3], 1, pg),
                bias: randn(&[3], 2, pg),
                running_mean: Tensor::zeros(&[3], DType::F32, &Device::Cpu)?,
                running_var: Tensor::ones(&[3], DType::F32, &Device::Cpu)?,
            };
            let x = randn(&[8, 3], 3, ag(0));
            batch_norm::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x)])
        }
        "mlp_loss" | "mlp_loss_input_grad" => {
            let m = Mlp { w1: randn(&[3, 4], 1, pg), b1: randn(&[4], 2, pg), w2: randn(&[4, 2], 3, pg), b2: randn(&[2], 4, pg) };
            let (x, y) = (randn(&[5, 3], 5, ag(0)), randn(&[5, 2], 6, ag(1)));
            mlp_loss::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x), Arg::from(&y)])
        }
        "accumulate_into" => {
            let m = AccumulateInto { scale: randn(&[4], 1, pg), count: Tensor::zeros(&[1], DType::F32, &Device::Cpu)? };
            let (acc, x) = (randn(&[4], 2, ag(0)), randn(&[4], 3, ag(1)));
            accumulate_into::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&acc), Arg::from(&x)])
        }
        "batch_norm_train" => {
            let m = BatchNormLike {
                weight: randn(&[3], 1, pg),
                bias: randn(&[3], 2, pg),
                running_mean: Tensor::zeros(&[3], DType::F32, &Device::Cpu)?,
                running_var: Tensor::ones(&[3], DType::F32, &Device::Cpu)?,
            };
            let x = randn(&[8, 3], 3, ag(0));
            batch_norm_train::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x)])
        }
        "stack_loss" | "stack_input_grad" => {
            let dims = [(3, 4), (4, 4), (4, 2)];
            let layers = dims
                .iter()
                .enumerate()
                .map(|(i, &(a, b))| Linear { w: randn(&[a, b], 10 + i as u64, pg), b: randn(&[b], 20 + i as u64, pg) });
            let m = Stack { layers: layers.collect() };
            let (x, y) = (randn(&[5, 3], 5, ag(0)), randn(&[5, 2], 6, ag(1)));
            stack_loss::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x), Arg::from(&y)])
        }
        "frozen_backbone" => {
            let rg = |f: &str| case["param_requires_grad"][f].as_bool().unwrap_or(false);
            let m = Frozen {
                backbone: Linear { w: randn(&[3, 4], 1, rg("backbone.w")), b: randn(&[4], 2, rg("backbone.b")) },
                head: Linear { w: randn(&[4, 2], 3, rg("head.w")), b: randn(&[2], 4, rg("head.b")) },
            };
            let (x, y) = (randn(&[5, 3], 5, ag(0)), randn(&[5, 2], 6, ag(1)));
            frozen_backbone::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x), Arg::from(&y)])
        }
        "block_loss" | "block_inference" => {
            let m = Block {
                norm: NormWithSteps { weight: randn(&[4], 1, pg), steps: Tensor::zeros(&[1], DType::F32, &Device::Cpu)? },
                proj: Linear { w: randn(&[4, 4], 2, pg), b: randn(&[4], 3, pg) },
            };
            let x = randn(&[2, 4], 4, ag(0));
            block::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x)])
        }
        other => panic!("no Rust function for oracle case `{other}`"),
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// PyTorch's signature with its names translated to ours (see the module
/// docs); a name with no counterpart stays as it is, so it fails the
/// comparison.
fn translate(pt: &Value, ours: &Value, root: &str) -> Value {
    let fqn = |f: &str| format!("{root}.{f}");
    // Graph inputs: placeholders of parameters and buffers by FQN, user
    // inputs by position.
    let mut input: HashMap<String, String> = HashMap::new();
    for key in ["inputs_to_parameters", "inputs_to_buffers"] {
        for (ph, f) in pt[key].as_object().into_iter().flatten() {
            input.insert(ph.clone(), fqn(f.as_str().unwrap_or("")));
        }
    }
    for (p, o) in strs(&pt["user_inputs"]).into_iter().zip(strs(&ours["user_inputs"])) {
        input.insert(p, o);
    }
    // Outputs: user outputs by position, the others by what they carry.
    let mut output: HashMap<String, String> = HashMap::new();
    for (p, o) in strs(&pt["user_outputs"]).into_iter().zip(strs(&ours["user_outputs"])) {
        output.insert(p, o);
    }
    let target = |name: &str| input.get(name).cloned().unwrap_or_else(|| fqn(name));
    let by_target = |map: &Value, our_map: &Value, to: &dyn Fn(&str) -> String, output: &mut HashMap<String, String>| {
        for (out, t) in map.as_object().into_iter().flatten() {
            let want = to(t.as_str().unwrap_or(""));
            if let Some((o, _)) = our_map.as_object().into_iter().flatten().find(|(_, v)| v.as_str() == Some(&want)) {
                output.insert(out.clone(), o.clone());
            }
        }
    };
    by_target(&pt["buffers_to_mutate"], &ours["buffers_to_mutate"], &|f| fqn(f), &mut output);
    by_target(&pt["user_inputs_to_mutate"], &ours["user_inputs_to_mutate"], &|ph| target(ph), &mut output);
    let (pb, ob) = (&pt["backward_signature"], &ours["backward_signature"]);
    by_target(&pb["gradients_to_parameters"], &ob["gradients_to_parameters"], &|f| fqn(f), &mut output);
    by_target(&pb["gradients_to_user_inputs"], &ob["gradients_to_user_inputs"], &|ph| target(ph), &mut output);

    let name = |m: &HashMap<String, String>, n: &str| m.get(n).cloned().unwrap_or_else(|| n.to_string());
    let list = |v: &Value, f: &dyn Fn(&str) -> String| Value::from(strs(v).iter().map(|s| f(s)).collect::<Vec<_>>());
    let map = |v: &Value, k: &dyn Fn(&str) -> String, val: &dyn Fn(&str) -> String| {
        let m: Map<String, Value> =
            v.as_object().into_iter().flatten().map(|(a, b)| (k(a), Value::from(val(b.as_str().unwrap_or(""))))).collect();
        Value::Object(m)
    };
    let (inp, out) = (|n: &str| name(&input, n), |n: &str| name(&output, n));
    json!({
        "parameters": list(&pt["parameters"], &|f| fqn(f)),
        "buffers": list(&pt["buffers"], &|f| fqn(f)),
        "user_inputs": list(&pt["user_inputs"], &inp),
        "user_outputs": list(&pt["user_outputs"], &out),
        "inputs_to_parameters": map(&pt["inputs_to_parameters"], &inp, &|f| fqn(f)),
        "inputs_to_buffers": map(&pt["inputs_to_buffers"], &inp, &|f| fqn(f)),
        "buffers_to_mutate": map(&pt["buffers_to_mutate"], &out, &|f| fqn(f)),
        "user_inputs_to_mutate": map(&pt["user_inputs_to_mutate"], &out, &inp),
        "backward_signature": if pb.is_null() { Value::Null } else { json!({
            "gradients_to_parameters": map(&pb["gradients_to_parameters"], &out, &|f| fqn(f)),
            "gradients_to_user_inputs": map(&pb["gradients_to_user_inputs"], &out, &inp),
            "loss_output": out(pb["loss_output"].as_str().unwrap_or("")),
        })},
    })
}

#[test]
fn graph_signatures_match_pytorch() {
    let cases = oracle();
    assert_eq!(cases.len(), 10);
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let ours = match ours(case) {
            Ok(s) => serde_json::to_value(&s).expect("serialise"),
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let want = translate(&case["signature"], &ours, "m");
        if ours != want {
            failures.push(format!("{name}:\n  ours:    {ours}\n  pytorch: {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn signature_fields_and_names() -> Result<()> {
    let m = AccumulateInto { scale: randn(&[4], 1, false), count: Tensor::zeros(&[1], DType::F32, &Device::Cpu)? };
    let (acc, x) = (randn(&[4], 2, false), randn(&[4], 3, false));
    let sig = accumulate_into::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&acc), Arg::from(&x)])?;
    let v = serde_json::to_value(&sig).expect("serialise");
    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "backward_signature",
            "buffers",
            "buffers_to_mutate",
            "inputs_to_buffers",
            "inputs_to_parameters",
            "parameters",
            "user_inputs",
            "user_inputs_to_mutate",
            "user_outputs"
        ]
    );
    // Outputs are named FX-style after the nodes that make them: the last
    // in-place write of a mutated input (`add_` -> `add`, the second `add`
    // node -> `add_1`), and the returned values.
    assert_eq!(sig.user_inputs_to_mutate.iter().collect::<Vec<_>>(), [(&"add".to_string(), &"acc".to_string())]);
    assert_eq!(sig.buffers_to_mutate.iter().collect::<Vec<_>>(), [(&"add_1".to_string(), &"m.count".to_string())]);
    assert_eq!(sig.user_outputs, ["sum", "exp"]);
    assert_eq!(sig.user_inputs, ["acc", "x"]);

    // Training: gradients are named after their input.
    let m = Mlp { w1: randn(&[3, 4], 1, true), b1: randn(&[4], 2, false), w2: randn(&[4, 2], 3, true), b2: randn(&[2], 4, true) };
    let (x, y) = (randn(&[5, 3], 5, false), randn(&[5, 2], 6, true));
    let sig = mlp_loss::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x), Arg::from(&y)])?;
    let back = sig.backward_signature.expect("a training call");
    assert_eq!(back.gradients_to_parameters.keys().collect::<Vec<_>>(), ["m.b2.grad", "m.w1.grad", "m.w2.grad"]);
    assert_eq!(back.gradients_to_user_inputs.values().collect::<Vec<_>>(), ["y"]);
    assert_eq!(back.loss_output, "mean");
    // Under no_grad the same call records nothing.
    let _g = aot_runtime::NoGradGuard::new();
    let sig = mlp_loss::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x), Arg::from(&y)])?;
    assert!(sig.backward_signature.is_none());
    Ok(())
}

#[derive(TensorTree)]
struct WithUnread {
    w: Tensor,
    unused: Tensor,
    #[buffer]
    steps: Tensor,
    #[buffer]
    idle: Tensor,
}

#[aot_fn]
fn reads_some(m: &mut WithUnread, x: &Tensor) -> Tensor {
    no_grad! {
        m.steps.add_(1.0);
    }
    x * m.w
}

/// PyTorch's `aot_export_module` lifts every parameter and buffer of the
/// module, read or not, and its backward signature has a gradient for
/// every parameter that requires grad. Leaves the body never reads are no
/// inputs of our graph, but the signature and `explain()` list them.
#[test]
fn unread_parameters_and_buffers_are_listed() -> Result<()> {
    let zeros = || Tensor::zeros(&[2], DType::F32, &Device::Cpu);
    let m = WithUnread { w: randn(&[2], 1, true), unused: randn(&[2], 2, true), steps: zeros()?, idle: zeros()? };
    let x = randn(&[2], 3, false);
    let args = [Arg::tree(&m), Arg::from(&x)];
    let names: Vec<&str> = reads_some::compiled().graph().params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "m.steps", "m.w"]);
    let sig = reads_some::compiled().graph_signature(&args)?;
    assert_eq!(sig.parameters, ["m.w", "m.unused"]);
    assert_eq!(sig.buffers, ["m.steps", "m.idle"]);
    assert_eq!(sig.inputs_to_parameters.keys().collect::<Vec<_>>(), ["m.unused", "m.w"]);
    assert_eq!(sig.inputs_to_buffers.keys().collect::<Vec<_>>(), ["m.idle", "m.steps"]);
    assert_eq!(sig.buffers_to_mutate.values().collect::<Vec<_>>(), ["m.steps"]);
    assert_eq!(sig.user_inputs, ["x"]);
    let back = sig.backward_signature.expect("a training call");
    assert_eq!(back.gradients_to_parameters.values().collect::<Vec<_>>(), ["m.unused", "m.w"]);
    // `explain()`: the graph's inputs, then the unread leaves, not mutated.
    let report = reads_some::compiled().explain(&args)?;
    let info = &report.fw_metadata.input_info;
    assert_eq!(info.len(), 5);
    let facts: Vec<(bool, bool)> = info.iter().map(|i| (i.mutates_data, i.requires_grad)).collect();
    assert_eq!(facts, [(false, false), (true, false), (false, true), (false, true), (false, false)]);
    assert!(info[3..].iter().all(|i| i.is_leaf && !i.mutates_metadata));
    // The call itself reads and writes only what the body names.
    let mut m = m;
    let out = reads_some(&mut m, &x)?;
    assert_eq!(out.to_vec::<f32>()?, x.mul(&m.w)?.to_vec::<f32>()?);
    assert_eq!(m.steps.to_vec::<f32>()?, [1.0, 1.0]);
    assert_eq!(m.idle.to_vec::<f32>()?, [0.0, 0.0]);
    Ok(())
}

#[aot_fn]
fn sgd(m: &mut Mlp, lr: f64) {
    m.w1.sub_(&(m.w1 * lr));
}

#[test]
fn a_parameter_written_in_place_has_no_signature() -> Result<()> {
    let mut m = Mlp { w1: randn(&[3, 4], 1, false), b1: randn(&[4], 2, false), w2: randn(&[4, 2], 3, false), b2: randn(&[2], 4, false) };
    let before = m.w1.to_vec::<f32>()?;
    let err = sgd::compiled().graph_signature(&[Arg::tree(&m), Arg::from(0.5)]).unwrap_err().to_string();
    assert!(err.contains("parameter `m.w1` is written in place") && err.contains("#[buffer]"), "{err}");
    // Asking wrote nothing; the call itself works.
    assert_eq!(m.w1.to_vec::<f32>()?, before);
    sgd(&mut m, 0.5)?;
    assert_eq!(m.w1.to_vec::<f32>()?, before.iter().map(|v| v * 0.5).collect::<Vec<_>>());
    Ok(())
}

/// The comparison is not vacuous: a PyTorch signature with one fact changed
/// (a buffer that is not mutated, a gradient that is missing, another loss)
/// no longer matches ours.
#[test]
fn the_comparison_sees_a_changed_fact() {
    for case in oracle() {
        let name = case["name"].as_str().unwrap_or("?").to_string();
        let ours = serde_json::to_value(ours(&case).expect("signature")).expect("serialise");
        let pt = &case["signature"];
        assert_eq!(translate(pt, &ours, "m"), ours, "{name}");
        let mut perturbed = Vec::new();
        for key in ["buffers_to_mutate", "user_inputs_to_mutate", "inputs_to_buffers"] {
            if let Some((k, _)) = pt[key].as_object().and_then(|m| m.iter().next()) {
                let mut p = pt.clone();
                p[key].as_object_mut().unwrap().remove(k);
                perturbed.push(p);
            }
        }
        if !pt["backward_signature"].is_null() {
            let mut p = pt.clone();
            p["backward_signature"]["loss_output"] = pt["user_inputs"][0].clone();
            perturbed.push(p);
            let mut p = pt.clone();
            let grads = p["backward_signature"]["gradients_to_parameters"].as_object_mut().unwrap();
            let k = grads.keys().next().unwrap().clone();
            grads.remove(&k);
            perturbed.push(p);
        }
        // A parameter that PyTorch would list as a buffer.
        let mut p = pt.clone();
        let f = p["parameters"].as_array_mut().unwrap().pop().unwrap();
        p["buffers"].as_array_mut().unwrap().push(f);
        perturbed.push(p);
        assert!(!perturbed.is_empty(), "{name}");
        for p in perturbed {
            assert_ne!(translate(&p, &ours, "m"), ours, "{name}: {p}");
        }
    }
}
