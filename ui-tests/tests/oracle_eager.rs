//! The eager reference (`CompiledFn::run_eager`) against PyTorch's results
//! for every oracle call: outputs (values, shapes, `requires_grad`), the
//! arguments after the call (so data and metadata mutations are visible),
//! which outputs share storage with which arguments, gradients of the
//! leaves, and refusals. Where PyTorch's compiled result differs from its
//! eager one (`eager_result`), eager is the reference.

#[path = "oracle/cases.rs"]
mod cases;
#[path = "oracle/cases_extra.rs"]
mod cases_extra;
#[path = "oracle/cases_new_user.rs"]
mod cases_new_user;
#[path = "oracle/cases_new_user_b.rs"]
mod cases_new_user_b;
#[path = "oracle/cases_new_user_c.rs"]
mod cases_new_user_c;
#[path = "oracle/cases_new_user_d.rs"]
mod cases_new_user_d;
#[path = "oracle/cases_new_user_e.rs"]
mod cases_new_user_e;
#[path = "oracle/cases_new_user_f.rs"]
mod cases_new_user_f;
#[path = "oracle/cases_new_user_g.rs"]
mod cases_new_user_g;
#[path = "oracle/cases_new_user_h.rs"]
mod cases_new_user_h;
#[path = "oracle/cases_new_user_i.rs"]
mod cases_new_user_i;
#[path = "oracle/cases_new_user_j.rs"]
mod cases_new_user_j;
#[path = "oracle/cases_ops_a.rs"]
mod cases_ops_a;
#[path = "oracle/cases_ops_b.rs"]
mod cases_ops_b;
#[path = "oracle/common.rs"]
mod common;

use aot_ir::ParamType;
use aot_runtime::{Arg, CompiledFn, Device, Result, Tensor};
use common::{close, lets, parse_arg, shape_of, ArgExpr};
use serde_json::Value;
use std::collections::HashMap;

fn apply(t: &Tensor, e: &ArgExpr) -> Result<Tensor> {
    let mut t = t.clone();
    for m in &e.methods {
        let i = |k: usize| m.ints.get(k).copied().unwrap_or(0);
        let usizes = |k: usize| m.lists.get(k).map(|l| l.iter().map(|&x| x as usize).collect::<Vec<_>>()).unwrap_or_default();
        t = match m.name.as_str() {
            "copy" => t.copy()?,
            "view" => t.view(m.lists.first().map(Vec::as_slice).unwrap_or(&[]))?,
            "t" => t.t()?,
            "transpose" => t.transpose(i(0), i(1))?,
            "select" => t.select(i(0), i(1))?,
            "narrow" => t.narrow(i(0), i(1), i(2))?,
            "unsqueeze" => t.unsqueeze(i(0))?,
            "detach" => t.detach()?,
            "diagonal" => t.diagonal()?,
            "as_strided" => t.as_strided(&usizes(0), &usizes(1), i(0) as usize)?,
            other => panic!("unknown arg method {other}"),
        };
    }
    Ok(t)
}

/// Leaves, lets and arguments of a call.
struct Inputs {
    leaves: Vec<(String, Tensor)>,
    args: Vec<Option<Tensor>>,
    scalars: Vec<f64>,
}

fn build(call: &Value) -> Result<Inputs> {
    let mut env: HashMap<String, Tensor> = HashMap::new();
    let mut leaves = Vec::new();
    for (k, l) in call["leaves"].as_array().into_iter().flatten().enumerate() {
        let shape = shape_of(&l["shape"]);
        // index and mask leaves hold explicit values of their dtype
        let given: Option<Vec<f64>> = l["values"].as_array().map(|v| v.iter().filter_map(Value::as_f64).collect());
        let t = match (l["dtype"].as_str(), given) {
            (Some("i64"), Some(v)) => Tensor::from_vec(v.iter().map(|&x| x as i64).collect(), &shape, &Device::Cpu)?,
            (Some("bool"), Some(v)) => Tensor::from_vec(v.iter().map(|&x| x != 0.0).collect(), &shape, &Device::Cpu)?,
            (_, Some(v)) => Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), &shape, &Device::Cpu)?,
            _ => Tensor::from_vec(common::leaf_values(k, shape.iter().product()), &shape, &Device::Cpu)?,
        };
        let t = t.requires_grad_(l["requires_grad"].as_bool() == Some(true))?;
        let name = l["name"].as_str().unwrap_or_default().to_string();
        env.insert(name.clone(), t.clone());
        leaves.push((name, t));
    }
    for (name, expr) in lets(call) {
        let e = parse_arg(&expr);
        let t = apply(&env[&e.root], &e)?;
        env.insert(name, t);
    }
    let mut args = Vec::new();
    let mut scalars = Vec::new();
    for a in call["args"].as_array().into_iter().flatten() {
        match a.as_str() {
            Some(expr) => {
                let e = parse_arg(expr);
                args.push(Some(apply(&env[&e.root], &e)?));
                scalars.push(0.0);
            }
            None => {
                args.push(None);
                scalars.push(a.as_f64().or(a.as_bool().map(f64::from)).unwrap_or(0.0));
            }
        }
    }
    Ok(Inputs { leaves, args, scalars })
}

fn call_args<'a>(f: &CompiledFn, inp: &'a Inputs) -> Vec<Arg<'a>> {
    inp.args
        .iter()
        .zip(&inp.scalars)
        .zip(&f.graph().params)
        .map(|((t, &s), p)| match (t, p.ty) {
            (Some(t), _) => Arg::from(t),
            (None, ParamType::I64 | ParamType::Usize) => Arg::I64(s as i64),
            (None, ParamType::Bool) => Arg::Bool(s != 0.0),
            (None, _) => Arg::F64(s),
        })
        .collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.detach().and_then(|d| d.to_dtype(aot_runtime::DType::F32)).and_then(|d| d.to_vec::<f32>()).unwrap_or_default()
}

fn compare_values(what: &str, ours: &[f32], golden: &Value, out: &mut Vec<String>) {
    let g: Vec<f64> = golden.as_array().map(|a| a.iter().map(common::golden).collect()).unwrap_or_default();
    if ours.len() != g.len() || ours.iter().zip(&g).any(|(a, b)| !close(*a, *b)) {
        out.push(format!("{what}: ours {ours:?}, PyTorch {g:?}"));
    }
}

/// Runs one call and compares it with the expected record; returns the mismatches.
fn check_call(f: &CompiledFn, call: &Value) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let inp = build(call)?;
    let args = call_args(f, &inp);
    let result = f.run_eager(&args);
    if let Some(err) = call["eager_error"].as_str() {
        // PyTorch fails in the call, or in the backward of the oracle's loss
        // (a tensor saved for the backward was written in place).
        let failed = match &result {
            Err(_) => true,
            Ok(o) => match oracle_loss(o) {
                Err(_) => true,
                Ok(Some(l)) => l.backward().is_err(),
                Ok(None) => false,
            },
        };
        if !failed {
            out.push(format!("PyTorch refuses ({err}) but the call and its backward succeeded"));
        }
        return Ok(out);
    }
    let expected = if call["eager_result"].is_object() { &call["eager_result"] } else { &call["result"] };
    let outs = match result {
        Ok(o) => o,
        Err(e) => {
            out.push(format!("failed: {e}"));
            return Ok(out);
        }
    };
    let golden_outs = expected["outputs"].as_array().cloned().unwrap_or_default();
    if outs.len() != golden_outs.len() {
        out.push(format!("{} outputs, PyTorch {}", outs.len(), golden_outs.len()));
        return Ok(out);
    }
    for (i, (o, g)) in outs.iter().zip(&golden_outs).enumerate() {
        if o.shape() != shape_of(&g["shape"]) {
            out.push(format!("output {i} shape {:?}, PyTorch {}", o.shape(), g["shape"]));
        }
        compare_values(&format!("output {i}"), &values(o), &g["values"], &mut out);
        if Some(o.requires_grad()) != g["requires_grad"].as_bool() {
            out.push(format!("output {i} requires_grad {}, PyTorch {}", o.requires_grad(), g["requires_grad"]));
        }
        let shares: Vec<usize> =
            inp.args.iter().enumerate().filter(|(_, a)| a.as_ref().is_some_and(|a| a.shares_storage_with(o))).map(|(j, _)| j).collect();
        let golden_shares: Vec<usize> = expected["output_shares_storage_with_arg"][i]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_u64().map(|v| v as usize)).collect())
            .unwrap_or_default();
        if shares != golden_shares {
            out.push(format!("output {i} shares storage with args {shares:?}, PyTorch {golden_shares:?}"));
        }
    }
    for (j, (a, g)) in inp.args.iter().zip(expected["args_after"].as_array().into_iter().flatten()).enumerate() {
        if let Some(a) = a {
            if a.shape() != shape_of(&g["shape"]) {
                out.push(format!("arg {j} shape after {:?}, PyTorch {}", a.shape(), g["shape"]));
            }
            compare_values(&format!("arg {j} after"), &values(a), &g["values"], &mut out);
        }
    }
    if let Some(loss) = oracle_loss(&outs)? {
        loss.backward()?;
        for (name, leaf) in &inp.leaves {
            let golden = &expected["grads"][name];
            match (leaf.grad(), golden.is_null()) {
                (None, true) => {}
                (Some(g), false) => compare_values(&format!("grad of {name}"), &values(&g), golden, &mut out),
                (ours, _) => out.push(format!("grad of {name}: ours {:?}, PyTorch {golden}", ours.map(|g| values(&g)))),
            }
        }
    }
    Ok(out)
}

/// The oracle's loss, `sum_i sum(out_i * w_i)` over the outputs that
/// require grad; `None` when none does.
fn oracle_loss(outs: &[Tensor]) -> Result<Option<Tensor>> {
    let mut loss: Option<Tensor> = None;
    for (i, o) in outs.iter().enumerate().filter(|(_, o)| o.requires_grad()) {
        let w = Tensor::from_vec(common::leaf_values(100 + i, o.numel()), &o.shape(), &Device::Cpu)?;
        let term = o.mul(&w)?.sum()?;
        loss = Some(match loss {
            Some(l) => l.add(&term)?,
            None => term,
        });
    }
    Ok(loss)
}

#[test]
fn eager_reference_matches_pytorch() {
    check_eager(&common::load(), cases::all());
}

/// The same over the project's own corpus (tests/oracle/extra.json).
#[test]
fn extra_eager_reference_matches_pytorch() {
    check_eager(&common::load_extra(), cases_extra::all());
}

/// The same over the corpus of the ops for models, part A (tests/oracle/ops_a.json).
#[test]
fn ops_a_eager_reference_matches_pytorch() {
    check_eager(&common::load_ops_a(), cases_ops_a::all());
}

/// The same over the corpus of the indexing ops and `cat`/`stack` (tests/oracle/ops_b.json).
#[test]
fn ops_b_eager_reference_matches_pytorch() {
    check_eager(&common::load_ops_b(), cases_ops_b::all());
}

fn check_eager(oracle: &[Value], fns: Vec<(&'static str, &'static CompiledFn)>) {
    assert_eq!(fns.len(), oracle.len(), "run `python3 tests/oracle/gen_cases.py`");
    let mut failures = Vec::new();
    let mut checked = 0;
    for ((name, compiled), case) in fns.into_iter().zip(oracle) {
        for call in case["calls"].as_array().into_iter().flatten() {
            checked += 1;
            let label = call["label"].as_str().unwrap_or("?");
            match check_call(compiled, call) {
                Ok(problems) => failures.extend(problems.into_iter().map(|p| format!("{name} [{label}]: {p}"))),
                Err(e) => failures.push(format!("{name} [{label}]: could not build the call: {e}")),
            }
        }
    }
    println!("ran {checked} oracle calls on the eager reference");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// The same over the programs written as a new user would (tests/oracle/new_user.json).
#[test]
fn new_user_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user(), cases_new_user::all());
}

/// The same over the second new-user corpus (tests/oracle/new_user_b.json).
#[test]
fn new_user_b_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_b(), cases_new_user_b::all());
}

/// The same over the third new-user corpus, about dtypes (tests/oracle/new_user_c.json).
#[test]
fn new_user_c_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_c(), cases_new_user_c::all());
}

/// The same over the fourth new-user corpus (tests/oracle/new_user_d.json).
#[test]
fn new_user_d_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_d(), cases_new_user_d::all());
}

/// The same over the fifth new-user corpus (tests/oracle/new_user_e.json).
#[test]
fn new_user_e_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_e(), cases_new_user_e::all());
}

/// The same over the sixth new-user corpus (tests/oracle/new_user_f.json).
#[test]
fn new_user_f_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_f(), cases_new_user_f::all());
}

/// The same over the seventh new-user corpus (tests/oracle/new_user_g.json).
#[test]
fn new_user_g_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_g(), cases_new_user_g::all());
}

/// The same over the eighth new-user corpus (tests/oracle/new_user_h.json).
#[test]
fn new_user_h_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_h(), cases_new_user_h::all());
}

/// The same over the ninth new-user corpus (tests/oracle/new_user_i.json).
#[test]
fn new_user_i_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_i(), cases_new_user_i::all());
}

/// The same over the tenth new-user corpus (tests/oracle/new_user_j.json).
#[test]
fn new_user_j_eager_reference_matches_pytorch() {
    check_eager(&common::load_new_user_j(), cases_new_user_j::all());
}
