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
//! One allowance: when a scalar argument is NaN or infinite, a NaN in one
//! side's gradient matches anything (eager multiplies zero gradients by
//! the non-finite value on paths the compiled backward knows to be zero).
//!
//! CI runs 10,000 cases from a fixed seed. The long mode is ignored by
//! default: `AOT_DIFF_CASES=1000000 cargo test --release -p aot-tests --test
//! fuzz_compiled -- --ignored` (`AOT_FUZZ_SEED=N` picks another stream). A
//! failure prints the command that replays it.

use aot_tests::choice::Choices;
use aot_tests::diff_property::{cases_from_env, options, replay_from_env, run_property};
use aot_tests::progen::gen_program;

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
    replay_from_env("compiled_calls_under_hostile_input");
}

/// Calls with the wrong number or kinds of arguments (a tensor where a
/// scalar goes and back, one argument too few or too many, scalars of
/// other types): every entry point (`__call`, `run_eager`, `explain`,
/// `call_path`) returns an error, never panics, and writes nothing.
#[test]
fn wrong_arity_and_argument_kinds_are_errors() {
    use aot_runtime::{Arg, DType, Device, Tensor};
    use aot_tests::alias::{gen_template, TemplateOptions};
    use aot_tests::snapshot::snapshot_all;
    let opts = options("compiled_calls_under_hostile_input").expect("the fuzzer's options");
    let mut checked = 0;
    for seed in 0..2_000u32 {
        let data: Vec<u32> = (0..256).map(|k| seed.wrapping_mul(2_654_435_761).wrapping_add(k * 40_503).rotate_left(k % 29)).collect();
        let mut c = Choices::new(&data);
        let prog = gen_program(&mut c, &opts.gen);
        let Ok(f) = aot_runtime::CompiledFn::new(prog.graph.clone()) else { continue };
        // A call that succeeds draws from the generator, which the property
        // beside this test reads after each of its calls.
        let _turn = aot_tests::diff::generator_turn(&f);
        let tpl = gen_template(&mut c, &prog.params, prog.dtype, &TemplateOptions { requires_grad_percent: 30, ..Default::default() });
        let Ok(m) = tpl.materialise() else { continue };
        let extra = Tensor::ones(&[2], DType::F32, &Device::Cpu).expect("a small tensor");
        let good = m.args();
        let k = (seed as usize) % good.len().max(1);
        // (arguments, whether the signature refuses them)
        let mut variants: Vec<(Vec<Arg>, bool)> =
            vec![(good[..good.len().saturating_sub(1)].to_vec(), true), ([good.clone(), vec![Arg::from(&extra)]].concat(), true)];
        if !good.is_empty() {
            let mut swapped = good.clone();
            swapped[k] = match good[k] {
                Arg::Tensor(_) => Arg::from(1.5),
                _ => Arg::from(&extra),
            };
            variants.push((swapped, true));
            if !matches!(good[k], Arg::Tensor(_)) {
                // A bool or usize for a float parameter is refused; an i64
                // converts (and may make an op fail: then both paths do).
                let mut other_scalar = good.clone();
                other_scalar[k] = [Arg::I64(i64::MAX), Arg::Bool(true), Arg::Usize(usize::MAX)][seed as usize % 3];
                variants.push((other_scalar, seed % 3 != 0));
            }
        }
        for (args, refused) in &variants {
            // The compiled call first: it must leave the arguments alone
            // when it fails (the raw eager interpreter writes as it goes).
            let before = snapshot_all(&m.tensors);
            let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.__call(args).is_err()))
                .unwrap_or_else(|_| panic!("a compiled call with bad arguments panicked:\n{}\n{tpl}", prog.graph));
            if call {
                let after = snapshot_all(&m.tensors);
                for (x, y) in before.iter().zip(&after) {
                    if let (Some(x), Some(y)) = (x, y) {
                        assert!(y.diff(x).is_empty(), "a failing compiled call wrote an argument:\n{}\n{tpl}", prog.graph);
                    }
                }
            }
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (f.explain(args).is_err(), f.call_path(args).is_err(), f.run_eager(args).is_err())
            }));
            let (explain, path, eager) = r.unwrap_or_else(|_| panic!("a call with bad arguments panicked:\n{}\n{tpl}", prog.graph));
            // (An accepted extreme scalar is compared with eager by the
            // property above, on independent arguments.)
            if *refused {
                assert!(
                    call && eager && explain && path,
                    "bad arguments accepted ({call} {eager} {explain} {path}):\n{}\n{tpl}",
                    prog.graph
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 2_000, "too few calls checked: {checked}");
}
