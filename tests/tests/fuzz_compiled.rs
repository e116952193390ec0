//! The fuzzer of compiled calls: random programs called with hostile
//! arguments, compared with the eager reference by the differential
//! checks (`aot_tests::diff::check_call`).
//!
//! Hostile means: random alias patterns of the arguments; storages in
//! unusual autograd states (views taken before their base required grad,
//! views made under `no_grad` whose base later gained history, views of a
//! non-leaf, see `aot_tests::alias::GradState`); and one bad argument now
//! and then (a tensor of a shape the program does not expect, a NaN,
//! infinite or huge scalar). For every call:
//! - compiled and eager agree on success or failure, and on every value,
//!   layout, alias relation and gradient;
//! - a failing compiled call leaves every argument bit-identical (the
//!   whole storage, shape, stride, offset and version counter);
//! - nothing panics (each call runs under `catch_unwind`).
//!
//! CI runs 10,000 cases from a fixed seed. The long mode is ignored by
//! default: `AOT_DIFF_CASES=1000000 cargo test --release -p aot-tests --test
//! fuzz_compiled -- --ignored` (`AOT_FUZZ_SEED=N` picks another stream). A
//! failure prints the command that replays it.

use aot_tests::diff::Stats;
use aot_tests::diff_property::{cases_from_env, options, run_case, run_property};
use aot_tests::choice::Choices;
use aot_tests::progen::gen_program;
use proptest::test_runner::TestCaseError;

#[test]
fn compiled_calls_under_hostile_input() {
    run_property("compiled_calls_under_hostile_input", cases_from_env(10_000));
}

#[test]
#[ignore = "long mode: 1,000,000 cases (AOT_DIFF_CASES=N to change)"]
fn compiled_calls_under_hostile_input_long() {
    run_property("compiled_calls_under_hostile_input", cases_from_env(1_000_000));
}

/// Replays one case: `AOT_DIFF_REPLAY="1,2,3"`, as printed by a failure.
#[test]
#[ignore = "replays AOT_DIFF_REPLAY"]
fn replay() {
    let Ok(list) = std::env::var("AOT_DIFF_REPLAY") else {
        eprintln!("set AOT_DIFF_REPLAY to a comma-separated choice vector");
        return;
    };
    let opts = options("compiled_calls_under_hostile_input").expect("the fuzzer's options");
    let choices: Vec<u32> = list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let stats = Stats::default();
    eprintln!("program:\n{}", gen_program(&mut Choices::new(&choices), &opts.gen).graph);
    match run_case(&choices, &opts, &stats) {
        Err(TestCaseError::Fail(msg)) => panic!("{msg}"),
        Err(TestCaseError::Reject(why)) => eprintln!("the program is not run: {why}"),
        Ok(()) => eprintln!("compiled matches eager"),
    }
}
