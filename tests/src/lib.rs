//! Helpers for the oracle tests: the golden data's format, its leaf values,
//! its argument expressions, and tolerant comparisons.
//!
//! The golden data (`oracle/public.json`, and the project's own
//! `oracle/extra.json`) is PyTorch's own record of what AOTAutograd decided
//! and computed on a corpus of functions; see `oracle/README.md`.
//!
//! For the differential tests (compiled execution against the eager
//! reference): [`choice`] (replayable random choices), [`progen`] (random
//! programs in the IR), [`alias`] (argument templates with alias patterns)
//! [`snapshot`] (bit-exact snapshots, alias-preserving deep copies) and
//! [`struct_args`] (tensor parameters taken as the fields of a struct).

pub mod alias;
pub mod choice;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod diff;
pub mod diff_property;
pub mod models;
pub mod progen;
pub mod snapshot;
pub mod struct_args;

use aot_runtime::{DType, Device, Result, Tensor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::HashMap;

/// One function of the corpus.
#[derive(Debug, Deserialize)]
pub struct Case {
    pub name: String,
    pub python: String,
    pub rust: String,
    pub calls: Vec<Call>,
}

/// One call of a function, with what PyTorch decided and computed.
#[derive(Debug, Deserialize)]
pub struct Call {
    pub label: String,
    pub leaves: Vec<Leaf>,
    #[serde(default)]
    pub lets: Vec<(String, String)>,
    pub args: Vec<Value>,
    pub fw_metadata: Option<Value>,
    pub dedupe: Option<Value>,
    pub synthetic_base_info: Option<Value>,
    pub synthetic_base: Option<Value>,
    pub result: Option<CallResult>,
    pub error: Option<String>,
    pub eager_error: Option<String>,
    pub eager_result: Option<CallResult>,
    pub note: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Leaf {
    pub name: String,
    pub shape: Vec<usize>,
    #[serde(default)]
    pub requires_grad: bool,
    /// `"i64"` or `"bool"` for index and mask leaves, which hold `values`
    /// (float leaves hold [`leaf_values`] unless `values` is given).
    #[serde(default)]
    pub dtype: Option<String>,
    #[serde(default)]
    pub values: Option<Vec<f64>>,
}

/// A recorded value: a number, or one of the strings `"nan"`, `"inf"` and
/// `"-inf"` that stand for the values JSON cannot write.
#[derive(Deserialize)]
#[serde(untagged)]
enum Golden {
    Number(f64),
    Named(String),
}

impl Golden {
    fn value(self) -> f64 {
        match self {
            Golden::Number(x) => x,
            Golden::Named(s) => match s.as_str() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => f64::NAN,
            },
        }
    }
}

/// A recorded list of values (numbers, or the strings that stand for NaN
/// and the infinities); `None` for JSON's `null` or anything else.
pub fn golden_list(v: &Value) -> Option<Vec<f64>> {
    Option::<Vec<Golden>>::deserialize(v).ok().flatten().map(|v| v.into_iter().map(Golden::value).collect())
}

fn golden_values<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Vec<f64>>, D::Error> {
    let v: Option<Vec<Golden>> = Option::deserialize(d)?;
    Ok(v.map(|v| v.into_iter().map(Golden::value).collect()))
}

fn golden_grads<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<HashMap<String, Option<Vec<f64>>>, D::Error> {
    let m: HashMap<String, Option<Vec<Golden>>> = HashMap::deserialize(d)?;
    Ok(m.into_iter().map(|(k, v)| (k, v.map(|v| v.into_iter().map(Golden::value).collect()))).collect())
}

#[derive(Debug, Deserialize, Clone)]
pub struct TensorRec {
    pub shape: Option<Vec<usize>>,
    #[serde(default, deserialize_with = "golden_values")]
    pub values: Option<Vec<f64>>,
    pub requires_grad: Option<bool>,
    pub scalar: Option<f64>,
}

#[derive(Debug, Deserialize, Clone)]
pub struct CallResult {
    pub outputs: Vec<TensorRec>,
    pub output_shares_storage_with_arg: Vec<Vec<usize>>,
    pub args_after: Vec<TensorRec>,
    #[serde(default, deserialize_with = "golden_grads")]
    pub grads: HashMap<String, Option<Vec<f64>>>,
}

impl Call {
    /// What the call must produce: eager PyTorch's result where PyTorch's
    /// AOTAutograd was wrong or gave up, else the compiled result.
    pub fn expected(&self) -> Option<&CallResult> {
        self.eager_result.as_ref().or(self.result.as_ref())
    }
}

/// The oracle corpus kept in the repository.
pub fn load_cases() -> Vec<Case> {
    let text = include_str!("../oracle/public.json");
    serde_json::from_str(text).expect("oracle/public.json parses")
}

/// The project's own corpus (`oracle/extra.json`, generated from
/// `oracle/cases_extra.py` by `oracle/gen.py`), in the same format.
pub fn load_extra_cases() -> Vec<Case> {
    let text = include_str!("../oracle/extra.json");
    serde_json::from_str(text).expect("oracle/extra.json parses")
}

/// The corpus of the ops for models, part A (`oracle/ops_a.json`,
/// generated from `oracle/cases_ops_a.py`), in the same format.
pub fn load_ops_a_cases() -> Vec<Case> {
    let text = include_str!("../oracle/ops_a.json");
    serde_json::from_str(text).expect("oracle/ops_a.json parses")
}

/// The corpus of the indexing ops and `cat`/`stack` (`oracle/ops_b.json`,
/// generated from `oracle/cases_ops_b.py`), in the same format.
pub fn load_ops_b_cases() -> Vec<Case> {
    let text = include_str!("../oracle/ops_b.json");
    serde_json::from_str(text).expect("oracle/ops_b.json parses")
}

/// The corpus of programs written as a new user would write them
/// (`oracle/new_user.json`, generated from `oracle/cases_new_user.py`).
pub fn load_new_user_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user.json");
    serde_json::from_str(text).expect("oracle/new_user.json parses")
}

/// The second corpus of programs written as a new user would write them,
/// combining the ops for models (`oracle/new_user_b.json`, generated from
/// `oracle/cases_new_user_b.py`).
pub fn load_new_user_b_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_b.json");
    serde_json::from_str(text).expect("oracle/new_user_b.json parses")
}

/// The third corpus of programs written as a new user would write them,
/// about dtypes (`oracle/new_user_c.json`, generated from
/// `oracle/cases_new_user_c.py`).
pub fn load_new_user_c_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_c.json");
    serde_json::from_str(text).expect("oracle/new_user_c.json parses")
}

/// The fourth new-user corpus: model blocks, losses and optimizers written
/// as a new user would (`oracle/new_user_d.json`, generated from
/// `oracle/cases_new_user_d.py`).
pub fn load_new_user_d_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_d.json");
    serde_json::from_str(text).expect("oracle/new_user_d.json parses")
}

/// The fifth new-user corpus: the edges of the semantics (ties, infinite
/// gradients, writes through views, aliased outputs, matmul ranks;
/// `oracle/new_user_e.json`, generated from `oracle/cases_new_user_e.py`).
pub fn load_new_user_e_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_e.json");
    serde_json::from_str(text).expect("oracle/new_user_e.json parses")
}

/// The sixth new-user corpus: mistakes PyTorch refuses, dtype promotion,
/// empty tensors (`oracle/new_user_f.json`, generated from
/// `oracle/cases_new_user_f.py`).
pub fn load_new_user_f_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_f.json");
    serde_json::from_str(text).expect("oracle/new_user_f.json parses")
}

/// The seventh new-user corpus: the DSL's call-time values (bool switches, integer steps, sizes, constants) (`oracle/new_user_g.json`,
/// generated from `oracle/cases_new_user_g.py`).
pub fn load_new_user_g_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_g.json");
    serde_json::from_str(text).expect("oracle/new_user_g.json parses")
}

/// The eighth new-user corpus: in-place writes while gradients are recorded (`oracle/new_user_h.json`,
/// generated from `oracle/cases_new_user_h.py`).
pub fn load_new_user_h_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_h.json");
    serde_json::from_str(text).expect("oracle/new_user_h.json parses")
}

/// The ninth new-user corpus: loops over call-time bounds (`oracle/new_user_i.json`,
/// generated from `oracle/cases_new_user_i.py`).
pub fn load_new_user_i_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_i.json");
    serde_json::from_str(text).expect("oracle/new_user_i.json parses")
}

/// The tenth new-user corpus: the model ops combined with views, aliasing and in-place writes (`oracle/new_user_j.json`,
/// generated from `oracle/cases_new_user_j.py`).
pub fn load_new_user_j_cases() -> Vec<Case> {
    let text = include_str!("../oracle/new_user_j.json");
    serde_json::from_str(text).expect("oracle/new_user_j.json parses")
}

/// The device the suites put their arguments on: `AOT_TEST_DEVICE=cuda`
/// (with the `cuda` feature; `AOT_CUDA_SIM=1` simulates a GPU) runs them
/// on `Device::Cuda(0)`, anything else on the CPU.
pub fn test_device() -> Device {
    match std::env::var("AOT_TEST_DEVICE").as_deref() {
        Ok("cuda") => Device::Cuda(0),
        _ => Device::Cpu,
    }
}

/// Leaf `k`'s values: `sin(0.37 i + 0.71 k + 0.1)` in f64, stored as f32.
pub fn leaf_values(k: usize, numel: usize) -> Vec<f32> {
    (0..numel).map(|i| (0.37 * i as f64 + 0.71 * k as f64 + 0.1).sin() as f32).collect()
}

/// Fresh leaves for a call, by name.
pub fn make_leaves(leaves: &[Leaf]) -> Result<Vec<(String, Tensor)>> {
    let mut out = vec![];
    for (k, l) in leaves.iter().enumerate() {
        let n = l.shape.iter().product();
        let dev = test_device();
        let t = match (l.dtype.as_deref(), &l.values) {
            (Some("i64"), Some(v)) => Tensor::from_vec(v.iter().map(|&x| x as i64).collect(), &l.shape, &dev)?,
            (Some("bool"), Some(v)) => Tensor::from_vec(v.iter().map(|&x| x != 0.0).collect(), &l.shape, &dev)?,
            (_, Some(v)) => Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), &l.shape, &dev)?,
            _ => Tensor::from_vec(leaf_values(k, n), &l.shape, &dev)?,
        };
        if l.requires_grad {
            t.requires_grad_(true)?;
        }
        out.push((l.name.clone(), t));
    }
    Ok(out)
}

fn ints(s: &str) -> Vec<i64> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '-')).filter(|p| !p.is_empty() && *p != "-").filter_map(|p| p.parse().ok()).collect()
}

/// Evaluates `NAME(.method(args))*` over `env` (the README's expression language).
pub fn eval_expr(expr: &str, env: &HashMap<String, Tensor>) -> std::result::Result<Tensor, String> {
    let name_end = expr.find('.').unwrap_or(expr.len());
    let name = &expr[..name_end];
    let mut t = env.get(name).cloned().ok_or_else(|| format!("unknown name {name}"))?;
    let mut rest = &expr[name_end..];
    while let Some(r) = rest.strip_prefix('.') {
        let open = r.find('(').ok_or("missing (")?;
        let method = &r[..open];
        // arguments may hold brackets but never parentheses
        let close = r[open..].find(')').ok_or("missing )")? + open;
        let args = &r[open + 1..close];
        let v = ints(args);
        let e = |e: aot_runtime::AotError| e.to_string();
        t = match method {
            "copy" => t.copy().map_err(e)?,
            "view" => t.view(&v).map_err(e)?,
            "t" => t.t().map_err(e)?,
            "transpose" => t.transpose(v[0], v[1]).map_err(e)?,
            "select" => t.select(v[0], v[1]).map_err(e)?,
            "narrow" => t.narrow(v[0], v[1], v[2]).map_err(e)?,
            "unsqueeze" => t.unsqueeze(v[0]).map_err(e)?,
            "detach" => t.detach().map_err(e)?,
            "diagonal" => t.diagonal().map_err(e)?,
            "as_strided" => {
                let (a, b) = args.split_once("],").ok_or("as_strided args")?;
                let (b, c) = b.split_once(']').ok_or("as_strided args")?;
                let sizes: Vec<usize> = ints(a).into_iter().map(|x| x as usize).collect();
                let strides: Vec<usize> = ints(b).into_iter().map(|x| x as usize).collect();
                let off = ints(c).first().copied().unwrap_or(0) as usize;
                t.as_strided(&sizes, &strides, off).map_err(e)?
            }
            m => return Err(format!("unknown method {m}")),
        };
        rest = &r[close + 1..];
    }
    Ok(t)
}

/// An argument of a call: a tensor, a number (JSON's `2.5`), an integer
/// (JSON's `3`, which a float parameter also takes) or a `bool`.
#[derive(Clone, Debug)]
pub enum CallArg {
    Tensor(Tensor),
    Number(f64),
    Int(i64),
    Bool(bool),
}

/// The arguments as a compiled function takes them.
pub fn to_args(args: &[CallArg]) -> Vec<aot_runtime::Arg<'_>> {
    args.iter()
        .map(|a| match a {
            CallArg::Tensor(t) => aot_runtime::Arg::from(t),
            CallArg::Number(n) => aot_runtime::Arg::from(*n),
            CallArg::Int(n) => aot_runtime::Arg::from(*n),
            CallArg::Bool(b) => aot_runtime::Arg::from(*b),
        })
        .collect()
}

/// A call's leaves by name, and its arguments.
pub type BuiltCall = (Vec<(String, Tensor)>, Vec<CallArg>);

/// Builds a call's leaves, lets and arguments.
pub fn build_args(call: &Call) -> std::result::Result<BuiltCall, String> {
    let leaves = make_leaves(&call.leaves).map_err(|e| e.to_string())?;
    let mut env: HashMap<String, Tensor> = leaves.iter().cloned().collect();
    for (name, expr) in &call.lets {
        let t = eval_expr(expr, &env)?;
        env.insert(name.clone(), t);
    }
    let mut args = vec![];
    for a in &call.args {
        match a {
            Value::String(s) => args.push(CallArg::Tensor(eval_expr(s, &env)?)),
            Value::Number(n) => args.push(match n.as_i64() {
                Some(i) => CallArg::Int(i),
                None => CallArg::Number(n.as_f64().unwrap_or(0.0)),
            }),
            Value::Bool(b) => args.push(CallArg::Bool(*b)),
            other => return Err(format!("unsupported arg {other}")),
        }
    }
    Ok((leaves, args))
}

/// Compares a tensor with a recorded one (`TensorRec`'s JSON: its values,
/// and its shape when recorded) within `1e-4`; a mismatch is pushed to
/// `errs`, naming `what`.
pub fn check_record(what: &str, got: &Tensor, want: &Value, errs: &mut Vec<String>) {
    let rec: TensorRec = match serde_json::from_value(want.clone()) {
        Ok(r) => r,
        Err(e) => return errs.push(format!("{what}: the record does not parse ({e})")),
    };
    let want = rec.values.unwrap_or_default();
    let got_v = values(got);
    if rec.shape.as_deref().is_some_and(|s| s != got.shape()) || !close(&got_v, &want, 1e-4) {
        errs.push(format!("{what}: ours {:?} {got_v:?}, PyTorch {:?} {want:?}", got.shape(), rec.shape));
    }
}

/// Runs `check` on every case of a golden document of PyTorch's
/// (`{"cases": [..]}`, each with `name` and `matches_eager`), expecting
/// `count` cases (else `regen` says how to regenerate them), and panics
/// listing every mismatch.
pub fn check_golden_cases(doc: &str, count: usize, regen: &str, check: impl Fn(&Value) -> Result<Vec<String>>) {
    let doc: Value = serde_json::from_str(doc).expect("the golden document parses");
    let cases = doc["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), count, "{regen}");
    let mut failures = vec![];
    for case in cases {
        assert_eq!(case["matches_eager"], true, "PyTorch's compiled and eager calls differ on {}", case["name"]);
        match check(case) {
            Ok(errs) => failures.extend(errs.into_iter().map(|e| format!("{}: {e}", case["name"]))),
            Err(e) => failures.push(format!("{}: the call failed: {e}", case["name"])),
        }
    }
    assert!(failures.is_empty(), "{} mismatches with PyTorch:\n{}", failures.len(), failures.join("\n"));
}

/// `|a - b| <= tol * (1 + |b|)`, elementwise; NaN equals NaN, and an
/// infinity only itself.
pub fn close(got: &[f64], want: &[f64], tol: f64) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs()))
}

/// The oracle's loss: `sum_i sum(out_i * w_i)` over outputs that require grad,
/// with `w_i` the leaf formula at `k = 100 + i`.
pub fn oracle_loss(outs: &[Tensor]) -> Result<Option<Tensor>> {
    let mut loss: Option<Tensor> = None;
    for (i, o) in outs.iter().enumerate() {
        if !o.requires_grad() {
            continue;
        }
        let w = Tensor::from_vec(leaf_values(100 + i, o.numel()), &o.shape(), &o.device())?.to_dtype(o.dtype())?;
        let term = o.mul(&w)?.sum()?;
        loss = Some(match loss {
            Some(l) => l.add(&term)?,
            None => term,
        });
    }
    Ok(loss)
}

/// Values of a tensor as f64, row-major.
pub fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap_or_default()
}

/// Removes keys the oracle says to ignore: `mutations_hidden_from_autograd`
/// on inputs that are not mutated at all (PyTorch reports `true` there).
pub fn normalize_meta(meta: &mut Value) {
    let Some(inputs) = meta.get_mut("input_info").and_then(|v| v.as_array_mut()) else { return };
    for inp in inputs {
        let mutated = inp.get("mutates_data").and_then(Value::as_bool).unwrap_or(false)
            || inp.get("mutates_metadata").and_then(Value::as_bool).unwrap_or(false);
        if !mutated {
            if let Some(o) = inp.as_object_mut() {
                o.remove("mutations_hidden_from_autograd");
            }
        }
    }
}

/// f32 is the oracle's dtype.
pub const ORACLE_DTYPE: DType = DType::F32;
