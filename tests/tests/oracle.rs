//! The PyTorch oracle, run through `#[aot_fn]`: for every call of every
//! case, the metadata `explain()` reports, and the outputs, arguments after
//! the call, storage sharing and gradients of the call itself.
//!
//! Seven corpora, checked the same way: the public one (`oracle/public.json`,
//! tests `oracle_*`), the project's own (`oracle/extra.json`, generated
//! from `oracle/cases_extra.py`, tests `extra_oracle_*`), that of the ops
//! for models (`oracle/ops_a.json`, from `oracle/cases_ops_a.py`, tests
//! `ops_a_oracle_*`) and that of the indexing ops and `cat`/`stack`
//! (`oracle/ops_b.json`, from `oracle/cases_ops_b.py`, tests
//! `ops_b_oracle_*`), and programs written as a new user would write
//! them (`oracle/new_user.json`, from `oracle/cases_new_user.py`, tests
//! `new_user_oracle_*`; a second such corpus combining the ops for models
//! is `oracle/new_user_b.json`, from `oracle/cases_new_user_b.py`, tests
//! `new_user_b_oracle_*`, and a third about dtypes, `oracle/new_user_c.json`,
//! from `oracle/cases_new_user_c.py`, tests `new_user_c_oracle_*`; a fourth,
//! `oracle/new_user_d.json` from `oracle/cases_new_user_d.py`, of model
//! blocks, losses and optimizers, tests `new_user_d_oracle_*`; a fifth,
//! `oracle/new_user_e.json` from `oracle/cases_new_user_e.py`, of the
//! semantics' edges, tests `new_user_e_oracle_*`; a sixth,
//! `oracle/new_user_f.json` from `oracle/cases_new_user_f.py`, of mistakes
//! PyTorch refuses, dtype promotion and empty tensors, tests
//! `new_user_f_oracle_*`; a seventh, `oracle/new_user_g.json` from
//! `oracle/cases_new_user_g.py`, of the DSL's call-time values, tests
//! `new_user_g_oracle_*`; an eighth, `oracle/new_user_h.json` from
//! `oracle/cases_new_user_h.py`, of in-place writes while gradients are
//! recorded, tests `new_user_h_oracle_*`; a ninth, `oracle/new_user_i.json`
//! from `oracle/cases_new_user_i.py`, of loops over call-time bounds, tests
//! `new_user_i_oracle_*`; a tenth, `oracle/new_user_j.json` from
//! `oracle/cases_new_user_j.py`, of the model ops with views and in-place
//! writes, tests `new_user_j_oracle_*`).
//!
//! Failures are collected and reported together, one line per mismatch.

#[path = "../../ui-tests/tests/oracle/cases.rs"]
mod cases;
#[path = "../../ui-tests/tests/oracle/cases_extra.rs"]
mod cases_extra;
#[path = "../../ui-tests/tests/oracle/cases_new_user.rs"]
mod cases_new_user;
#[path = "../../ui-tests/tests/oracle/cases_new_user_b.rs"]
mod cases_new_user_b;
#[path = "../../ui-tests/tests/oracle/cases_new_user_c.rs"]
mod cases_new_user_c;
#[path = "../../ui-tests/tests/oracle/cases_new_user_d.rs"]
mod cases_new_user_d;
#[path = "../../ui-tests/tests/oracle/cases_new_user_e.rs"]
mod cases_new_user_e;
#[path = "../../ui-tests/tests/oracle/cases_new_user_f.rs"]
mod cases_new_user_f;
#[path = "../../ui-tests/tests/oracle/cases_new_user_g.rs"]
mod cases_new_user_g;
#[path = "../../ui-tests/tests/oracle/cases_new_user_h.rs"]
mod cases_new_user_h;
#[path = "../../ui-tests/tests/oracle/cases_new_user_i.rs"]
mod cases_new_user_i;
#[path = "../../ui-tests/tests/oracle/cases_new_user_j.rs"]
mod cases_new_user_j;
#[path = "../../ui-tests/tests/oracle/cases_ops_a.rs"]
mod cases_ops_a;
#[path = "../../ui-tests/tests/oracle/cases_ops_b.rs"]
mod cases_ops_b;

use aot_runtime::{CompiledFn, Tensor};
use aot_tests::{
    build_args, close, load_cases, load_extra_cases, load_new_user_b_cases, load_new_user_c_cases, load_new_user_cases,
    load_new_user_d_cases, load_new_user_e_cases, load_new_user_f_cases, load_new_user_g_cases, load_new_user_h_cases,
    load_new_user_i_cases, load_new_user_j_cases, load_ops_a_cases, load_ops_b_cases, normalize_meta, oracle_loss, to_args, values, Call,
    CallArg, Case,
};
use serde_json::Value;

const TOL: f64 = 1e-3;

/// Compares `explain()` with PyTorch's decisions, all of it but
/// `traced_tangents` (checked by `oracle_traced_tangents`); returns mismatches.
fn check_metadata(f: &CompiledFn, call: &Call) -> Vec<String> {
    check_metadata_impl(f, call, false)
}

/// Compares only the `traced_tangents` of every metadata record.
fn check_tangents(f: &CompiledFn, call: &Call) -> Vec<String> {
    check_metadata_impl(f, call, true)
}

fn check_metadata_impl(f: &CompiledFn, call: &Call, tangents: bool) -> Vec<String> {
    let mut errs = vec![];
    // Where PyTorch's AOTAutograd gave up, there is no metadata to compare.
    if call.error.is_some() || call.fw_metadata.is_none() {
        return errs;
    }
    let (_, args) = match build_args(call) {
        Ok(a) => a,
        Err(e) => return vec![format!("building args: {e}")],
    };
    let report = match f.explain(&to_args(&args)) {
        Ok(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        Err(e) => return vec![format!("explain failed: {e}")],
    };
    let mut got_meta = report["fw_metadata"].clone();
    let mut want_meta = call.fw_metadata.clone().unwrap_or(Value::Null);
    normalize_meta(&mut got_meta);
    normalize_meta(&mut want_meta);
    diff("fw_metadata", &got_meta, &want_meta, &mut errs);
    let want = |v: &Option<Value>| v.clone().unwrap_or(Value::Null);
    diff("dedupe", &report["dedupe"], &want(&call.dedupe), &mut errs);
    diff("synthetic_base_info", &report["synthetic_base_info"], &want(&call.synthetic_base_info), &mut errs);
    diff("synthetic_base", &report["synthetic_base"], &want(&call.synthetic_base), &mut errs);
    errs.retain(|e| e.contains("traced_tangents") == tangents);
    errs
}

/// Structural diff of two JSON values, naming each differing path.
fn diff(path: &str, got: &Value, want: &Value, errs: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => diff(&p, gv, wv, errs),
                    None if k == "mutations_hidden_from_autograd" => {}
                    None => errs.push(format!("{p}: missing (want {wv})")),
                }
            }
            for k in g.keys() {
                if !w.contains_key(k) && k != "mutations_hidden_from_autograd" {
                    errs.push(format!("{path}.{k}: unexpected"));
                }
            }
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                diff(&format!("{path}[{i}]"), gv, wv, errs);
            }
        }
        _ if got == want => {}
        _ => errs.push(format!("{path}: got {got}, want {want}")),
    }
}

/// Runs the call and compares with what eager PyTorch (or its correct
/// compiled result) computed; returns mismatches.
fn check_result(f: &CompiledFn, call: &Call) -> Vec<String> {
    let mut errs = vec![];
    let (leaves, args) = match build_args(call) {
        Ok(a) => a,
        Err(e) => return vec![format!("building args: {e}")],
    };
    let outs = f.__call(&to_args(&args));
    if call.eager_error.is_some() {
        // PyTorch fails in the call, or in the backward of the oracle's
        // loss (a tensor saved for the backward was written in place).
        let failed = match &outs {
            Err(_) => true,
            Ok(o) => match oracle_loss(o) {
                Err(_) => true,
                Ok(Some(l)) => l.backward().is_err(),
                Ok(None) => false,
            },
        };
        if !failed {
            errs.push(format!("expected an error like PyTorch's `{}`, got Ok", call.eager_error.as_deref().unwrap_or("")));
        }
        return errs;
    }
    let Some(want) = call.expected() else { return errs };
    let outs: Vec<Tensor> = match outs {
        Ok(o) => o,
        Err(e) => return vec![format!("call failed: {e}")],
    };
    if outs.len() != want.outputs.len() {
        return vec![format!("{} outputs, want {}", outs.len(), want.outputs.len())];
    }
    for (i, (o, w)) in outs.iter().zip(&want.outputs).enumerate() {
        if let Some(s) = &w.shape {
            if &o.shape() != s {
                errs.push(format!("output {i}: shape {:?}, want {s:?}", o.shape()));
            }
        }
        if let Some(v) = &w.values {
            if !close(&values(o), v, TOL) {
                errs.push(format!("output {i}: values {:?}, want {v:?}", values(o)));
            }
        }
        if let Some(rg) = w.requires_grad {
            if o.requires_grad() != rg {
                errs.push(format!("output {i}: requires_grad {}, want {rg}", o.requires_grad()));
            }
        }
        let shares: Vec<usize> =
            args.iter().enumerate().filter(|(_, a)| matches!(a, CallArg::Tensor(t) if t.shares_storage_with(o))).map(|(k, _)| k).collect();
        if let Some(ws) = want.output_shares_storage_with_arg.get(i) {
            if &shares != ws {
                errs.push(format!("output {i}: shares storage with args {shares:?}, want {ws:?}"));
            }
        }
    }
    for (k, (a, w)) in args.iter().zip(&want.args_after).enumerate() {
        if let CallArg::Tensor(t) = a {
            if let Some(s) = &w.shape {
                if &t.shape() != s {
                    errs.push(format!("arg {k} after: shape {:?}, want {s:?}", t.shape()));
                }
            }
            if let Some(v) = &w.values {
                if !close(&values(t), v, TOL) {
                    errs.push(format!("arg {k} after: values {:?}, want {v:?}", values(t)));
                }
            }
        }
    }
    if !want.grads.is_empty() {
        match oracle_loss(&outs) {
            Ok(Some(loss)) => {
                if let Err(e) = loss.backward() {
                    errs.push(format!("backward failed: {e}"));
                    return errs;
                }
            }
            Ok(None) => errs.push("no output requires grad, but PyTorch computed gradients".into()),
            Err(e) => errs.push(format!("loss failed: {e}")),
        }
        for (name, wg) in &want.grads {
            let leaf = leaves.iter().find(|(n, _)| n == name).map(|(_, t)| t);
            let got = leaf.and_then(|t| t.grad()).map(|g| values(&g));
            match (got, wg) {
                (Some(g), Some(w)) if close(&g, w, TOL) => {}
                (None, None) => {}
                (g, w) => errs.push(format!("grad of {name}: {g:?}, want {w:?}")),
            }
        }
    }
    errs
}

/// A corpus and its compiled functions, in the same order.
type Corpus = (Vec<Case>, Vec<(&'static str, &'static CompiledFn)>);

fn public() -> Corpus {
    (load_cases(), cases::all())
}

fn extra() -> Corpus {
    (load_extra_cases(), cases_extra::all())
}

fn ops_a() -> Corpus {
    (load_ops_a_cases(), cases_ops_a::all())
}

fn ops_b() -> Corpus {
    (load_ops_b_cases(), cases_ops_b::all())
}

fn new_user() -> Corpus {
    (load_new_user_cases(), cases_new_user::all())
}

fn new_user_b() -> Corpus {
    (load_new_user_b_cases(), cases_new_user_b::all())
}

fn new_user_c() -> Corpus {
    (load_new_user_c_cases(), cases_new_user_c::all())
}

fn new_user_d() -> Corpus {
    (load_new_user_d_cases(), cases_new_user_d::all())
}

fn new_user_e() -> Corpus {
    (load_new_user_e_cases(), cases_new_user_e::all())
}

fn new_user_f() -> Corpus {
    (load_new_user_f_cases(), cases_new_user_f::all())
}

fn new_user_g() -> Corpus {
    (load_new_user_g_cases(), cases_new_user_g::all())
}

fn new_user_h() -> Corpus {
    (load_new_user_h_cases(), cases_new_user_h::all())
}

fn new_user_i() -> Corpus {
    (load_new_user_i_cases(), cases_new_user_i::all())
}

fn new_user_j() -> Corpus {
    (load_new_user_j_cases(), cases_new_user_j::all())
}

fn run((cases, fns): Corpus, check: fn(&CompiledFn, &Call) -> Vec<String>) -> (usize, Vec<String>) {
    assert_eq!(fns.len(), cases.len(), "the generated cases are stale: rerun tests/oracle/gen_cases.py");
    let mut total = 0;
    let mut failures = vec![];
    for (case, (name, f)) in cases.iter().zip(&fns) {
        assert_eq!(case.name, *name, "the generated cases are stale: rerun tests/oracle/gen_cases.py");
        for call in &case.calls {
            total += 1;
            for e in check(f, call) {
                failures.push(format!("{} [{}]: {e}", case.name, call.label));
            }
        }
    }
    (total, failures)
}

fn report(what: &str, total: usize, failures: &[String]) {
    let failing_calls: std::collections::BTreeSet<&str> = failures.iter().map(|f| f.split(": ").next().unwrap_or("")).collect();
    println!("oracle {what}: {} of {total} calls match", total - failing_calls.len());
    for f in failures {
        println!("  {f}");
    }
    assert!(failures.is_empty(), "{} oracle {what} mismatches (see above)", failures.len());
}

#[test]
fn oracle_results_match_pytorch() {
    let (total, failures) = run(public(), check_result);
    report("results", total, &failures);
}

#[test]
fn oracle_metadata_matches_pytorch() {
    let (total, failures) = run(public(), check_metadata);
    report("metadata", total, &failures);
}

/// `traced_tangents`, with PyTorch's report semantics: present on the
/// metadata the dedupe / synthetic-base wrappers rewrote, empty on a
/// `fw_metadata` that was compiled with directly.
#[test]
fn oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(public(), check_tangents);
    report("traced_tangents", total, &failures);
}

#[test]
fn extra_oracle_results_match_pytorch() {
    let (total, failures) = run(extra(), check_result);
    report("extra results", total, &failures);
}

#[test]
fn extra_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(extra(), check_metadata);
    report("extra metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the project's own corpus.
#[test]
fn extra_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(extra(), check_tangents);
    report("extra traced_tangents", total, &failures);
}

#[test]
fn ops_a_oracle_results_match_pytorch() {
    let (total, failures) = run(ops_a(), check_result);
    report("ops_a results", total, &failures);
}

#[test]
fn ops_a_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(ops_a(), check_metadata);
    report("ops_a metadata", total, &failures);
}

#[test]
fn ops_a_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(ops_a(), check_tangents);
    report("ops_a traced_tangents", total, &failures);
}

#[test]
fn ops_b_oracle_results_match_pytorch() {
    let (total, failures) = run(ops_b(), check_result);
    report("ops_b results", total, &failures);
}

#[test]
fn ops_b_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(ops_b(), check_metadata);
    report("ops_b metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the ops_b corpus.
#[test]
fn ops_b_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(ops_b(), check_tangents);
    report("ops_b traced_tangents", total, &failures);
}

#[test]
fn new_user_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user(), check_result);
    report("new_user results", total, &failures);
}

#[test]
fn new_user_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user(), check_metadata);
    report("new_user metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the new-user corpus.
#[test]
fn new_user_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user(), check_tangents);
    report("new_user traced_tangents", total, &failures);
}

#[test]
fn new_user_b_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_b(), check_result);
    report("new_user_b results", total, &failures);
}

#[test]
fn new_user_b_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_b(), check_metadata);
    report("new_user_b metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the second new-user corpus.
#[test]
fn new_user_b_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_b(), check_tangents);
    report("new_user_b traced_tangents", total, &failures);
}

#[test]
fn new_user_c_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_c(), check_result);
    report("new_user_c results", total, &failures);
}

#[test]
fn new_user_c_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_c(), check_metadata);
    report("new_user_c metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the third new-user corpus.
#[test]
fn new_user_c_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_c(), check_tangents);
    report("new_user_c traced_tangents", total, &failures);
}

#[test]
fn new_user_d_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_d(), check_result);
    report("new_user_d results", total, &failures);
}

#[test]
fn new_user_d_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_d(), check_metadata);
    report("new_user_d metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the fourth new-user corpus.
#[test]
fn new_user_d_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_d(), check_tangents);
    report("new_user_d traced_tangents", total, &failures);
}

#[test]
fn new_user_e_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_e(), check_result);
    report("new_user_e results", total, &failures);
}

#[test]
fn new_user_e_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_e(), check_metadata);
    report("new_user_e metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the fifth new-user corpus.
#[test]
fn new_user_e_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_e(), check_tangents);
    report("new_user_e traced_tangents", total, &failures);
}

#[test]
fn new_user_f_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_f(), check_result);
    report("new_user_f results", total, &failures);
}

#[test]
fn new_user_f_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_f(), check_metadata);
    report("new_user_f metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the sixth new-user corpus.
#[test]
fn new_user_f_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_f(), check_tangents);
    report("new_user_f traced_tangents", total, &failures);
}

#[test]
fn new_user_g_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_g(), check_result);
    report("new_user_g results", total, &failures);
}

#[test]
fn new_user_g_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_g(), check_metadata);
    report("new_user_g metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the seventh new-user corpus.
#[test]
fn new_user_g_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_g(), check_tangents);
    report("new_user_g traced_tangents", total, &failures);
}

#[test]
fn new_user_h_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_h(), check_result);
    report("new_user_h results", total, &failures);
}

#[test]
fn new_user_h_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_h(), check_metadata);
    report("new_user_h metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the eighth new-user corpus.
#[test]
fn new_user_h_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_h(), check_tangents);
    report("new_user_h traced_tangents", total, &failures);
}

#[test]
fn new_user_i_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_i(), check_result);
    report("new_user_i results", total, &failures);
}

#[test]
fn new_user_i_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_i(), check_metadata);
    report("new_user_i metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the ninth new-user corpus.
#[test]
fn new_user_i_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_i(), check_tangents);
    report("new_user_i traced_tangents", total, &failures);
}

#[test]
fn new_user_j_oracle_results_match_pytorch() {
    let (total, failures) = run(new_user_j(), check_result);
    report("new_user_j results", total, &failures);
}

#[test]
fn new_user_j_oracle_metadata_matches_pytorch() {
    let (total, failures) = run(new_user_j(), check_metadata);
    report("new_user_j metadata", total, &failures);
}

/// As `oracle_traced_tangents_match_pytorch`, on the tenth new-user corpus.
#[test]
fn new_user_j_oracle_traced_tangents_match_pytorch() {
    let (total, failures) = run(new_user_j(), check_tangents);
    report("new_user_j traced_tangents", total, &failures);
}
