//! Memory planning of compiled calls: values are dropped
//! after their last use, and an elementwise result is written over the
//! buffer of an operand that dies at its node when nothing else holds it;
//! never over a value read later, returned, aliased by a view, or owned by
//! the caller.

use aot_runtime::prelude::*;
use aot_runtime::testing::{fresh_writes, last_peak_values, reused_buffers};
use aot_runtime::Arg;
use std::sync::Mutex;

/// The counters are process-wide: the tests of this file take turns.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Four stages the scheduler cannot fuse into one (each intermediate is
/// read twice): `a`, then three kernels, each reading the one before.
#[aot_fn]
fn stages(x: &Tensor) -> Tensor {
    let a = x * 1.5;
    let b = a.tanh() + &a;
    let c = b.sigmoid() * &b;
    c.exp() - &c
}

/// `stages`, with its first intermediate also returned.
#[aot_fn]
fn stages_keeping_a(x: &Tensor) -> (Tensor, Tensor) {
    let a = x * 1.5;
    let b = a.tanh() + &a;
    (b, a)
}

/// The first intermediate is read by a view that is returned.
#[aot_fn]
fn stages_with_view(x: &Tensor) -> (Tensor, Tensor) {
    let a = x * 1.5;
    let v = a.narrow(0, 0, 2);
    let b = a.tanh() + &a;
    (b, v)
}

/// Reads a view of the caller's tensor twice, and the tensor itself.
#[aot_fn]
fn on_inputs(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let v = x.narrow(0, 1, 2);
    let p = v.tanh() + &v;
    let q = y.exp() * y;
    (p, q)
}

/// Six elementwise ops, every intermediate read by the next one only.
#[aot_fn]
fn chain(x: &Tensor) -> Tensor {
    ((x * 1.5 + 0.5).tanh() * 2.0 - 1.0).sigmoid()
}

#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

/// Whether stages are left unscheduled (`AOT_KERNELS=0`): every op is then
/// its own stage, and `f(a) + a` writes `a + f(a)` over `f(a)`.
fn unfused() -> bool {
    std::env::var("AOT_KERNELS").is_ok_and(|v| v == "0")
}

fn x(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).unwrap()
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
}

/// The eager reference's outputs.
fn eager(f: &aot_runtime::CompiledFn, args: &[Arg]) -> Vec<Vec<f32>> {
    f.run_eager(args).unwrap().iter().map(vals).collect()
}

#[test]
fn a_chain_of_unfused_stages_holds_only_its_live_values() {
    let _t = turn();
    let x = x(&[64, 33], 1);
    let want = eager(stages::compiled(), &[Arg::from(&x)]);
    let reused = reused_buffers();
    let out = stages(&x).unwrap();
    // The input, the value being read and the one being made: never the
    // four values the stages compute.
    let peak = last_peak_values();
    assert!(peak <= 3, "the table held {peak} values at once");
    assert!(close(&vals(&out), &want[0]));
    // Each of the three kernels wrote over the stage before it.
    assert_eq!(reused_buffers() - reused, 3, "results written over a dying operand");
    // The eager reference (same interpreter) drops its values too.
    let _ = stages::compiled().run_eager(&[Arg::from(&x)]).unwrap();
    assert!(last_peak_values() <= 3, "eager reference: {} values", last_peak_values());
}

#[test]
fn single_ops_write_over_their_dying_operand() {
    let _t = turn();
    let unfused = unfused();
    // One kernel over the caller's `x` (nothing to reuse); under
    // `AOT_KERNELS=0` six ops, each after the first over the one before.
    let x = x(&[300], 2);
    let want = eager(chain::compiled(), &[Arg::from(&x)]);
    let before = vals(&x);
    let reused = reused_buffers();
    let out = chain(&x).unwrap();
    assert_eq!(reused_buffers() - reused, if unfused { 5 } else { 0 });
    assert!(close(&vals(&out), &want[0]));
    assert_eq!(vals(&x), before, "the caller's tensor is never written");
    assert!(last_peak_values() <= 3);
    // A single op (its operand is read twice, so it is not fused) at its
    // operand's last use.
    let want = eager(single_at_last_use::compiled(), &[Arg::from(&x)]);
    let reused = reused_buffers();
    let (b, s) = single_at_last_use(&x).unwrap();
    assert_eq!(reused_buffers() - reused, 1, "sin(a) over a");
    assert!(close(&vals(&b), &want[0]) && close(&vals(&s), &want[1]));
}

#[aot_fn]
fn single_at_last_use(x: &Tensor) -> (Tensor, Tensor) {
    let a = x.exp();
    let s = a.sum();
    let b = a.sin();
    (b, s)
}

#[test]
fn sgd_momentum_makes_no_temporary() {
    let _t = turn();
    let (p0, b0, g) = (x(&[40, 30], 3), x(&[40, 30], 4), x(&[40, 30], 5));
    let (mut p, mut buf) = (p0.copy().unwrap(), b0.copy().unwrap());
    let (fresh, reused) = (fresh_writes(), reused_buffers());
    sgd_momentum(&mut p, &mut buf, &g, 0.1, 0.9).unwrap();
    if unfused() {
        // `buf.mul_` out of place (no operand dies), `p.sub_` over `buf * lr`.
        assert_eq!(fresh_writes() - fresh, 2);
        assert_eq!(reused_buffers() - reused, 1, "p.sub_(buf * lr) takes the product's buffer");
    } else {
        // Reinplaced: one kernel stored over buf's and p's own storage,
        // no temporary at all (`tests/reinplace.rs`).
        assert_eq!((fresh_writes() - fresh, reused_buffers() - reused), (0, 0));
    }
    let (pv, bv, gv) = (vals(&p0), vals(&b0), vals(&g));
    let want_buf: Vec<f32> = bv.iter().zip(&gv).map(|(b, g)| b * 0.9 + g).collect();
    let want_p: Vec<f32> = pv.iter().zip(&want_buf).map(|(p, b)| p - b * 0.1).collect();
    assert!(close(&vals(&buf), &want_buf));
    assert!(close(&vals(&p), &want_p));
    assert_eq!(vals(&g), gv, "the gradient is read, never written");
}

#[test]
fn a_value_read_later_or_returned_is_not_written_over() {
    let _t = turn();
    let x = x(&[8, 5], 6);
    let want = eager(stages_keeping_a::compiled(), &[Arg::from(&x)]);
    let reused = reused_buffers();
    let (b, a) = stages_keeping_a(&x).unwrap();
    assert_eq!(reused_buffers() - reused, u64::from(unfused()), "`a` is returned");
    assert!(close(&vals(&b), &want[0]) && close(&vals(&a), &want[1]));
}

#[test]
fn a_value_a_returned_view_aliases_is_not_written_over() {
    let _t = turn();
    let x = x(&[8, 5], 7);
    let want = eager(stages_with_view::compiled(), &[Arg::from(&x)]);
    let reused = reused_buffers();
    let (b, v) = stages_with_view(&x).unwrap();
    assert_eq!(reused_buffers() - reused, u64::from(unfused()), "the view returned holds `a`'s storage");
    assert!(close(&vals(&b), &want[0]));
    assert!(close(&vals(&v), &want[1]), "the view still reads `a`");
}

#[test]
fn the_callers_tensors_and_their_views_are_never_written_over() {
    let _t = turn();
    let (x, y) = (x(&[4, 6], 8), x(&[4, 6], 9));
    let (xs, ys) = (vals(&x), vals(&y));
    let want = eager(on_inputs::compiled(), &[Arg::from(&x), Arg::from(&y)]);
    let reused = reused_buffers();
    let (p, q) = on_inputs(&x, &y).unwrap();
    let own = if unfused() { 2 } else { 0 };
    assert_eq!(reused_buffers() - reused, own, "inputs and views of inputs die at their last reader but are the caller's");
    assert_eq!((vals(&x), vals(&y)), (xs, ys));
    assert!(close(&vals(&p), &want[0]) && close(&vals(&q), &want[1]));
    // A temporary the caller made for the call is still the caller's.
    let (p2, _) = on_inputs(&x.copy().unwrap(), &y.copy().unwrap()).unwrap();
    assert_eq!(reused_buffers() - reused, 2 * own);
    assert_eq!(vals(&p2), vals(&p));
}

#[test]
fn a_training_call_drops_and_reuses_in_its_forward_and_backward() {
    let _t = turn();
    let x = x(&[16, 8], 10).requires_grad_(true).unwrap();
    let out = stages(&x).unwrap();
    assert_eq!(out.grad_fn_name(), Some("CompiledFunctionBackward"));
    out.sum().unwrap().backward().unwrap();
    let g = x.grad().unwrap();
    let xe = x.detach().unwrap().requires_grad_(true).unwrap();
    let oe = stages::compiled().run_eager(&[Arg::from(&xe)]).unwrap().remove(0);
    oe.sum().unwrap().backward().unwrap();
    assert!(close(&vals(&out), &vals(&oe)));
    assert!(close(&vals(&g), &vals(&xe.grad().unwrap())));
}
