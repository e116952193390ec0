//! Which calls run compiled: every training call of the oracle, by path
//! (`compiled training`, `inference`, or the eager reference and why).
//! Calls on the eager reference are correct but not transactional and not
//! fused, so the list is a to-do list; the test pins the ones that must
//! stay compiled.

#[path = "../../ui-tests/tests/oracle/cases.rs"]
mod cases;

use aot_runtime::{Arg, Tensor};
use aot_tests::{build_args, load_cases, CallArg};

fn to_args(args: &[CallArg]) -> Vec<Arg<'_>> {
    args.iter()
        .map(|a| match a {
            CallArg::Tensor(t) => Arg::from(t),
            CallArg::Number(n) => Arg::from(*n),
        })
        .collect()
}

#[test]
fn oracle_call_paths() {
    let table = cases::all();
    let mut eager = vec![];
    let mut total = 0;
    for (case, (name, f)) in load_cases().iter().zip(&table) {
        for call in &case.calls {
            let Ok((_, args)) = build_args(call) else { continue };
            let args = to_args(&args);
            if !args.iter().any(|a| a.tensor().is_some_and(Tensor::requires_grad)) {
                continue;
            }
            total += 1;
            let path = f.__call_path(&args).unwrap_or_else(|e| format!("error: {e}"));
            if path.starts_with("eager") {
                eager.push(format!("{name}/{}: {path}", call.label));
            }
        }
    }
    println!("{} of {total} training calls run the eager reference:", eager.len());
    for e in &eager {
        println!("  {e}");
    }
    // What the joint graph does not cover yet; anything else is a regression.
    let known = ["shares its storage with another argument", "writes through detach()"];
    let unexpected: Vec<&String> = eager.iter().filter(|e| !known.iter().any(|k| e.contains(k))).collect();
    assert!(unexpected.is_empty(), "training calls that should run compiled:\n{unexpected:#?}");
    assert!(total >= 60, "the oracle has {total} training calls");
}
