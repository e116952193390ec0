//! Random cases for the differential tests and the fuzzers: a program from
//! [`crate::progen`], one or two argument templates from [`crate::alias`],
//! each call checked by [`crate::diff::check_call`]; proptest drives the
//! choices, shrinks failures and prints the command that replays them.

use crate::alias::{gen_template, ArgTemplate, TemplateOptions};
use crate::choice::Choices;
use crate::diff::{bump, check_call_with, count, get, panic_message, Stats};
use crate::progen::{gen_program, GenOptions, Program};
use crate::struct_args::StructArgs;
use aot_ir::analysis::refusals;
use aot_runtime::CompiledFn;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::time::Instant;
// ---------------------------------------------------------------------------
// One random case

#[derive(Clone, Debug)]
pub struct CaseOptions {
    /// The property's name, for replays.
    pub property: &'static str,
    /// The test binary that holds the property, for replays.
    pub test: &'static str,
    pub gen: GenOptions,
    /// Chance in percent that the case's storages may require grad at all.
    pub grad_cases_percent: u32,
    /// Chance in percent that a storage is in an unusual autograd state.
    pub unusual_state_percent: u32,
    /// Chance in percent that a call gets one bad argument.
    pub bad_arg_percent: u32,
    /// Chance in percent that the case's calls run with grad mode off
    /// (inside `no_grad`), both paths.
    pub grad_mode_off_percent: u32,
    /// A fixed seed for the case stream (`AOT_FUZZ_SEED` overrides it);
    /// `None`: proptest's own.
    pub seed: Option<u64>,
    /// The least share of calls that must succeed on both paths.
    pub min_ok_ratio: f64,
    /// Chance in percent that the compiled calls take some tensor
    /// parameters as the fields of a struct argument ([`StructArgs`]).
    pub struct_args_percent: u32,
}

impl CaseOptions {
    fn new(property: &'static str, gen: GenOptions, grad_cases_percent: u32) -> CaseOptions {
        CaseOptions {
            property,
            test: "differential",
            gen,
            grad_cases_percent,
            unusual_state_percent: 0,
            bad_arg_percent: 0,
            grad_mode_off_percent: 0,
            seed: None,
            min_ok_ratio: 0.5,
            struct_args_percent: 20,
        }
    }
}

/// The options of each property, by name.
pub fn options(property: &str) -> Option<CaseOptions> {
    Some(match property {
        "compiled_matches_eager" => {
            CaseOptions::new("compiled_matches_eager", GenOptions { no_grad_regions: false, ..GenOptions::default() }, 0)
        }
        "compiled_matches_eager_with_autograd_and_no_grad" => {
            CaseOptions::new("compiled_matches_eager_with_autograd_and_no_grad", GenOptions::default(), 60)
        }
        "compiled_matches_eager_nightly" => {
            CaseOptions::new("compiled_matches_eager_nightly", GenOptions { max_steps: 14, ..GenOptions::default() }, 30)
        }
        // The fuzzer: unusual autograd states and bad arguments, from a
        // fixed seed.
        "compiled_calls_under_hostile_input" => CaseOptions {
            test: "fuzz_compiled",
            unusual_state_percent: 50,
            bad_arg_percent: 15,
            grad_mode_off_percent: 10,
            seed: Some(0x5eed_0011),
            min_ok_ratio: 0.3,
            struct_args_percent: 0,
            ..CaseOptions::new("compiled_calls_under_hostile_input", GenOptions::default(), 75)
        },
        _ => return None,
    })
}

pub fn replay_line(property: &str, choices: &[u32]) -> String {
    let list: Vec<String> = choices.iter().map(u32::to_string).collect();
    format!(
        "AOT_DIFF_PROPERTY={property} AOT_DIFF_REPLAY=\"{}\" cargo test -p aot-tests --test {} replay -- --ignored --nocapture",
        list.join(","),
        options(property).map_or("differential", |o| o.test)
    )
}

pub fn describe(prog: &Program, tpls: &[ArgTemplate], property: &str, choices: &[u32]) -> String {
    let mut s = format!("program ({:?}):\n{}\nparameters: {:?}\n", prog.dtype, prog.graph, prog.params);
    for (k, t) in tpls.iter().enumerate() {
        s += &format!("alias pattern {}:\n{t}", k + 1);
    }
    s + "replay: " + &replay_line(property, choices)
}

/// Runs one case; `Err(reject)` when the program is refused before any call.
pub fn run_case(choices: &[u32], opts: &CaseOptions, stats: &Stats) -> Result<(), TestCaseError> {
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
    check_sizes(&f, &prog).map_err(|msg| TestCaseError::fail(format!("{msg}\n\n{}", describe(&prog, &[], opts.property, choices))))?;
    for node in &prog.graph.nodes {
        count(&stats.ops, node.op.name());
    }
    let grad = opts.grad_cases_percent > 0 && c.chance(opts.grad_cases_percent, 100);
    let topts = TemplateOptions {
        requires_grad_percent: if grad { 40 } else { 0 },
        unusual_state_percent: opts.unusual_state_percent,
        bad_arg_percent: opts.bad_arg_percent,
        dtype_view_percent: dtype_view_percent(),
    };
    let mut tpls = vec![gen_template(&mut c, &prog.params, prog.dtype, &topts)];
    if c.chance(1, 3) {
        tpls.push(gen_template(&mut c, &prog.params, prog.dtype, &topts));
    }
    let grad_off = opts.grad_mode_off_percent > 0 && c.chance(opts.grad_mode_off_percent, 100);
    let st = (opts.struct_args_percent > 0 && c.chance(opts.struct_args_percent, 100))
        .then(|| StructArgs::draw(&mut c, &prog.graph, &tpls))
        .flatten();
    if st.is_some() {
        count(&stats.patterns, "struct argument");
    }
    // Pattern 1, pattern 2, pattern 1 again, on one compiled function.
    let order: &[usize] = if tpls.len() == 2 { &[0, 1, 0] } else { &[0] };
    for (n, &k) in order.iter().enumerate() {
        // A panic (in the runtime or the analyses) is a failure too, reported with the case.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match grad_off {
            true => aot_runtime::no_grad(|| check_call_with(&f, st.as_ref(), &tpls[k], stats)),
            false => check_call_with(&f, st.as_ref(), &tpls[k], stats),
        }))
        .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(&*p))));
        if let Err(msg) = result {
            return Err(TestCaseError::fail(format!(
                "compiled differs from eager on call {} (alias pattern {}{}{}):\n{msg}\n\n{}",
                n + 1,
                k + 1,
                if grad_off { ", grad mode off" } else { "" },
                st.as_ref().map_or(String::new(), |s| format!(", the compiled call takes a {}", s.describe())),
                describe(&prog, &tpls, opts.property, choices)
            )));
        }
    }
    Ok(())
}

/// The sizes the program reads of tensors it computes, as shape
/// propagation gives them from the parameters' shapes, against the sizes
/// the generator knew (the eager reference reads the same propagated
/// sizes, so comparing the two runs alone would not catch a wrong one).
fn check_sizes(f: &CompiledFn, prog: &Program) -> Result<(), String> {
    if prog.sizes.is_empty() {
        return Ok(());
    }
    let tensors: Vec<Option<aot_runtime::Tensor>> = prog
        .params
        .iter()
        .map(|p| p.shape().map(|s| aot_runtime::Tensor::zeros(s, prog.dtype, &aot_runtime::Device::Cpu).expect("zeros")))
        .collect();
    let args: Vec<aot_runtime::Arg> = prog
        .params
        .iter()
        .zip(&tensors)
        .map(|(p, t)| match (p, t) {
            (_, Some(t)) => t.into(),
            (crate::progen::ParamSpec::Scalar { value }, None) => (*value).into(),
            _ => unreachable!("a tensor parameter has a tensor"),
        })
        .collect();
    // A program that fails before a read (hostile programs index past a
    // dim, say) fails the same way in both runs, which `check_call`
    // compares; only the sizes of a program that gets that far are checked.
    let Ok(got) = aot_runtime::testing::value_sizes(f, &args) else { return Ok(()) };
    if got != prog.sizes {
        return Err(format!("propagated sizes {got:?}, but the generator's shapes give {:?}", prog.sizes));
    }
    Ok(())
}

/// The compiled function and alias patterns that [`run_case`] draws from
/// `choices`, without calling them; `None` where the program is refused.
/// For tests of what the differential programs compile to
/// (`tests/cuda_sources.rs`); keep the draws in `run_case`'s order.
pub fn draw_case(choices: &[u32], opts: &CaseOptions) -> Option<(CompiledFn, Vec<ArgTemplate>)> {
    let mut c = Choices::new(choices);
    let prog = gen_program(&mut c, &opts.gen);
    if !refusals::check(&prog.graph).is_empty() {
        return None;
    }
    let f = CompiledFn::new(prog.graph.clone()).ok()?;
    let grad = opts.grad_cases_percent > 0 && c.chance(opts.grad_cases_percent, 100);
    let topts = TemplateOptions {
        requires_grad_percent: if grad { 40 } else { 0 },
        unusual_state_percent: opts.unusual_state_percent,
        bad_arg_percent: opts.bad_arg_percent,
        dtype_view_percent: dtype_view_percent(),
    };
    let mut tpls = vec![gen_template(&mut c, &prog.params, prog.dtype, &topts)];
    if c.chance(1, 3) {
        tpls.push(gen_template(&mut c, &prog.params, prog.dtype, &topts));
    }
    Some((f, tpls))
}

/// A choice vector; it prints as the command that replays it.
#[derive(Clone)]
pub struct Stream(&'static str, Vec<u32>);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&replay_line(self.0, &self.1))
    }
}

pub fn cases_from_env(default: u32) -> u32 {
    std::env::var("AOT_DIFF_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

pub fn run_property(name: &'static str, cases: u32) {
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
    let seed = std::env::var("AOT_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).or(opts.seed);
    let mut runner = match seed {
        Some(seed) => {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_le_bytes());
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
        }
        None => TestRunner::new(config),
    };
    let hits_before = aot_runtime::testing::last_call_hits();
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
    assert!(ok > opts.min_ok_ratio, "too few calls succeed, the generator needs work: {summary}");
    if cases >= 2000 {
        // The generator must keep covering every op and alias pattern.
        let ops = stats.ops.lock().unwrap_or_else(|e| e.into_inner());
        let missing: Vec<&str> = GENERATED_OPS.iter().copied().filter(|op| !ops.contains_key(op)).collect();
        assert!(missing.is_empty(), "ops never generated: {missing:?}");
        let patterns = stats.patterns.lock().unwrap_or_else(|e| e.into_inner());
        let mut want = ALIAS_FEATURES.to_vec();
        if dtype_view_percent() > 0 {
            want.push("dtype views of one storage");
        }
        if opts.grad_cases_percent > 0 {
            want.push("requires_grad");
        }
        if opts.unusual_state_percent > 0 {
            want.extend(UNUSUAL_STATE_FEATURES);
        }
        let missing: Vec<&str> = want.into_iter().filter(|f| !patterns.contains_key(f)).collect();
        assert!(missing.is_empty(), "alias patterns never generated: {missing:?}");
        // Repeated calls must have reached the last-call memo (other tests
        // in the process may add to the count, never take from it).
        assert!(get(&stats.repeated) > 0, "no case called twice: {summary}");
        assert!(aot_runtime::testing::last_call_hits() > hits_before, "no repeated call hit the last-call memo: {summary}");
    }
}

/// Every op the program generator emits.
pub const GENERATED_OPS: &[&str] = &[
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

/// The unusual autograd states (`GradState::UNUSUAL`), as features.
pub const UNUSUAL_STATE_FEATURES: &[&str] = &[
    "views taken before requires_grad_",
    "views made under no_grad",
    "no_grad views, then the base gained history",
    "views, then the base gained history",
    "a non-leaf base",
];

/// How often a template passes two arguments over one storage as
/// different dtypes: dtype views are CPU-only, so never on CUDA.
fn dtype_view_percent() -> u32 {
    if crate::test_device() == aot_runtime::Device::Cpu {
        10
    } else {
        0
    }
}

/// Every alias feature of the template generator (see `ArgTemplate::features`).
pub const ALIAS_FEATURES: &[&str] = &[
    "a base and a view of it",
    "disjoint views of one storage",
    "independent contiguous tensors only",
    "non-contiguous input",
    "overlapping views of one storage",
    "same tensor twice",
    "scalar",
    "storage offset > 0",
];

/// Replays one case from `AOT_DIFF_REPLAY` (a comma-separated choice
/// vector, as a failure prints it) under `property`: panics with the
/// difference, or says the case passes.
pub fn replay_from_env(property: &str) {
    let Ok(list) = std::env::var("AOT_DIFF_REPLAY") else {
        eprintln!("set AOT_DIFF_REPLAY to a comma-separated choice vector (and AOT_DIFF_PROPERTY to the property)");
        return;
    };
    let opts = options(property).unwrap_or_else(|| panic!("unknown property {property}"));
    let choices: Vec<u32> = list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let stats = Stats::default();
    eprintln!("program:\n{}", gen_program(&mut Choices::new(&choices), &opts.gen).graph);
    let result = run_case(&choices, &opts, &stats);
    eprintln!("{}", stats.summary("replay", 0.0));
    match result {
        Err(TestCaseError::Fail(msg)) => panic!("{msg}"),
        Err(TestCaseError::Reject(why)) => eprintln!("the program is not run: {why}"),
        Ok(()) => eprintln!("compiled matches eager"),
    }
}
