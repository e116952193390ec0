//! Reading the PyTorch oracle (tests/oracle/public.json, and the project's
//! own tests/oracle/extra.json and ops_a.json): the cases, and
//! the argument expressions of its calls (`x.copy()`, `p.view([-1])`, ...).

#![allow(dead_code)]

use serde_json::Value;

/// The oracle, as committed in the repository.
pub fn load() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/public.json"))
}

/// The project's own corpus (tests/oracle/extra.json), in the same format.
pub fn load_extra() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/extra.json"))
}

/// The corpus of the ops for models, part A (tests/oracle/ops_a.json).
pub fn load_ops_a() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/ops_a.json"))
}

/// The corpus of the indexing ops and `cat`/`stack` (tests/oracle/ops_b.json).
pub fn load_ops_b() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/ops_b.json"))
}

/// The corpus of programs written as a new user would (tests/oracle/new_user.json).
pub fn load_new_user() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user.json"))
}

/// The second new-user corpus, combining the ops for models
/// (tests/oracle/new_user_b.json).
pub fn load_new_user_b() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_b.json"))
}

/// The third new-user corpus, about dtypes (tests/oracle/new_user_c.json).
pub fn load_new_user_c() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_c.json"))
}

/// The fourth new-user corpus, of model blocks, losses and optimizers
/// (tests/oracle/new_user_d.json).
pub fn load_new_user_d() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_d.json"))
}

/// The fifth new-user corpus, of the semantics' edges
/// (tests/oracle/new_user_e.json).
pub fn load_new_user_e() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_e.json"))
}

/// The sixth new-user corpus, of mistakes PyTorch refuses, dtype promotion
/// and empty tensors (tests/oracle/new_user_f.json).
pub fn load_new_user_f() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_f.json"))
}

/// The seventh new-user corpus, of the DSL's call-time values
/// (tests/oracle/new_user_g.json).
pub fn load_new_user_g() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_g.json"))
}

/// The eighth new-user corpus, of in-place writes while gradients are recorded
/// (tests/oracle/new_user_h.json).
pub fn load_new_user_h() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_h.json"))
}

/// The ninth new-user corpus, of loops over call-time bounds
/// (tests/oracle/new_user_i.json).
pub fn load_new_user_i() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_i.json"))
}

/// The tenth new-user corpus, of the model ops with views and in-place writes
/// (tests/oracle/new_user_j.json).
pub fn load_new_user_j() -> Vec<Value> {
    load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oracle/new_user_j.json"))
}

fn load_file(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    match serde_json::from_str(&text) {
        Ok(Value::Array(cases)) => cases,
        other => panic!("{path}: expected a list of cases, got {other:?}"),
    }
}

/// One method of an argument expression, with its integer arguments
/// (`as_strided` keeps its two lists and offset flattened in `lists`/`ints`).
#[derive(Clone, Debug, PartialEq)]
pub struct Method {
    pub name: String,
    pub ints: Vec<i64>,
    pub lists: Vec<Vec<i64>>,
}

/// `NAME(.method(args))*`.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgExpr {
    pub root: String,
    pub methods: Vec<Method>,
}

pub fn parse_arg(expr: &str) -> ArgExpr {
    let root_end = expr.find('.').unwrap_or(expr.len());
    let root = expr[..root_end].to_string();
    let mut methods = Vec::new();
    let mut rest = &expr[root_end..];
    while let Some(r) = rest.strip_prefix('.') {
        let open = r.find('(').unwrap_or_else(|| panic!("bad arg expression {expr}"));
        let name = r[..open].to_string();
        // Arguments never nest parentheses; lists use brackets.
        let close = r[open..].find(')').map(|c| c + open).unwrap_or_else(|| panic!("bad arg expression {expr}"));
        let inner = &r[open + 1..close];
        let mut lists = Vec::new();
        let mut ints = Vec::new();
        let mut s = inner;
        while !s.trim().is_empty() {
            let t = s.trim_start().trim_start_matches(',').trim_start();
            if let Some(body) = t.strip_prefix('[') {
                let end = body.find(']').unwrap_or_else(|| panic!("bad list in {expr}"));
                lists.push(numbers(&body[..end]));
                s = &body[end + 1..];
            } else {
                let end = t.find(',').unwrap_or(t.len());
                ints.extend(numbers(&t[..end]));
                s = &t[end..];
            }
        }
        methods.push(Method { name, ints, lists });
        rest = &r[close + 1..];
    }
    ArgExpr { root, methods }
}

fn numbers(s: &str) -> Vec<i64> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(|x| x.parse().unwrap_or_else(|_| panic!("bad integer {x}"))).collect()
}

/// The leaf a name stands for, and the methods applied to it, with `lets` substituted.
pub fn resolve(expr: &str, lets: &[(String, String)]) -> ArgExpr {
    let parsed = parse_arg(expr);
    match lets.iter().find(|(n, _)| *n == parsed.root) {
        Some((_, inner)) => {
            let mut base = resolve(inner, lets);
            base.methods.extend(parsed.methods);
            base
        }
        None => parsed,
    }
}

pub fn lets(call: &Value) -> Vec<(String, String)> {
    call["lets"]
        .as_array()
        .map(|l| l.iter().map(|p| (p[0].as_str().unwrap_or_default().to_string(), p[1].as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// `sin(0.37*i + 0.71*k + 0.1)` in f64, stored as f32: the oracle's values for leaf `k`.
pub fn leaf_values(k: usize, numel: usize) -> Vec<f32> {
    (0..numel).map(|i| (0.37 * i as f64 + 0.71 * k as f64 + 0.1).sin() as f32).collect()
}

pub fn shape_of(v: &Value) -> Vec<usize> {
    v.as_array().map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0) as usize).collect()).unwrap_or_default()
}

/// Relative closeness with the oracle's tolerance.
pub fn close(a: f32, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    f64::from(a) == b || (f64::from(a) - b).abs() <= 1e-3 * (1.0 + b.abs())
}

/// A recorded value: a number, or one of the strings `"nan"`, `"inf"` and
/// `"-inf"` that stand for the values JSON cannot write.
pub fn golden(v: &Value) -> f64 {
    match (v.as_f64(), v.as_str()) {
        (Some(x), _) => x,
        (None, Some("inf")) => f64::INFINITY,
        (None, Some("-inf")) => f64::NEG_INFINITY,
        _ => f64::NAN,
    }
}
