//! The last-call memo: taken for repeated calls, and never across a change
//! of the arguments' states, identities, views or grad mode.

use super::super::tests::tensor;
use super::super::{Arg, CompiledFn};
use aot_ir::graph::args::t;
use aot_ir::{GraphBuilder, OpKind, ReturnKind};

/// `a.add_(b); a * b`
fn add_then_mul() -> CompiledFn {
    let mut g = GraphBuilder::new("add_then_mul");
    let a = g.tensor("a", true);
    let b = g.tensor("b", false);
    g.call(OpKind::AddInplace, a, vec![t(b)]);
    let m = g.call(OpKind::Mul, a, vec![t(b)]);
    CompiledFn::new(g.finish(vec![m], ReturnKind::Single)).expect("valid graph")
}

fn hits(f: &CompiledFn) -> usize {
    f.cache.last.hits()
}

#[test]
fn repeated_calls_hit_and_match_eager() {
    let f = add_then_mul();
    let (a, b) = (tensor(&[1.0, 2.0], &[2]), tensor(&[3.0, 4.0], &[2]));
    let (ea, eb) = (tensor(&[1.0, 2.0], &[2]), tensor(&[3.0, 4.0], &[2]));
    for n in 0..3 {
        let out = f.__call(&[Arg::from(&a), Arg::from(&b)]).expect("compiled");
        let want = f.run_eager(&[Arg::from(&ea), Arg::from(&eb)]).expect("eager");
        assert_eq!(out[0].to_vec::<f32>().expect("values"), want[0].to_vec::<f32>().expect("values"));
        assert_eq!(a.to_vec::<f32>().expect("values"), ea.to_vec::<f32>().expect("values"));
        assert_eq!(hits(&f), n, "call {n}");
    }
}

#[test]
fn a_state_change_between_calls_is_seen() {
    let f = add_then_mul();
    let (a, b) = (tensor(&[1.0, 2.0], &[2]), tensor(&[3.0, 4.0], &[2]));
    let out = f.__call(&[Arg::from(&a), Arg::from(&b)]).expect("compiled");
    assert!(!out[0].requires_grad());
    // `b` now requires grad: the same tensors, a new state.
    b.requires_grad_(true).expect("leaf");
    let out = f.__call(&[Arg::from(&a), Arg::from(&b)]).expect("compiled");
    assert!(out[0].requires_grad(), "the second call must record history");
    assert!(out[0].grad_fn_name().is_some());
    // ... and `a` was written with history: it is no longer a leaf.
    assert!(!a.is_leaf());
    assert_eq!(hits(&f), 0);
}

#[test]
fn grad_mode_identity_and_views_are_part_of_the_memo() {
    let f = add_then_mul();
    let (a, b) = (tensor(&[1.0, 2.0], &[2]), tensor(&[3.0, 4.0], &[2]));
    let x = b.requires_grad_(true).expect("leaf");
    let _ = f.__call(&[Arg::from(&tensor(&[0.0; 2], &[2])), Arg::from(&x)]).expect("compiled");
    {
        let _g = crate::NoGradGuard::new();
        let out = f.__call(&[Arg::from(&tensor(&[0.0; 2], &[2])), Arg::from(&x)]).expect("compiled");
        assert!(!out[0].requires_grad(), "no_grad: a different key");
    }
    // The same tensor twice is another alias pattern.
    let _ = f.__call(&[Arg::from(&a), Arg::from(&a)]).expect("compiled");
    let _ = f.__call(&[Arg::from(&a), Arg::from(&a)]).expect("compiled");
    assert_eq!(hits(&f), 1);
    // A view's key follows its base: never remembered (the memo of the
    // last plain call stays, and nothing hits it).
    let base = tensor(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let v = base.narrow(0, 1, 2).expect("view");
    for _ in 0..2 {
        let _ = f.__call(&[Arg::from(&v), Arg::from(&b)]).expect("compiled");
    }
    assert_eq!(hits(&f), 1);
    assert_eq!(base.to_vec::<f32>().expect("values"), vec![1.0, 8.0, 11.0, 4.0]);
}
