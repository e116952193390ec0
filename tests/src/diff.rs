//! The comparison at the heart of the differential tests and the fuzzers:
//! one call run through the eager reference (`CompiledFn::run_eager`) and
//! through compiled execution (`CompiledFn::__call`) on two independent
//! materialisations of one argument template, and everything observable
//! compared (see `tests/differential.rs` for the list). [`Stats`] counts
//! what a run covered and how calls failed.

use crate::alias::{ArgTemplate, Materialised};
use crate::oracle_loss;
use crate::progen::PROGRAM_NAME;
use crate::snapshot::{snapshot_all, values_close, TensorSnapshot};
use crate::struct_args::StructArgs;
use aot_ir::OpKind;
use aot_runtime::{CompiledFn, DType, Tensor};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
// ---------------------------------------------------------------------------
// Statistics

#[derive(Default)]
pub struct Stats {
    pub generated: AtomicUsize,
    pub static_refused: AtomicUsize,
    pub new_rejected: AtomicUsize,
    pub accepted: AtomicUsize,
    pub calls: AtomicUsize,
    pub both_ok: AtomicUsize,
    pub both_err: AtomicUsize,
    pub grads_compared: AtomicUsize,
    pub not_transactional: AtomicUsize,
    pub explain_failed_on_ok_call: AtomicUsize,
    pub explain_panicked: AtomicUsize,
    pub eager_panicked: AtomicUsize,
    /// Cases that called a second time with the same tensors.
    pub repeated: AtomicUsize,
    /// How often each op appears in accepted programs.
    pub ops: Mutex<BTreeMap<&'static str, usize>>,
    /// How often each alias feature appears in the calls' patterns.
    pub patterns: Mutex<BTreeMap<&'static str, usize>>,
    /// Why calls failed (both paths), by the eager message with digits removed.
    pub errors: Mutex<BTreeMap<String, usize>>,
    /// Which path the compiled calls took (`CompiledFn::call_path`).
    pub paths: Mutex<BTreeMap<String, usize>>,
}

pub fn count<K: Ord>(m: &Mutex<BTreeMap<K, usize>>, k: K) {
    *m.lock().unwrap_or_else(|e| e.into_inner()).entry(k).or_insert(0) += 1;
}

pub fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}

pub fn get(c: &AtomicUsize) -> usize {
    c.load(Ordering::Relaxed)
}

impl Stats {
    pub fn summary(&self, name: &str, secs: f64) -> String {
        let gen = get(&self.generated).max(1);
        let calls = get(&self.calls).max(1);
        format!(
            "{name}: {} programs generated, {} accepted ({:.1}%; {} refused at compile time, {} rejected by CompiledFn::new); \
             {} calls: {} both Ok ({:.1}%), {} both Err; gradients compared on {}; \
             failing compiled calls that changed their inputs (not transactional): {}; explain() failed on {} successful calls and panicked on {} calls; the eager reference panicked {} times; {} cases called twice; {:.1} s",
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
            get(&self.repeated),
            secs,
        )
    }

    /// The op and alias-pattern coverage, and the failure reasons.
    pub fn coverage(&self) -> String {
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
pub fn env_flag_on(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| v != "0")
}

// ---------------------------------------------------------------------------
// Comparison of one call

pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-9,
        DType::F16 | DType::BF16 => 1e-2,
        _ => 1e-4,
    }
}

/// Whether a scalar argument of the call is NaN or infinite, or becomes
/// infinite in one of the call's dtypes (`1e300` in an f32 op; the limits
/// are the largest finite f16, bf16 and f32).
pub fn non_finite_scalars(tpl: &ArgTemplate) -> bool {
    let max = |d: DType| match d {
        DType::F16 => 65504.0,
        DType::BF16 => 3.389_531_389_251_535_5e38,
        DType::F32 => f64::from(f32::MAX),
        _ => f64::MAX,
    };
    let limit = tpl.storages.iter().filter_map(|s| s.dtype).map(max).fold(max(tpl.dtype), f64::min);
    tpl.args.iter().any(|a| matches!(a, crate::alias::ArgSpec::Scalar(v) if !v.is_finite() || v.abs() > limit))
}

/// The tolerance of a call: that of its least precise argument.
pub fn template_tol(tpl: &ArgTemplate) -> f64 {
    tpl.storages.iter().filter_map(|s| s.dtype).map(tol).fold(tol(tpl.dtype), f64::max)
}

pub fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap_or_default()
}

/// Compares two tensors that should be alike (one from each path).
pub fn compare_tensor(what: &str, e: &Tensor, c: &Tensor, tol: f64, errs: &mut Vec<String>) {
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
pub fn base_class(o: &Tensor, _m: &Materialised) -> String {
    match o.view_base() {
        None => "not a view".into(),
        Some(_) => "a view".into(),
    }
}

/// Calls of programs with random ops take turns: each reads the global
/// generator's state after its call and must see its own draws only.
static GENERATOR: Mutex<()> = Mutex::new(());

/// The generator's turn, when `f` has random ops (held while calling `f`
/// from a test that runs beside the differential properties).
pub fn generator_turn(f: &CompiledFn) -> Option<std::sync::MutexGuard<'static, ()>> {
    let random = f.graph().nodes.iter().any(|n| n.kind().is_some_and(OpKind::is_random));
    random.then(|| GENERATOR.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Runs one call both ways and compares everything observable.
pub fn check_call(f: &CompiledFn, tpl: &ArgTemplate, stats: &Stats) -> Result<(), String> {
    check_call_with(f, None, tpl, stats)
}

/// [`check_call`], with the compiled path (and `explain`) taking some
/// tensor parameters as the fields of a struct argument when `s` is given;
/// the eager reference runs `f` on the flat arguments.
pub fn check_call_with(f: &CompiledFn, s: Option<&StructArgs>, tpl: &ArgTemplate, stats: &Stats) -> Result<(), String> {
    let a = tpl.materialise().map_err(|e| format!("materialising the arguments failed: {e}"))?;
    let b = tpl.materialise().map_err(|e| format!("materialising the arguments failed: {e}"))?;
    let fields = s.map(|s| s.fields(&b));
    let b_args = || match (s, &fields) {
        (Some(s), Some(fl)) => s.args(&b.args(), fl),
        _ => b.args(),
    };
    let fc = s.map_or(f, |s| &s.f);
    let before_a = snapshot_all(&a.tensors);
    let before_b = snapshot_all(&b.tensors);
    // Random ops draw from the global generator: both paths start from the
    // same state and must leave it in the same state (and `explain` must
    // leave it alone); the turn keeps other threads' draws out of the way.
    let _turn = generator_turn(f);
    let random = _turn.is_some();
    let start = (0x5eed_u64, 7_u64);
    if random {
        aot_runtime::set_rng_state(start.0, start.1);
    }
    // `explain` is not what this test checks, but it must not fail where the
    // call succeeds, and must never panic: both are counted and reported.
    let explained = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fc.explain(&b_args()))) {
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
    if random && aot_runtime::rng_state() != start {
        return Err(format!("explain() moved the generator from {start:?} to {:?}", aot_runtime::rng_state()));
    }
    let call = Call { f, fc, tpl, a: &a, b: &b, stats, random, start };
    let Some((mut errs, both_ok)) = call.round(&b_args(), &before_a, &before_b, &explained, true)? else { return Ok(()) };
    // One case in three whose first call succeeded calls again with the
    // same tensors, now written by the first call: the compiled path may
    // answer it from its last-call memo (`compiled/last_call.rs`), and must
    // still equal eager. (After failing calls the two sides' arguments
    // differ: a failed eager call is not transactional.)
    if errs.is_empty() && both_ok && repeats(tpl) {
        bump(&stats.repeated);
        let (before_a, before_b) = (snapshot_all(&a.tensors), snapshot_all(&b.tensors));
        let Some((again, _)) = call.round(&b_args(), &before_a, &before_b, &explained, false)? else { return Ok(()) };
        errs = again;
        errs.iter_mut().for_each(|e| *e = format!("second call with the same tensors: {e}"));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

/// Whether a case calls twice (one template in three, by its listing, so
/// that a replay repeats what failed).
fn repeats(tpl: &ArgTemplate) -> bool {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    tpl.to_string().hash(&mut h);
    h.finish().is_multiple_of(3)
}

/// One case's function, arguments and statistics, for [`Call::round`].
struct Call<'c> {
    f: &'c CompiledFn,
    /// What the compiled path calls: `f`, or its struct-argument form.
    fc: &'c CompiledFn,
    tpl: &'c ArgTemplate,
    a: &'c Materialised,
    b: &'c Materialised,
    stats: &'c Stats,
    random: bool,
    start: (u64, u64),
}

impl Call<'_> {
    /// Runs eager on `a` and compiled on `b` (with `b_args`) once, from the
    /// same generator state, and returns the differences and whether both
    /// calls succeeded. When the eager
    /// reference panicked: `Ok(None)` if that is only counted, `Err` if it
    /// fails the case (see [`eager_panicked`]). `first`: the case's first
    /// call (counted and checked against `explain`).
    fn round(
        &self,
        b_args: &[aot_runtime::Arg],
        before_a: &[Option<TensorSnapshot>],
        before_b: &[Option<TensorSnapshot>],
        explained: &Result<(), String>,
        first: bool,
    ) -> Result<Option<(Vec<String>, bool)>, String> {
        let Call { f, fc, tpl, a, b, stats, random, start } = *self;
        let restart = || {
            if random {
                aot_runtime::set_rng_state(start.0, start.1);
            }
        };
        restart();
        let eager = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.run_eager(&a.args()))) {
            Ok(r) => r,
            Err(p) => return eager_panicked(stats, "run_eager", &*p, f, tpl).map(|()| None),
        };
        let eager_rng = aot_runtime::rng_state();
        if first {
            count(&stats.paths, fc.call_path(b_args).unwrap_or_else(|e| format!("error: {e}")));
        }
        restart();
        let compiled = fc.__call(b_args);
        let compiled_rng = aot_runtime::rng_state();
        let tol = template_tol(tpl);
        if first {
            for feature in tpl.features() {
                count(&stats.patterns, feature);
            }
        }
        let (mut errs, mut both_ok) = (vec![], false);
        if random && compiled.is_ok() && eager.is_ok() && eager_rng != compiled_rng {
            errs.push(format!("the generator state after the call: eager {eager_rng:?}, compiled {compiled_rng:?}"));
        }
        match (eager, compiled) {
            (Err(ee), Err(ce)) => {
                if first {
                    bump(&stats.both_err);
                    count(&stats.errors, ee.to_string().chars().filter(|c| !c.is_ascii_digit()).take(140).collect());
                }
                failed_cleanly(&ce.to_string(), b, before_b, stats, &mut errs);
            }
            (Ok(_), Err(ce)) => errs.push(format!("eager succeeded, compiled failed: {ce}")),
            (Err(ee), Ok(_)) => errs.push(format!("eager failed ({ee}), compiled succeeded")),
            (Ok(eo), Ok(co)) => {
                if first {
                    bump(&stats.both_ok);
                    explain_agrees(f, tpl, explained, stats, &mut errs);
                }
                if first {
                    compare_ok(f, tpl, a, b, before_a, before_b, &eo, &co, tol, stats, &mut errs);
                } else {
                    // Not the gradients: a backward through the first call's
                    // compiled node again fails, as PyTorch's does (its
                    // saved tensors are freed even when there are none),
                    // while eager's own nodes may allow it.
                    compare_values(a, b, &eo, &co, tol, &mut errs);
                }
                both_ok = true;
            }
        }
        Ok(Some((errs, both_ok)))
    }
}

/// A compiled call that failed as eager did: its error names the function
/// and its inputs are as before the call.
fn failed_cleanly(msg: &str, b: &Materialised, before_b: &[Option<TensorSnapshot>], stats: &Stats, errs: &mut Vec<String>) {
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

/// `explain` must not fail where the call succeeds (counted; an error in
/// strict mode).
fn explain_agrees(f: &CompiledFn, tpl: &ArgTemplate, explained: &Result<(), String>, stats: &Stats, errs: &mut Vec<String>) {
    if let Err(e) = explained {
        if get(&stats.explain_failed_on_ok_call) == 0 && e != "panicked" {
            eprintln!("explain() failed ({e}) on a call that succeeds:\n{}\nwith\n{tpl}", f.graph());
        }
        bump(&stats.explain_failed_on_ok_call);
        if strict() {
            errs.push(format!("explain() failed on a call that succeeds: {e}"));
        }
    }
}

/// Compares two successful calls: outputs, arguments after the call,
/// sharing and identity, and (when no difference was found and an output
/// requires grad) the gradients of the leaves.
#[allow(clippy::too_many_arguments)]
pub fn compare_ok(
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
    compare_values(a, b, eo, co, tol, errs);
    if !errs.is_empty() || !eo.iter().any(Tensor::requires_grad) {
        return;
    }
    compare_grads(f, tpl, a, b, eo, co, tol, stats, errs);
}

/// The outputs, the arguments after the call, and sharing and identity.
fn compare_values(a: &Materialised, b: &Materialised, eo: &[Tensor], co: &[Tensor], tol: f64, errs: &mut Vec<String>) {
    if eo.len() != co.len() {
        errs.push(format!("number of outputs: eager {}, compiled {}", eo.len(), co.len()));
        return;
    }
    compare_outputs(a, b, eo, co, tol, errs);
    compare_arguments(a, b, tol, errs);
    compare_sharing(a, b, eo, co, errs);
}

/// The outputs, one by one, and whether each is a view.
fn compare_outputs(a: &Materialised, b: &Materialised, eo: &[Tensor], co: &[Tensor], tol: f64, errs: &mut Vec<String>) {
    for (k, (e, c)) in eo.iter().zip(co).enumerate() {
        compare_tensor(&format!("output {k}"), e, c, tol, errs);
        let (eb, cb) = (base_class(e, a), base_class(c, b));
        if eb != cb {
            errs.push(format!("output {k}: eager output is {eb}, compiled output is {cb}"));
        }
    }
}

/// The tensor arguments after the call, and their whole storages.
fn compare_arguments(a: &Materialised, b: &Materialised, tol: f64, errs: &mut Vec<String>) {
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
}

/// Sharing and identity: outputs against arguments and storage bases, and
/// outputs against each other.
fn compare_sharing(a: &Materialised, b: &Materialised, eo: &[Tensor], co: &[Tensor], errs: &mut Vec<String>) {
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
}

/// Gradients: the oracle's loss over the outputs that require grad, run
/// backward on each path, and the gradients of every leaf compared.
#[allow(clippy::too_many_arguments)]
fn compare_grads(
    f: &CompiledFn,
    tpl: &ArgTemplate,
    a: &Materialised,
    b: &Materialised,
    eo: &[Tensor],
    co: &[Tensor],
    tol: f64,
    stats: &Stats,
    errs: &mut Vec<String>,
) {
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
            let leaves = |m: &Materialised| -> Vec<Tensor> { m.bases.iter().chain(&m.leaves).cloned().collect() };
            for (k, (x, y)) in leaves(a).iter().zip(&leaves(b)).enumerate() {
                match (x.grad(), y.grad()) {
                    (None, None) => {}
                    (Some(gx), Some(gy)) => {
                        let (mut vx, mut vy) = (vals(&gx), vals(&gy));
                        if non_finite_scalars(tpl) {
                            // With a non-finite argument, eager can multiply a
                            // zero gradient by it (`0 * NaN`) on a path the
                            // compiled backward knows to be zero and skips
                            // (torch.compile's can too): a NaN on either side
                            // matches anything there.
                            for (x, y) in vx.iter_mut().zip(vy.iter_mut()) {
                                if x.is_nan() || y.is_nan() {
                                    (*x, *y) = (0.0, 0.0);
                                }
                            }
                        }
                        if gx.shape() != gy.shape() || !values_close(&vy, &vx, tol) {
                            errs.push(format!("grad of leaf #{k}: eager {vx:?}, compiled {vy:?}"));
                        }
                    }
                    (gx, gy) => errs.push(format!("grad of leaf #{k}: eager {:?}, compiled {:?}", gx.is_some(), gy.is_some())),
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

/// AOT_DIFF_STRICT=1: panics of the eager reference and `explain()` failures
/// fail the test (by default they are counted, and the first is printed).
pub fn strict() -> bool {
    env_flag_on("AOT_DIFF_STRICT")
}

/// Records a panic of the eager reference (a bug there, not a difference):
/// printed the first time, counted, and a failure in strict mode.
pub fn eager_panicked(stats: &Stats, what: &str, p: &(dyn std::any::Any + Send), f: &CompiledFn, tpl: &ArgTemplate) -> Result<(), String> {
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

pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "(no message)".into())
}
