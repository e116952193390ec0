//! `for` loops whose bounds are known only at call time (`for t in
//! 0..x.size(1)`, `for i in 0..n`): the body is traced once and unrolled
//! per call's trip count (`aot-runtime/src/compiled/loops.rs`). Each
//! compiled call is checked against the same program written in eager ops
//! (values, in-place writes and gradients), with several trip counts on one
//! function, a zero-trip loop, a bound read from a computed tensor's size,
//! nested loops, and the errors.

use aot_runtime::prelude::*;
use aot_runtime::testing::{num_loop_stages, num_specializations};

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    for (i, (a, b)) in vals(got).iter().zip(&vals(want)).enumerate() {
        assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, &Device::Cpu, seed).expect("randn")
}

fn leaf(shape: &[usize], seed: u64) -> Tensor {
    randn(shape, seed).requires_grad_(true).expect("leaf")
}

/// An Elman RNN over the sequence dim of `x` (batch, time, features).
#[aot_fn]
fn rnn(x: &Tensor, h0: &Tensor, wx: &Tensor, wh: &Tensor) -> Tensor {
    let mut h = h0.copy();
    for t in 0..x.size(1) {
        h = (x.select(1, t).matmul(wx) + h.matmul(wh)).tanh();
    }
    h
}

fn rnn_eager(x: &Tensor, h0: &Tensor, wx: &Tensor, wh: &Tensor) -> Result<Tensor> {
    let mut h = h0.copy()?;
    for t in 0..x.shape()[1] as i64 {
        h = x.select(1, t)?.matmul(wx)?.add(&h.matmul(wh)?)?.tanh()?;
    }
    Ok(h)
}

/// The sum of the compiled RNN's output.
fn rnn_loss(xs: &[Tensor; 4]) -> Result<f64> {
    Ok(vals(&rnn(&xs[0], &xs[1], &xs[2], &xs[3])?.sum()?)[0])
}

#[test]
fn an_rnn_over_the_sequence_gives_eager_values_and_gradients() -> Result<()> {
    for (steps, seed) in [(5usize, 1u64), (3, 7)] {
        let a = [leaf(&[2, steps, 3], seed), leaf(&[2, 4], seed + 1), leaf(&[3, 4], seed + 2), leaf(&[4, 4], seed + 3)];
        let b: Vec<Tensor> = a.iter().map(|t| t.detach()?.copy()?.requires_grad_(true)).collect::<Result<_>>()?;
        assert_eq!(rnn::compiled().call_path(&[(&a[0]).into(), (&a[1]).into(), (&a[2]).into(), (&a[3]).into()])?, "compiled training");
        let got = rnn(&a[0], &a[1], &a[2], &a[3])?;
        let want = rnn_eager(&b[0], &b[1], &b[2], &b[3])?;
        assert_close("rnn", &got, &want);
        got.sum()?.backward()?;
        want.sum()?.backward()?;
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let (gx, gy) = (x.grad().expect("compiled grad"), y.grad().expect("eager grad"));
            assert_close(&format!("grad {i} ({steps} steps)"), &gx, &gy);
        }
        // Finite differences on one element of `wh`, through the compiled call.
        let eps = 1e-6;
        let bump = |d: f64| -> Result<f64> {
            let xs: [Tensor; 4] = std::array::from_fn(|i| a[i].detach().and_then(|t| t.copy()).expect("copy"));
            xs[3].select(0, 1)?.select(0, 2)?.add_(d)?;
            rnn_loss(&xs)
        };
        let fd = (bump(eps)? - bump(-eps)?) / (2.0 * eps);
        let g = vals(&a[3].grad().expect("grad"))[4 + 2];
        assert!((fd - g).abs() < 1e-6 * (1.0 + g.abs()), "finite differences {fd} vs {g}");
    }
    Ok(())
}

#[aot_fn]
fn fill_rows(out: &mut Tensor, x: &Tensor, n: usize) {
    for i in 0..n {
        out.select(0, i).copy_(&(x * (i as f64 + 1.0)));
    }
}

#[test]
fn a_loop_over_a_usize_parameter_writes_an_outer_tensor_in_place() -> Result<()> {
    let x = randn(&[3], 4);
    let mut out = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?;
    fill_rows(&mut out, &x, 3)?;
    let want = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?;
    for i in 0..3 {
        want.select(0, i)?.copy_(&x.mul(i as f64 + 1.0)?)?;
    }
    assert_close("fill_rows", &out, &want);
    // Two trip counts, two specialisations of one function.
    let mut out2 = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?;
    fill_rows(&mut out2, &x, 4)?;
    want.select(0, 3)?.copy_(&x.mul(4.0)?)?;
    assert_close("fill_rows, 4 rows", &out2, &want);
    fill_rows(&mut out2, &x, 3)?;
    assert_eq!(num_specializations(fill_rows::compiled()), 2, "one per trip count");
    Ok(())
}

#[aot_fn]
fn accumulate(x: &Tensor, n: i64) -> Tensor {
    let mut acc = x * 2.0;
    for k in 0..n {
        acc = acc + x * (k as f64);
    }
    acc
}

#[test]
fn a_zero_trip_loop_keeps_the_values_before_it() -> Result<()> {
    let x = randn(&[2, 2], 5);
    assert_close("zero trips", &accumulate(&x, 0)?, &x.mul(2.0)?);
    assert_close("three trips", &accumulate(&x, 3)?, &x.mul(5.0)?);
    let listing = accumulate::compiled().graph_for(&[(&x).into(), 0i64.into()])?.to_string();
    assert!(!listing.contains("for k"), "unrolled: {listing}");
    assert!(accumulate::compiled().graph().to_string().contains("for k in 0..n"), "{}", accumulate::compiled().graph());
    Ok(())
}

#[aot_fn]
fn over_rows(x: &Tensor, w: &Tensor) -> Tensor {
    let y = x.matmul(w).t();
    let mut s = y.select(0, 0) * 0.0;
    for i in 0..y.size(0) {
        s = s + y.select(0, i).relu();
    }
    s
}

#[test]
fn a_bound_may_be_the_size_of_a_computed_tensor() -> Result<()> {
    for cols in [3usize, 5] {
        let (x, w) = (randn(&[4, 2], 6), randn(&[2, cols], 8));
        let y = x.matmul(&w)?.t()?;
        let mut want = y.select(0, 0)?.mul(0.0)?;
        for i in 0..cols as i64 {
            want = want.add(&y.select(0, i)?.relu()?)?;
        }
        assert_close("over_rows", &over_rows(&x, &w)?, &want);
    }
    Ok(())
}

#[aot_fn]
fn triangle(x: &Tensor, n: i64) -> Tensor {
    let mut acc = x * 0.0;
    for i in 0..n {
        for j in 0..i + 1 {
            acc = acc + x * ((i * 10 + j) as f64);
        }
    }
    acc
}

#[test]
fn nested_loops_read_the_enclosing_variable() -> Result<()> {
    let x = randn(&[3], 9);
    // i = 0: j = 0; i = 1: j = 0, 1; i = 2: j = 0, 1, 2.
    let total = (10 + 11 + 20 + 21 + 22) as f64;
    assert_close("triangle", &triangle(&x, 3)?, &x.mul(total)?);
    Ok(())
}

#[aot_fn]
fn literal_outside(x: &Tensor, n: usize) -> Tensor {
    let mut h = x * 1.0;
    for l in 0..2 {
        for _ in 0..n {
            h = h * ((l + 2) as f64);
        }
    }
    h
}

#[test]
fn a_runtime_loop_inside_a_literal_loop() -> Result<()> {
    let x = randn(&[2], 10);
    assert_close("literal outside", &literal_outside(&x, 2)?, &x.mul(4.0 * 9.0)?);
    Ok(())
}

#[test]
fn a_negative_trip_count_is_an_error_and_writes_nothing() -> Result<()> {
    let x = randn(&[2, 2], 11);
    let e = accumulate(&x, -1).expect_err("negative count");
    let msg = e.to_string();
    assert!(msg.contains("negative number of times") && msg.contains("accumulate"), "{msg}");
    let e = accumulate(&x, 10_000_000).expect_err("too many ops");
    assert!(e.to_string().contains("unrolls to more than"), "{e}");
    let (mut w, g) = (randn(&[3], 29), randn(&[3], 30));
    let before = vals(&w);
    assert!(descend(&mut w, &g, 0.5, -2).is_err());
    assert_eq!(vals(&w), before, "a failed call writes nothing");
    Ok(())
}

#[test]
fn explain_kernels_and_listing_see_the_unrolled_call() -> Result<()> {
    let a = [randn(&[2, 3, 3], 12), randn(&[2, 4], 13), randn(&[3, 4], 14), randn(&[4, 4], 15)];
    let args: Vec<Arg> = a.iter().map(Arg::from).collect();
    let f = rnn::compiled();
    let report = f.explain(&args)?;
    assert_eq!(report.fw_metadata.input_info.len(), 4);
    assert!(!f.kernels(&args)?.is_empty());
    let listing = f.graph_for(&args)?.to_string();
    assert_eq!(listing.matches("tanh").count(), 3, "{listing}");
    assert_close("run_eager", &f.run_eager(&args)?[0], &rnn(&a[0], &a[1], &a[2], &a[3])?);
    Ok(())
}

#[test]
fn cuda_kernels_of_an_unrolled_training_call() -> Result<()> {
    let a = [leaf(&[2, 3, 3], 31), leaf(&[2, 4], 32), leaf(&[3, 4], 33), leaf(&[4, 4], 34)];
    let args: Vec<Arg> = a.iter().map(Arg::from).collect();
    let listed = rnn::compiled().kernels_for(&args, &Device::Cuda(0));
    if cfg!(feature = "cuda") {
        assert!(!listed?.is_empty());
    } else {
        assert!(matches!(listed, Err(AotError::DeviceUnavailable { .. })), "{listed:?}");
    }
    assert!(a[3].grad().is_none(), "listing computes no gradient");
    Ok(())
}

#[derive(TensorTree)]
struct Cell {
    w: Tensor,
    b: Tensor,
}

#[derive(TensorTree)]
struct Net {
    cell: Cell,
    out: Tensor,
}

#[aot_fn]
fn cell_step(h: &Tensor, c: &Cell) -> Tensor {
    (h.matmul(&c.w) + c.b).tanh()
}

/// A struct's fields, and a call with a struct argument, inside the loop.
#[aot_fn]
fn unrolled_net(net: &Net, x: &Tensor, steps: usize) -> Tensor {
    let mut h = x * 1.0;
    for _ in 0..steps {
        h = cell_step(&h, &net.cell) * net.out;
    }
    h
}

#[test]
fn struct_fields_and_calls_inside_the_loop() -> Result<()> {
    let net = Net { cell: Cell { w: leaf(&[3, 3], 20), b: leaf(&[3], 21) }, out: leaf(&[3], 22) };
    let x = randn(&[2, 3], 23);
    let got = unrolled_net(&net, &x, 3)?;
    let mut want = x.mul(1.0)?;
    for _ in 0..3 {
        want = want.matmul(&net.cell.w)?.add(&net.cell.b)?.tanh()?.mul(&net.out)?;
    }
    assert_close("unrolled_net", &got, &want);
    // Gradients: the compiled backward against eager autograd.
    got.sum()?.backward()?;
    let compiled: Vec<Tensor> = [&net.cell.w, &net.cell.b, &net.out].iter().map(|t| t.grad().expect("grad")).collect();
    for t in [&net.cell.w, &net.cell.b, &net.out] {
        t.set_grad(None);
    }
    want.sum()?.backward()?;
    for (i, (t, g)) in [&net.cell.w, &net.cell.b, &net.out].iter().zip(&compiled).enumerate() {
        assert_close(&format!("grad {i}"), g, &t.grad().expect("eager grad"));
    }
    assert_close("zero steps", &unrolled_net(&net, &x, 0)?, &x);
    Ok(())
}

/// A callee with a loop over its argument's size, called twice.
#[aot_fn]
fn cumulative(x: &Tensor) -> Tensor {
    let mut acc = x.select(0, 0) * 0.0;
    for i in 0..=x.size(0) - 1 {
        acc = acc + x.select(0, i);
    }
    acc
}

#[aot_fn]
fn two_sums(a: &Tensor, b: &Tensor) -> Tensor {
    cumulative(a) + cumulative(b)
}

#[test]
fn a_loop_in_a_callee_follows_each_argument() -> Result<()> {
    let (a, b) = (randn(&[4, 2], 24), randn(&[2, 2], 25));
    assert_close("two_sums", &two_sums(&a, &b)?, &a.sum_dim(&[0], false)?.add(&b.sum_dim(&[0], false)?)?);
    Ok(())
}

/// In-place updates under `no_grad!` in a loop, as an optimizer over a
/// number of steps.
#[aot_fn]
fn descend(w: &mut Tensor, g: &Tensor, lr: f64, steps: i64) {
    no_grad! {
        for k in 0..steps {
            w.sub_(g * (lr / ((k + 1) as f64)));
        }
    }
}

#[test]
fn in_place_writes_under_no_grad_in_a_loop() -> Result<()> {
    let w = leaf(&[3], 26);
    let g = randn(&[3], 27);
    let want = {
        let w = w.detach()?.copy()?;
        for k in 0..4 {
            w.sub_(&g.mul(0.5 / (k + 1) as f64)?)?;
        }
        w
    };
    let mut w2 = w.detach()?.copy()?;
    descend(&mut w2, &g, 0.5, 4)?;
    assert_close("descend", &w2, &want);
    Ok(())
}

#[aot_fn]
fn maybe_twice(x: &Tensor, n: i64, double: bool) -> Tensor {
    let mut y = x * 1.0;
    for _ in 0..n {
        if double {
            y = y * 2.0;
        } else {
            y = y + 1.0;
        }
    }
    y
}

#[test]
fn a_loop_in_each_traced_variant() -> Result<()> {
    let x = randn(&[2], 28);
    assert_close("double", &maybe_twice(&x, 3, true)?, &x.mul(8.0)?);
    assert_close("add", &maybe_twice(&x, 3, false)?, &x.add(3.0)?);
    Ok(())
}

/// The second loop's bound is the size of what the first one built,
/// whose shape changes from one iteration to the next.
#[aot_fn]
fn grow_then_sum(x: &Tensor, n: i64) -> Tensor {
    let mut h = x * 1.0;
    for _ in 0..n {
        h = Tensor::cat(&[&h, &x], 0);
    }
    let mut s = h.select(0, 0) * 0.0;
    for i in 0..h.size(0) {
        s = s + h.select(0, i);
    }
    s
}

#[test]
fn a_bound_may_read_what_an_earlier_loop_computed() -> Result<()> {
    let x = randn(&[2, 3], 35);
    for n in [0i64, 2] {
        let want = x.sum_dim(&[0], false)?.mul((n + 1) as f64)?;
        assert_close(&format!("grow_then_sum({n})"), &grow_then_sum(&x, n)?, &want);
    }
    Ok(())
}

#[aot_fn]
fn scaled_sum(x: &Tensor, n: usize) -> Tensor {
    let mut acc = x * 0.0;
    for k in 0..n {
        acc = acc + x * (k as f64);
    }
    acc
}

/// Ever new trip counts (a model fed ever new sequence lengths) keep the
/// unrolled stages bounded; a count whose stage was dropped is unrolled
/// again and still right.
#[test]
fn unrolled_stages_are_a_bounded_cache() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f64, -2.0, 0.5], &[3], &Device::Cpu)?;
    let check = |n: usize| -> Result<()> {
        let got = scaled_sum(&x, n)?;
        let want = x.mul((n * n.saturating_sub(1) / 2) as f64)?;
        assert_close(&format!("scaled_sum n={n}"), &got, &want);
        Ok(())
    };
    for n in 0..100 {
        check(n)?;
    }
    let kept = num_loop_stages(scaled_sum::compiled());
    assert!((1..=64).contains(&kept), "{kept} stages kept after 100 trip counts");
    // The first counts were dropped first; they are built again.
    for n in 0..3 {
        check(n)?;
    }
    assert!(num_loop_stages(scaled_sum::compiled()) <= 64);
    Ok(())
}
