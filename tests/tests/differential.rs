//! Differential tests: compiled execution (`CompiledFn::__call`) must equal
//! the eager reference (`CompiledFn::run_eager`) for any program and any
//! alias pattern of the arguments.
//!
//! Each case draws a random program ([`aot_tests::progen`]), skips it when
//! the compile-time refusals or `CompiledFn::new` reject it (counted: most
//! programs must be accepted), then draws one or two alias patterns
//! ([`aot_tests::alias`]) and calls the same `CompiledFn` with them (pattern
//! 1, pattern 2, pattern 1 again: the second and third calls exercise the
//! compiled path's cache and its guards). For every call, two independent
//! materialisations of the pattern go one through `run_eager`, the other
//! through `__call`, and must agree on:
//! - success or failure; a compiled failure must name the function and
//!   leave every input bit-identical (values, geometry, version counter);
//! - the outputs: dtype, shape, stride, storage offset, values, requires_grad,
//!   is_leaf, and whether they are views and of which argument's base;
//! - the arguments after the call: values, shape, stride, storage offset,
//!   the whole storage's contents, and whether the version counter moved;
//! - storage sharing and identity between every output and every argument
//!   and between outputs;
//! - gradients of the argument leaves, when an output requires grad.
//!
//! Failures are shrunk by proptest and print the program listing, the alias
//! patterns and the command that replays the case:
//! `AOT_DIFF_PROPERTY=compiled_matches_eager AOT_DIFF_REPLAY="1,2,3" cargo
//! test -p aot-tests --test differential replay -- --ignored --nocapture`.
//! `--nocapture` also shows the statistics of a run: acceptance ratio, op and
//! alias-pattern coverage, the most common (shared) failures.
//!
//! Environment: `AOT_DIFF_CASES=N` sets the number of cases of each
//! property. Two checks are on by default and can be switched off to look
//! past them: `AOT_DIFF_TRANSACTIONAL=0` only counts failing compiled calls
//! that changed their inputs; `AOT_DIFF_STRICT=0` only counts panics of the
//! eager reference and `explain()` panicking or failing where the call
//! succeeds (they are not differences between the two paths). A panic of
//! the compiled path is always a failure.

use aot_ir::analysis::refusals;
use aot_ir::graph::args::{f, i, ints, t};
use aot_ir::{GraphBuilder, OpKind, ReturnKind};
use aot_runtime::{CompiledFn, DType, Tensor};
use aot_tests::alias::{gen_template, ArgSpec, ArgTemplate, Materialised, StorageSpec, TemplateOptions};
use aot_tests::choice::Choices;
use aot_tests::oracle_loss;
use aot_tests::progen::{gen_program, GenOptions, Program, PROGRAM_NAME};
use aot_tests::snapshot::{snapshot_all, values_close, TensorSnapshot};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

// ---------------------------------------------------------------------------
// Statistics

#[derive(Default)]
struct Stats {
    generated: AtomicUsize,
    static_refused: AtomicUsize,
    new_rejected: AtomicUsize,
    accepted: AtomicUsize,
    calls: AtomicUsize,
    both_ok: AtomicUsize,
    both_err: AtomicUsize,
    grads_compared: AtomicUsize,
    not_transactional: AtomicUsize,
    explain_failed_on_ok_call: AtomicUsize,
    explain_panicked: AtomicUsize,
    eager_panicked: AtomicUsize,
    /// How often each op appears in accepted programs.
    ops: Mutex<BTreeMap<&'static str, usize>>,
    /// How often each alias feature appears in the calls' patterns.
    patterns: Mutex<BTreeMap<&'static str, usize>>,
    /// Why calls failed (both paths), by the eager message with digits removed.
    errors: Mutex<BTreeMap<String, usize>>,
    /// Which path the compiled calls took (`CompiledFn::__call_path`).
    paths: Mutex<BTreeMap<String, usize>>,
}

fn count<K: Ord>(m: &Mutex<BTreeMap<K, usize>>, k: K) {
    *m.lock().unwrap_or_else(|e| e.into_inner()).entry(k).or_insert(0) += 1;
}

fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn get(c: &AtomicUsize) -> usize {
    c.load(Ordering::Relaxed)
}

impl Stats {
    fn summary(&self, name: &str, secs: f64) -> String {
        let gen = get(&self.generated).max(1);
        let calls = get(&self.calls).max(1);
        format!(
            "{name}: {} programs generated, {} accepted ({:.1}%; {} refused at compile time, {} rejected by CompiledFn::new); \
             {} calls: {} both Ok ({:.1}%), {} both Err; gradients compared on {}; \
             failing compiled calls that changed their inputs (not transactional): {}; explain() failed on {} successful calls and panicked on {} calls; the eager reference panicked {} times; {:.1} s",
            get(&self.generated),
            get(&self.accepted),
            100.0 * get(&self.accepted) as f64 / gen as f64,
            get(&self.static_refused),
            get(&self.new_rejected),
            get(&self.calls),
            get(&self.both_ok),
            100.0 * get(&self.both_ok) as f64 / calls as f64,
            get(&self.both_err),
            get(&self.grads_compared),
            get(&self.not_transactional),
            get(&self.explain_failed_on_ok_call),
            get(&self.explain_panicked),
            get(&self.eager_panicked),
            secs,
        )
    }

    /// The op and alias-pattern coverage, and the failure reasons.
    fn coverage(&self) -> String {
        let show = |m: &Mutex<BTreeMap<&'static str, usize>>| {
            m.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        };
        let mut errors: Vec<(usize, String)> =
            self.errors.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (*v, k.clone())).collect();
        errors.sort_by(|a, b| b.cmp(a));
        let errors: Vec<String> = errors.iter().take(12).map(|(n, m)| format!("  {n:6} {m}")).collect();
        let paths = self.paths.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| format!("  {v:6} {k}")).collect::<Vec<_>>();
        format!(
            "ops: {}
alias patterns: {}
call paths:
{}
most common failures:
{}",
            show(&self.ops),
            show(&self.patterns),
            paths.join("\n"),
            errors.join("\n")
        )
    }
}

/// A check that is on unless the variable is set to `0`.
fn env_flag_on(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| v != "0")
}

// ---------------------------------------------------------------------------
// Comparison of one call

fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-9,
        _ => 1e-4,
    }
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap_or_default()
}

/// Compares two tensors that should be alike (one from each path).
fn compare_tensor(what: &str, e: &Tensor, c: &Tensor, tol: f64, errs: &mut Vec<String>) {
    if e.dtype() != c.dtype() {
        errs.push(format!("{what}: dtype: eager {:?}, compiled {:?}", e.dtype(), c.dtype()));
    }
    if e.shape() != c.shape() {
        errs.push(format!("{what}: shape: eager {:?}, compiled {:?}", e.shape(), c.shape()));
        return;
    }
    if e.stride() != c.stride() {
        errs.push(format!("{what}: stride: eager {:?}, compiled {:?}", e.stride(), c.stride()));
    }
    if e.storage_offset() != c.storage_offset() {
        errs.push(format!("{what}: storage_offset: eager {}, compiled {}", e.storage_offset(), c.storage_offset()));
    }
    let (ev, cv) = (vals(e), vals(c));
    if !values_close(&cv, &ev, tol) {
        errs.push(format!("{what}: values: eager {ev:?}, compiled {cv:?}"));
    }
    if e.requires_grad() != c.requires_grad() {
        errs.push(format!("{what}: requires_grad: eager {}, compiled {}", e.requires_grad(), c.requires_grad()));
    }
    if e.is_leaf() != c.is_leaf() {
        errs.push(format!("{what}: is_leaf: eager {}, compiled {}", e.is_leaf(), c.is_leaf()));
    }
}

/// Whether an output is an autograd view (has a `view_base()`). Which
/// tensor the base is can differ: compiled calls regenerate aliases of
/// inputs from the caller's tensors, while eager may leave them based on a
/// detached alias made inside the call. Only view-ness is compared.
fn base_class(o: &Tensor, _m: &Materialised) -> String {
    match o.view_base() {
        None => "not a view".into(),
        Some(_) => "a view".into(),
    }
}

/// Runs one call both ways and compares everything observable.
fn check_call(f: &CompiledFn, tpl: &ArgTemplate, stats: &Stats) -> Result<(), String> {
    let a = tpl.materialise().map_err(|e| format!("materialising the arguments failed: {e}"))?;
    let b = tpl.materialise().map_err(|e| format!("materialising the arguments failed: {e}"))?;
    let before_a = snapshot_all(&a.tensors);
    let before_b = snapshot_all(&b.tensors);
    // `explain` is not what this test checks, but it must not fail where the
    // call succeeds, and must never panic: both are counted and reported.
    let explained = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.explain(&b.args()))) {
        Ok(r) => r.map(|_| ()).map_err(|e| e.to_string()),
        Err(p) => {
            if strict() {
                return Err(format!("explain() panicked: {}", panic_message(&*p)));
            }
            if get(&stats.explain_panicked) == 0 {
                eprintln!("explain() panicked ({}) on\n{}\nwith\n{tpl}", panic_message(&*p), f.graph());
            }
            bump(&stats.explain_panicked);
            Err("panicked".into())
        }
    };
    bump(&stats.calls);
    let eager = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.run_eager(&a.args()))) {
        Ok(r) => r,
        Err(p) => return eager_panicked(stats, "run_eager", &*p, f, tpl),
    };
    count(&stats.paths, f.__call_path(&b.args()).unwrap_or_else(|e| format!("error: {e}")));
    let compiled = f.__call(&b.args());
    let tol = tol(tpl.dtype);
    for feature in tpl.features() {
        count(&stats.patterns, feature);
    }
    let mut errs = vec![];
    match (eager, compiled) {
        (Err(ee), Err(ce)) => {
            bump(&stats.both_err);
            count(&stats.errors, ee.to_string().chars().filter(|c| !c.is_ascii_digit()).take(140).collect());
            let msg = ce.to_string();
            if !msg.contains(&format!("`{PROGRAM_NAME}`")) {
                errs.push(format!("the compiled error does not name the function: {msg}"));
            }
            let after = snapshot_all(&b.tensors);
            let changed: Vec<String> = before_b
                .iter()
                .zip(&after)
                .enumerate()
                .filter_map(|(j, (x, y))| match (x, y) {
                    (Some(x), Some(y)) => {
                        let d = y.diff(x);
                        (!d.is_empty()).then(|| format!("argument {j}: {}", d.join("; ")))
                    }
                    _ => None,
                })
                .collect();
            if !changed.is_empty() {
                if env_flag_on("AOT_DIFF_TRANSACTIONAL") {
                    errs.push(format!("the failing compiled call ({msg}) changed its inputs: {}", changed.join(" | ")));
                } else {
                    bump(&stats.not_transactional);
                }
            }
        }
        (Ok(_), Err(ce)) => errs.push(format!("eager succeeded, compiled failed: {ce}")),
        (Err(ee), Ok(_)) => errs.push(format!("eager failed ({ee}), compiled succeeded")),
        (Ok(eo), Ok(co)) => {
            bump(&stats.both_ok);
            if let Err(e) = &explained {
                if get(&stats.explain_failed_on_ok_call) == 0 && e != "panicked" {
                    eprintln!("explain() failed ({e}) on a call that succeeds:\n{}\nwith\n{tpl}", f.graph());
                }
                bump(&stats.explain_failed_on_ok_call);
                if strict() {
                    errs.push(format!("explain() failed on a call that succeeds: {e}"));
                }
            }
            compare_ok(f, tpl, &a, &b, &before_a, &before_b, &eo, &co, tol, stats, &mut errs);
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

#[allow(clippy::too_many_arguments)]
fn compare_ok(
    f: &CompiledFn,
    tpl: &ArgTemplate,
    a: &Materialised,
    b: &Materialised,
    _before_a: &[Option<TensorSnapshot>],
    _before_b: &[Option<TensorSnapshot>],
    eo: &[Tensor],
    co: &[Tensor],
    tol: f64,
    stats: &Stats,
    errs: &mut Vec<String>,
) {
    if eo.len() != co.len() {
        errs.push(format!("number of outputs: eager {}, compiled {}", eo.len(), co.len()));
        return;
    }
    for (k, (e, c)) in eo.iter().zip(co).enumerate() {
        compare_tensor(&format!("output {k}"), e, c, tol, errs);
        let (eb, cb) = (base_class(e, a), base_class(c, b));
        if eb != cb {
            errs.push(format!("output {k}: eager output is {eb}, compiled output is {cb}"));
        }
    }
    for (j, (ea, ca)) in a.tensors.iter().zip(&b.tensors).enumerate() {
        let (Some(ea), Some(ca)) = (ea, ca) else { continue };
        let what = format!("argument {j} after the call");
        compare_tensor(&what, ea, ca, tol, errs);
        let (es, cs) = (vals(&ea.storage_as_1d()), vals(&ca.storage_as_1d()));
        if !values_close(&cs, &es, tol) {
            errs.push(format!("{what}: whole storage: eager {es:?}, compiled {cs:?}"));
        }
        // Version counters are not compared: eager bumps them once per
        // in-place op (metadata mutations of internal views included), a
        // compiled call once per mutation applied by its epilogue, as in
        // PyTorch. A failing call must leave them alone (checked above).
    }
    // Sharing and identity: outputs against arguments and storage bases,
    // and outputs against each other.
    let known = |m: &Materialised| -> Vec<Tensor> { m.tensors.iter().flatten().cloned().chain(m.bases.iter().cloned()).collect() };
    let (ka, kb) = (known(a), known(b));
    for k in 0..eo.len() {
        for (j, (x, y)) in ka.iter().zip(&kb).enumerate() {
            let name = if j < a.tensors.iter().flatten().count() { format!("tensor argument #{j}") } else { "a storage base".into() };
            if eo[k].shares_storage_with(x) != co[k].shares_storage_with(y) {
                errs.push(format!(
                    "output {k} shares storage with {name}: eager {}, compiled {}",
                    eo[k].shares_storage_with(x),
                    co[k].shares_storage_with(y)
                ));
            }
            if eo[k].same_tensor(x) != co[k].same_tensor(y) {
                errs.push(format!("output {k} is {name}: eager {}, compiled {}", eo[k].same_tensor(x), co[k].same_tensor(y)));
            }
        }
        for l in 0..eo.len() {
            if l != k && eo[k].shares_storage_with(&eo[l]) != co[k].shares_storage_with(&co[l]) {
                errs.push(format!(
                    "outputs {k} and {l} share storage: eager {}, compiled {}",
                    eo[k].shares_storage_with(&eo[l]),
                    co[k].shares_storage_with(&co[l])
                ));
            }
            if l != k && eo[k].same_tensor(&eo[l]) != co[k].same_tensor(&co[l]) {
                errs.push(format!(
                    "outputs {k} and {l} are one tensor: eager {}, compiled {}",
                    eo[k].same_tensor(&eo[l]),
                    co[k].same_tensor(&co[l])
                ));
            }
        }
    }
    if !errs.is_empty() || !eo.iter().any(Tensor::requires_grad) {
        return;
    }
    // Gradients: the oracle's loss over the outputs that require grad.
    bump(&stats.grads_compared);
    let backward = |outs: &[Tensor]| -> Result<(), String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match oracle_loss(outs).map_err(|e| e.to_string())? {
            Some(l) => l.backward().map_err(|e| e.to_string()),
            None => Ok(()),
        }))
        .map_err(|p| format!("panicked: {}", panic_message(&*p)))?
    };
    let eager = backward(eo);
    if let Err(e) = &eager {
        if let Some(m) = e.strip_prefix("panicked: ") {
            // A bug of the eager reference: reported, not compared.
            if let Err(e) = eager_panicked(stats, "the eager backward", &m.to_string(), f, tpl) {
                errs.push(e);
            }
            return;
        }
    }
    match (eager, backward(co)) {
        (Ok(()), Ok(())) => {
            for (k, (x, y)) in a.bases.iter().zip(&b.bases).enumerate() {
                match (x.grad(), y.grad()) {
                    (None, None) => {}
                    (Some(gx), Some(gy)) => {
                        let (vx, vy) = (vals(&gx), vals(&gy));
                        if gx.shape() != gy.shape() || !values_close(&vy, &vx, tol) {
                            errs.push(format!("grad of storage base s{k}: eager {vx:?}, compiled {vy:?}"));
                        }
                    }
                    (gx, gy) => errs.push(format!("grad of storage base s{k}: eager {:?}, compiled {:?}", gx.is_some(), gy.is_some())),
                }
            }
        }
        (Err(_), Err(_)) => {}
        // Functionalization removes the hazard eager's version counters
        // guard against (a saved value modified in place later): compiled
        // backward succeeds there, as in PyTorch's AOTAutograd.
        (Err(x), Ok(())) if x.contains("modified by an inplace operation") => {}
        (x, y) => errs.push(format!("backward: eager {x:?}, compiled {y:?}")),
    }
}

// ---------------------------------------------------------------------------
// One random case

#[derive(Clone, Debug)]
struct CaseOptions {
    /// The property's name, for replays.
    property: &'static str,
    gen: GenOptions,
    /// Chance in percent that the case's storages may require grad at all.
    grad_cases_percent: u32,
}

/// The options of each property, by name.
fn options(property: &str) -> Option<CaseOptions> {
    Some(match property {
        "compiled_matches_eager" => CaseOptions {
            property: "compiled_matches_eager",
            gen: GenOptions { no_grad_regions: false, ..GenOptions::default() },
            grad_cases_percent: 0,
        },
        "compiled_matches_eager_with_autograd_and_no_grad" => {
            CaseOptions { property: "compiled_matches_eager_with_autograd_and_no_grad", gen: GenOptions::default(), grad_cases_percent: 60 }
        }
        "compiled_matches_eager_nightly" => CaseOptions {
            property: "compiled_matches_eager_nightly",
            gen: GenOptions { max_steps: 14, ..GenOptions::default() },
            grad_cases_percent: 30,
        },
        _ => return None,
    })
}

fn replay_line(property: &str, choices: &[u32]) -> String {
    let list: Vec<String> = choices.iter().map(u32::to_string).collect();
    format!(
        "AOT_DIFF_PROPERTY={property} AOT_DIFF_REPLAY=\"{}\" cargo test -p aot-tests --test differential replay -- --ignored --nocapture",
        list.join(",")
    )
}

fn describe(prog: &Program, tpls: &[ArgTemplate], property: &str, choices: &[u32]) -> String {
    let mut s = format!("program ({:?}):\n{}\nparameters: {:?}\n", prog.dtype, prog.graph, prog.params);
    for (k, t) in tpls.iter().enumerate() {
        s += &format!("alias pattern {}:\n{t}", k + 1);
    }
    s + "replay: " + &replay_line(property, choices)
}

/// Runs one case; `Err(reject)` when the program is refused before any call.
fn run_case(choices: &[u32], opts: &CaseOptions, stats: &Stats) -> Result<(), TestCaseError> {
    let mut c = Choices::new(choices);
    let prog = gen_program(&mut c, &opts.gen);
    bump(&stats.generated);
    if !refusals::check(&prog.graph).is_empty() {
        bump(&stats.static_refused);
        return Err(TestCaseError::reject("refused at compile time"));
    }
    let f = match CompiledFn::new(prog.graph.clone()) {
        Ok(f) => f,
        Err(_) => {
            bump(&stats.new_rejected);
            return Err(TestCaseError::reject("rejected by CompiledFn::new"));
        }
    };
    bump(&stats.accepted);
    for node in &prog.graph.nodes {
        count(&stats.ops, node.op.name());
    }
    let grad = opts.grad_cases_percent > 0 && c.chance(opts.grad_cases_percent, 100);
    let topts = TemplateOptions { requires_grad_percent: if grad { 40 } else { 0 } };
    let mut tpls = vec![gen_template(&mut c, &prog.params, prog.dtype, &topts)];
    if c.chance(1, 3) {
        tpls.push(gen_template(&mut c, &prog.params, prog.dtype, &topts));
    }
    // Pattern 1, pattern 2, pattern 1 again, on one compiled function.
    let order: &[usize] = if tpls.len() == 2 { &[0, 1, 0] } else { &[0] };
    for (n, &k) in order.iter().enumerate() {
        // A panic (in the runtime or the analyses) is a failure too, reported with the case.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_call(&f, &tpls[k], stats)))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(&*p))));
        if let Err(msg) = result {
            return Err(TestCaseError::fail(format!(
                "compiled differs from eager on call {} (alias pattern {}):\n{msg}\n\n{}",
                n + 1,
                k + 1,
                describe(&prog, &tpls, opts.property, choices)
            )));
        }
    }
    Ok(())
}

/// A choice vector; it prints as the command that replays it.
#[derive(Clone)]
struct Stream(&'static str, Vec<u32>);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&replay_line(self.0, &self.1))
    }
}

/// AOT_DIFF_STRICT=1: panics of the eager reference and `explain()` failures
/// fail the test (by default they are counted, and the first is printed).
fn strict() -> bool {
    env_flag_on("AOT_DIFF_STRICT")
}

/// Records a panic of the eager reference (a bug there, not a difference):
/// printed the first time, counted, and a failure in strict mode.
fn eager_panicked(stats: &Stats, what: &str, p: &(dyn std::any::Any + Send), f: &CompiledFn, tpl: &ArgTemplate) -> Result<(), String> {
    let msg = panic_message(p);
    if strict() {
        return Err(format!("{what} panicked: {msg}"));
    }
    if get(&stats.eager_panicked) == 0 {
        eprintln!("{what} panicked ({msg}) on\n{}\nwith\n{tpl}", f.graph());
    }
    bump(&stats.eager_panicked);
    Ok(())
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "(no message)".into())
}

fn cases_from_env(default: u32) -> u32 {
    std::env::var("AOT_DIFF_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run_property(name: &'static str, cases: u32) {
    let opts = options(name).unwrap_or_else(|| panic!("no options for {name}"));
    let config = Config {
        cases,
        max_global_rejects: cases.saturating_mul(2).saturating_add(1000),
        failure_persistence: None,
        max_shrink_iters: 100_000,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let stats = Stats::default();
    let start = Instant::now();
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(any::<u32>(), 0..512).prop_map(move |v| Stream(name, v));
    let result = runner.run(&strategy, |choices| run_case(&choices.1, &opts, &stats));
    let summary = stats.summary(name, start.elapsed().as_secs_f64());
    eprintln!("{summary}\n{}", stats.coverage());
    if let Err(e) = result {
        panic!("{e}\n{summary}");
    }
    let accepted = get(&stats.accepted) as f64 / get(&stats.generated).max(1) as f64;
    assert!(accepted > 0.8, "too few generated programs are accepted: {summary}");
    let ok = get(&stats.both_ok) as f64 / get(&stats.calls).max(1) as f64;
    assert!(ok > 0.5, "too few calls succeed, the generator needs work: {summary}");
    if cases >= 2000 {
        // The generator must keep covering every op and alias pattern.
        let ops = stats.ops.lock().unwrap_or_else(|e| e.into_inner());
        let missing: Vec<&str> = GENERATED_OPS.iter().copied().filter(|op| !ops.contains_key(op)).collect();
        assert!(missing.is_empty(), "ops never generated: {missing:?}");
        let patterns = stats.patterns.lock().unwrap_or_else(|e| e.into_inner());
        let mut want = ALIAS_FEATURES.to_vec();
        if opts.grad_cases_percent > 0 {
            want.push("requires_grad");
        }
        let missing: Vec<&str> = want.into_iter().filter(|f| !patterns.contains_key(f)).collect();
        assert!(missing.is_empty(), "alias patterns never generated: {missing:?}");
    }
}

/// Every op the program generator emits.
const GENERATED_OPS: &[&str] = &[
    "abs",
    "add",
    "add_",
    "as_strided",
    "as_strided_",
    "clamp_",
    "contiguous",
    "copy",
    "copy_",
    "detach",
    "diagonal",
    "div",
    "div_",
    "exp",
    "exp_",
    "expand",
    "fill_",
    "full_like",
    "matmul",
    "maximum",
    "mean",
    "mean_dim",
    "minimum",
    "mul",
    "mul_",
    "narrow",
    "neg",
    "neg_",
    "ones_like",
    "permute",
    "relu",
    "relu_",
    "reshape",
    "select",
    "sigmoid",
    "sigmoid_",
    "sin",
    "slice",
    "squeeze",
    "squeeze_",
    "sub",
    "sub_",
    "sum",
    "sum_dim",
    "t",
    "t_",
    "tanh",
    "transpose",
    "transpose_",
    "unsqueeze",
    "unsqueeze_",
    "view",
    "zero_",
    "zeros_like",
];

/// Every alias feature of the template generator (see `ArgTemplate::features`).
const ALIAS_FEATURES: &[&str] = &[
    "a base and a view of it",
    "disjoint views of one storage",
    "independent contiguous tensors only",
    "non-contiguous input",
    "overlapping views of one storage",
    "same tensor twice",
    "scalar",
    "storage offset > 0",
];

// ---------------------------------------------------------------------------
// The properties: 6,000 + 4,000 cases in the normal run.

#[test]
fn compiled_matches_eager() {
    run_property("compiled_matches_eager", cases_from_env(6_000));
}

#[test]
fn compiled_matches_eager_with_autograd_and_no_grad() {
    run_property("compiled_matches_eager_with_autograd_and_no_grad", cases_from_env(4_000));
}

/// The nightly run: longer programs, every feature, many more cases.
#[test]
#[ignore = "nightly: 200,000 cases (AOT_DIFF_CASES=N to change)"]
fn compiled_matches_eager_nightly() {
    run_property("compiled_matches_eager_nightly", cases_from_env(200_000));
}

/// Replays one case: `AOT_DIFF_PROPERTY=name AOT_DIFF_REPLAY="1,2,3"`, as
/// printed by a failure.
#[test]
#[ignore = "replays AOT_DIFF_REPLAY"]
fn replay() {
    let Ok(list) = std::env::var("AOT_DIFF_REPLAY") else {
        eprintln!("set AOT_DIFF_REPLAY to a comma-separated choice vector (and AOT_DIFF_PROPERTY to the property)");
        return;
    };
    let property = std::env::var("AOT_DIFF_PROPERTY").unwrap_or_else(|_| "compiled_matches_eager".into());
    let opts = options(&property).unwrap_or_else(|| panic!("unknown property {property}"));
    let choices: Vec<u32> = list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let stats = Stats::default();
    let prog = gen_program(&mut Choices::new(&choices), &opts.gen);
    eprintln!("program:\n{}", prog.graph);
    let result = run_case(&choices, &opts, &stats);
    eprintln!("{}", stats.summary("replay", 0.0));
    match result {
        Err(TestCaseError::Fail(msg)) => panic!("{msg}"),
        Err(TestCaseError::Reject(why)) => eprintln!("the program is not run: {why}"),
        Ok(()) => eprintln!("compiled matches eager"),
    }
}

// ---------------------------------------------------------------------------
// Fixed cases: the alias patterns that matter most, written out.

fn storage(len: usize, base_shape: Option<Vec<usize>>, seed: usize) -> StorageSpec {
    StorageSpec { len, base_shape, requires_grad: false, seed }
}

fn view(storage: usize, size: &[usize], stride: &[usize], offset: usize) -> ArgSpec {
    ArgSpec::View { storage, size: size.to_vec(), stride: stride.to_vec(), offset }
}

#[test]
fn fixed_cases() {
    let mut cases: Vec<(&str, aot_ir::Graph, Vec<ArgTemplate>)> = vec![];
    let tpl = |storages: Vec<StorageSpec>, args: Vec<ArgSpec>| ArgTemplate { dtype: DType::F64, storages, args };

    // a.add_(b); return a -- with a and b the same tensor, and two overlapping rows.
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", true);
    let x = b.tensor("b", false);
    b.call(OpKind::AddInplace, a, vec![t(x)]);
    cases.push((
        "add_ through a duplicate",
        b.finish(vec![a], ReturnKind::Single),
        vec![
            tpl(vec![storage(4, Some(vec![4]), 0)], vec![ArgSpec::Base(0), ArgSpec::Same(0)]),
            tpl(vec![storage(5, None, 0)], vec![view(0, &[4], &[1], 0), view(0, &[4], &[1], 1)]),
            tpl(vec![storage(8, Some(vec![2, 4]), 0)], vec![view(0, &[4], &[1], 0), view(0, &[4], &[1], 4)]),
        ],
    ));

    // a.mul_(2); b.add_(1); return (a + b, b.view(-1)) -- overlapping slices of one base.
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", true);
    let y = b.tensor("b", true);
    b.call(OpKind::MulInplace, a, vec![f(2.0)]);
    b.call(OpKind::AddInplace, y, vec![f(1.0)]);
    let s = b.call(OpKind::Add, a, vec![t(y)]);
    let v = b.call(OpKind::View, y, vec![ints(&[-1])]);
    cases.push((
        "two mutated overlapping slices",
        b.finish(vec![s, v], ReturnKind::Tuple(2)),
        vec![
            tpl(vec![storage(9, Some(vec![3, 3]), 0)], vec![view(0, &[2, 3], &[3, 1], 0), view(0, &[2, 3], &[3, 1], 3)]),
            tpl(vec![storage(12, Some(vec![4, 3]), 0)], vec![view(0, &[2, 3], &[3, 1], 0), view(0, &[2, 3], &[3, 1], 6)]),
            tpl(vec![storage(6, Some(vec![2, 3]), 0)], vec![ArgSpec::Base(0), ArgSpec::Same(0)]),
        ],
    ));

    // a.t_(); a.mul_(3); return (a.narrow(0, 0, 1), a) -- a transposed, offset input.
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", true);
    b.call(OpKind::TInplace, a, vec![]);
    b.call(OpKind::MulInplace, a, vec![f(3.0)]);
    let n = b.call(OpKind::Narrow, a, vec![i(0), i(0), i(1)]);
    cases.push((
        "metadata then data mutation of an input",
        b.finish(vec![n, a], ReturnKind::Tuple(2)),
        vec![
            tpl(vec![storage(8, None, 0)], vec![view(0, &[2, 3], &[1, 2], 1)]),
            tpl(vec![storage(6, Some(vec![2, 3]), 0)], vec![ArgSpec::Base(0)]),
        ],
    ));

    // v = a.select(0, 1); v.copy_(b); return (v, a) -- b a row of a.
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", true);
    let y = b.tensor("b", false);
    let v = b.call(OpKind::Select, a, vec![i(0), i(1)]);
    b.call(OpKind::CopyInplace, v, vec![t(y)]);
    cases.push((
        "copy_ of a row into another row of the same base",
        b.finish(vec![v, a], ReturnKind::Tuple(2)),
        vec![
            tpl(vec![storage(6, Some(vec![2, 3]), 0)], vec![ArgSpec::Base(0), view(0, &[3], &[1], 0)]),
            tpl(vec![storage(6, Some(vec![2, 3]), 0)], vec![ArgSpec::Base(0), view(0, &[3], &[2], 0)]),
            tpl(vec![storage(6, Some(vec![2, 3]), 0), storage(3, Some(vec![3]), 1)], vec![ArgSpec::Base(0), ArgSpec::Base(1)]),
        ],
    ));

    // t = a.exp(); w = t.narrow(0, 0, 1); w.zero_(); t.unsqueeze_(0); return (t, w, w)
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", false);
    let e = b.call(OpKind::Exp, a, vec![]);
    let w = b.call(OpKind::Narrow, e, vec![i(0), i(0), i(1)]);
    b.call(OpKind::Zero, w, vec![]);
    b.call(OpKind::UnsqueezeInplace, e, vec![i(0)]);
    cases.push((
        "mutated intermediate and its view, returned twice",
        b.finish(vec![e, w, w], ReturnKind::Tuple(3)),
        vec![tpl(vec![storage(7, None, 0)], vec![view(0, &[2, 2], &[2, 1], 3)])],
    ));

    // a.as_strided_([2], [2], 1); a.neg_(); b.fill_(7); return (a, b) -- b a view of a's storage.
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", true);
    let y = b.tensor("b", true);
    b.call(OpKind::AsStridedInplace, a, vec![ints(&[2]), ints(&[2]), i(1)]);
    b.call(OpKind::NegInplace, a, vec![]);
    b.call(OpKind::Fill, y, vec![f(7.0)]);
    cases.push((
        "as_strided_ of an input that aliases another",
        b.finish(vec![a, y], ReturnKind::Tuple(2)),
        vec![
            tpl(vec![storage(6, Some(vec![6]), 0)], vec![ArgSpec::Base(0), view(0, &[2], &[1], 4)]),
            tpl(vec![storage(6, Some(vec![6]), 0)], vec![ArgSpec::Base(0), view(0, &[2], &[1], 3)]),
            tpl(vec![storage(6, Some(vec![6]), 0)], vec![ArgSpec::Base(0), ArgSpec::Same(0)]),
        ],
    ));

    // A failing call after a mutation: both paths must fail.
    let mut b = GraphBuilder::new(PROGRAM_NAME);
    let a = b.tensor("a", true);
    b.call(OpKind::AddInplace, a, vec![f(1.0)]);
    let bad = b.call(OpKind::View, a, vec![ints(&[7])]);
    cases.push((
        "a failing view after a mutation",
        b.finish(vec![bad], ReturnKind::Single),
        vec![tpl(vec![storage(4, Some(vec![2, 2]), 0)], vec![ArgSpec::Base(0)])],
    ));

    let stats = Stats::default();
    let mut failures = vec![];
    for (name, graph, tpls) in cases {
        let listing = graph.to_string();
        let f = CompiledFn::new(graph.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for tpl in &tpls {
            if let Err(msg) = check_call(&f, tpl, &stats) {
                failures.push(format!("{name}:\n{msg}\nprogram:\n{listing}\nalias pattern:\n{tpl}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!("{}", stats.summary("fixed_cases", 0.0));
}
