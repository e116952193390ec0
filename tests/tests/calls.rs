//! Calls between `#[aot_fn]` functions: the callee's
//! graph is inlined into the caller's, so the caller's results, input
//! mutations, aliasing, gradients, `explain()` and fused kernels are those
//! of the same program written in one body. Each compiled call is checked
//! against the callees called by hand, and against the inline program.

use aot_runtime::prelude::*;

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    let (g, w) = (vals(got), vals(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, &Device::Cpu, seed).expect("randn")
}

fn report(f: &aot_runtime::CompiledFn, args: &[Arg]) -> serde_json::Value {
    serde_json::to_value(f.explain(args).expect("explain")).expect("json")
}

// ---- a pure callee, scalars computed from the caller's scalars ----

#[aot_fn]
fn layer(x: &Tensor, w: &Tensor, s: f64) -> Tensor {
    (x.matmul(w) * s).tanh()
}

#[aot_fn]
fn two_layers(x: &Tensor, w1: &Tensor, w2: &Tensor, s: f64) -> Tensor {
    let h = layer(&x, &w1, s * 2.0);
    layer(&h, &w2, 0.5)
}

#[aot_fn]
fn two_layers_inline(x: &Tensor, w1: &Tensor, w2: &Tensor, s: f64) -> Tensor {
    let h = (x.matmul(w1) * (s * 2.0)).tanh();
    (h.matmul(w2) * 0.5).tanh()
}

#[test]
fn pure_callee_with_scalars_from_the_caller() -> Result<()> {
    let (x, w1, w2) = (randn(&[3, 4], 1), randn(&[4, 5], 2), randn(&[5, 2], 3));
    let got = two_layers(&x, &w1, &w2, 0.3)?;
    // The callee called by hand, and the eager reference of the caller.
    let by_hand = layer(&layer(&x, &w1, 0.6)?, &w2, 0.5)?;
    assert_close("by hand", &got, &by_hand);
    let args = [Arg::from(&x), Arg::from(&w1), Arg::from(&w2), Arg::from(0.3)];
    assert_close("eager reference", &got, &two_layers::compiled().run_eager(&args)?[0]);
    assert_close("inline", &got, &two_layers_inline(&x, &w1, &w2, 0.3)?);
    // The listing shows the inlined nodes, with the callee's name.
    let listing = two_layers::compiled().graph().to_string();
    assert!(listing.contains("matmul"), "{listing}");
    assert!(!listing.contains("call "), "{listing}");
    assert!(listing.contains("layer"), "{listing}");
    Ok(())
}

// ---- a callee mutating its `&mut` argument ----

#[aot_fn]
fn sgd(p: &mut Tensor, g: &Tensor, lr: f64) {
    p.sub_(&(g * lr));
}

#[aot_fn]
fn step_both(p: &mut Tensor, q: &mut Tensor, g: &Tensor, lr: f64) {
    sgd(&mut p, &g, lr);
    sgd(&mut q, &g, lr * 0.5);
}

#[aot_fn]
fn step_both_inline(p: &mut Tensor, q: &mut Tensor, g: &Tensor, lr: f64) {
    p.sub_(&(g * lr));
    q.sub_(&(g * (lr * 0.5)));
}

#[test]
fn callee_mutation_is_the_callers() -> Result<()> {
    let (p, q, g) = (randn(&[4], 1), randn(&[4], 2), randn(&[4], 3));
    let (pe, qe) = (p.copy()?, q.copy()?);
    let (mut pc, mut qc) = (p, q);
    step_both(&mut pc, &mut qc, &g, 0.1)?;
    sgd(&mut pe.clone(), &g, 0.1)?;
    sgd(&mut qe.clone(), &g, 0.05)?;
    assert_close("p", &pc, &pe);
    assert_close("q", &qc, &qe);
    let args = [Arg::from(&pc), Arg::from(&qc), Arg::from(&g), Arg::from(0.1)];
    let r = report(step_both::compiled(), &args);
    assert_eq!(r, report(step_both_inline::compiled(), &args));
    assert_eq!(r["fw_metadata"]["input_info"][0]["mutates_data"], true, "{r}");
    assert_eq!(r["fw_metadata"]["input_info"][2]["mutates_data"], false, "{r}");
    Ok(())
}

// ---- a callee returning its input, and a view of it ----

#[aot_fn]
fn same(x: &Tensor) -> Tensor {
    x
}

#[aot_fn]
fn flat(x: &Tensor) -> Tensor {
    x.view(&[-1])
}

#[aot_fn]
fn aliases(x: &Tensor) -> (Tensor, Tensor) {
    let a = same(&x);
    (a, flat(&x))
}

#[aot_fn]
fn aliases_inline(x: &Tensor) -> (Tensor, Tensor) {
    (x, x.view(&[-1]))
}

#[test]
fn callee_returning_its_input_aliases_it() -> Result<()> {
    let x = randn(&[2, 3], 4);
    let (a, b) = aliases(&x)?;
    assert!(a.same_tensor(&x), "the very tensor");
    x.add_(1.0)?;
    assert_close("a view of x", &b, &x.view(&[-1])?);
    let args = [Arg::from(&x)];
    let r = report(aliases::compiled(), &args);
    assert_eq!(r, report(aliases_inline::compiled(), &args));
    let out = &r["fw_metadata"]["output_info"];
    assert_eq!(out[0]["output_type"], "is_input", "{r}");
    assert_eq!(out[1]["output_type"], "alias_of_input", "{r}");
    Ok(())
}

// ---- nested calls, and a callee called in a loop ----

#[aot_fn]
fn scale(x: &Tensor, s: f64) -> Tensor {
    x * s
}

#[aot_fn]
fn shift_scale(x: &Tensor, s: f64) -> Tensor {
    scale(&x, s) + 1.0
}

#[aot_fn]
fn nested(x: &Tensor, n: i64) -> Tensor {
    let mut y = shift_scale(&x, 2.0);
    for _ in 0..3 {
        y = scale(&y, n);
    }
    y
}

#[test]
fn nested_calls_and_a_call_in_a_loop() -> Result<()> {
    let x = randn(&[5], 5);
    let got = nested(&x, 3)?;
    let want = x.mul(2.0)?.add(1.0)?.mul(27.0)?;
    assert_close("nested", &got, &want);
    assert_close("eager reference", &got, &nested::compiled().run_eager(&[Arg::from(&x), Arg::from(3i64)])?[0]);
    Ok(())
}

// ---- training through a call ----

#[aot_fn]
fn loss_of(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    two_layers(&x, &w1, &w2, 0.7).pow(2.0).mean()
}

#[aot_fn]
fn loss_inline(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    let h = (x.matmul(w1) * 1.4).tanh();
    (h.matmul(w2) * 0.5).tanh().pow(2.0).mean()
}

#[test]
fn gradients_through_calls_equal_the_inline_program() -> Result<()> {
    let x = randn(&[3, 4], 6);
    let grads = |f: &dyn Fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor>| -> Result<(Tensor, Tensor, Tensor)> {
        let (w1, w2) = (randn(&[4, 5], 7).requires_grad_(true)?, randn(&[5, 2], 8).requires_grad_(true)?);
        let loss = f(&x, &w1, &w2)?;
        loss.backward()?;
        Ok((loss, w1.grad().expect("w1 grad"), w2.grad().expect("w2 grad")))
    };
    let (l1, g1, h1) = grads(&|x, a, b| loss_of(x, a, b))?;
    let (l2, g2, h2) = grads(&|x, a, b| loss_inline(x, a, b))?;
    assert_close("loss", &l1, &l2);
    assert_close("w1 grad", &g1, &g2);
    assert_close("w2 grad", &h1, &h2);
    let w = randn(&[4, 5], 7).requires_grad_(true)?;
    let w2 = randn(&[5, 2], 8);
    let args = [Arg::from(&x), Arg::from(&w), Arg::from(&w2)];
    assert_eq!(loss_of::compiled().call_path(&args)?, "compiled training");
    Ok(())
}

// ---- fusion crosses the call ----

#[aot_fn]
fn act(x: &Tensor) -> Tensor {
    (x * 2.0).tanh()
}

#[aot_fn]
fn post(x: &Tensor) -> Tensor {
    x.exp() + 1.0
}

#[aot_fn]
fn fused(x: &Tensor) -> Tensor {
    post(&act(&x))
}

#[aot_fn]
fn fused_inline(x: &Tensor) -> Tensor {
    (x * 2.0).tanh().exp() + 1.0
}

#[test]
fn one_fused_kernel_across_the_call() -> Result<()> {
    let x = randn(&[64], 9);
    let args = [Arg::from(&x)];
    let inline = fused_inline::compiled().kernels(&args)?;
    let called = fused::compiled().kernels(&args)?;
    assert_eq!(inline.len(), 1, "{inline:?}");
    assert_eq!(called.len(), 1, "{called:?}");
    assert_eq!(called[0].source, inline[0].source);
    assert_close("fused", &fused(&x)?, &fused_inline(&x)?);
    assert_eq!(report(fused::compiled(), &args), report(fused_inline::compiled(), &args));
    Ok(())
}

// ---- no_grad inside the callee ----

#[aot_fn]
fn ema(avg: &mut Tensor, x: &Tensor) -> Tensor {
    no_grad! {
        avg.mul_(0.9).add_(&(x * 0.1));
    }
    x * 2.0
}

#[aot_fn]
fn with_ema(avg: &mut Tensor, x: &Tensor) -> Tensor {
    ema(&mut avg, &x).sum()
}

#[test]
fn no_grad_in_the_callee_stays_no_grad() -> Result<()> {
    let avg = Tensor::zeros(&[3], DType::F64, &Device::Cpu)?;
    let x = randn(&[3], 10).requires_grad_(true)?;
    let mut a = avg.copy()?;
    let y = with_ema(&mut a, &x)?;
    y.backward()?;
    assert_close("avg", &a, &x.detach()?.mul(0.1)?);
    assert!(!a.requires_grad(), "written under no_grad");
    assert_close("grad", &x.grad().expect("grad"), &Tensor::full(&[3], 2.0, DType::F64, &Device::Cpu)?);
    Ok(())
}

// ---- a `bool` passed on chooses the callee's branch ----

#[aot_fn]
fn maybe_double(x: &Tensor, training: bool) -> Tensor {
    if training {
        x * 2.0
    } else {
        x * 1.0
    }
}

#[aot_fn]
fn passes_flag(x: &Tensor, training: bool) -> Tensor {
    maybe_double(&x, training) + maybe_double(&x, false)
}

#[test]
fn bool_arguments_choose_the_callees_variant() -> Result<()> {
    let x = randn(&[4], 11);
    assert_close("training", &passes_flag(&x, true)?, &x.mul(3.0)?);
    assert_close("eval", &passes_flag(&x, false)?, &x.mul(2.0)?);
    Ok(())
}

// ---- mutual recursion is an error, not a hang ----

#[aot_fn]
fn ping(x: &Tensor) -> Tensor {
    pong(&x) + 1.0
}

#[aot_fn]
fn pong(x: &Tensor) -> Tensor {
    ping(&x) * 2.0
}

#[test]
fn mutual_recursion_is_a_clear_error() {
    let x = randn(&[2], 12);
    let err = ping(&x).expect_err("recursion");
    let msg = err.to_string();
    assert!(matches!(err, AotError::Signature { .. }), "{msg}");
    assert!(msg.contains("ping calls pong calls ping"), "{msg}");
    // Every use says so, and the other function too.
    assert!(ping::compiled().explain(&[Arg::from(&x)]).is_err());
    let msg = pong(&x).expect_err("recursion").to_string();
    assert!(msg.contains("pong calls ping calls pong"), "{msg}");
}

// ---- struct arguments, and a callee named by its path ----

mod layers {
    use aot_runtime::prelude::*;

    #[derive(TensorTree)]
    pub struct Block {
        pub w: Tensor,
        pub b: Tensor,
    }

    #[aot_fn]
    pub fn block(x: &Tensor, blk: &Block) -> Tensor {
        (x.matmul(&blk.w) + &blk.b).tanh()
    }

    #[aot_fn]
    pub fn decay(blk: &mut Block, lr: f64) {
        blk.w.mul_(1.0 - lr);
        blk.b.mul_(1.0 - lr);
    }
}

#[derive(TensorTree)]
struct Model {
    blocks: Vec<layers::Block>,
    head: Tensor,
}

#[aot_fn]
fn model(x: &Tensor, m: &Model) -> Tensor {
    let mut h = x * 1.0;
    for l in 0..2 {
        let blk = &m.blocks[l];
        h = layers::block(&h, &blk);
    }
    h.matmul(&scale(&m.head, 2.0))
}

#[aot_fn]
fn decay_all(m: &mut Model, lr: f64) {
    for l in 0..2 {
        layers::decay(&mut m.blocks[l], lr);
    }
}

fn make_model() -> Model {
    let blk = |s| layers::Block { w: randn(&[3, 3], s), b: randn(&[3], s + 1) };
    Model { blocks: vec![blk(20), blk(30)], head: randn(&[3, 2], 40) }
}

#[test]
fn struct_arguments_pass_their_fields() -> Result<()> {
    let (x, mut m) = (randn(&[4, 3], 13), make_model());
    let got = model(&x, &m)?;
    let mut h = x.mul(1.0)?;
    for b in &m.blocks {
        h = layers::block(&h, b)?;
    }
    assert_close("model", &got, &h.matmul(&m.head.mul(2.0)?)?);
    // The caller's inputs are the fields the callees read.
    let names: Vec<String> = model::compiled().graph().params.iter().map(|p| p.name.clone()).collect();
    assert!(names.contains(&"m.blocks.1.w".to_string()) && names.contains(&"m.head".to_string()), "{names:?}");

    let before: Vec<Vec<f64>> = m.blocks.iter().map(|b| vals(&b.w)).collect();
    decay_all(&mut m, 0.5)?;
    for (b, w) in m.blocks.iter().zip(&before) {
        let want: Vec<f64> = w.iter().map(|v| v * 0.5).collect();
        assert_eq!(vals(&b.w), want);
    }
    let r = report(decay_all::compiled(), &[Arg::tree(&m), Arg::from(0.5)]);
    assert_eq!(r["fw_metadata"]["input_info"][1]["mutates_data"], true, "{r}");
    Ok(())
}

// ---- a callee reading a size of its argument ----

#[aot_fn]
fn rows(x: &Tensor) -> Tensor {
    x.view(&[x.size(0), -1])
}

#[aot_fn]
fn rows_of(x: &Tensor) -> Tensor {
    rows(&x).sum_dim(&[1], false)
}

#[test]
fn callee_sizes_are_the_callers_arguments() -> Result<()> {
    let x = randn(&[2, 3, 2], 14);
    assert_close("rows", &rows_of(&x)?, &x.view(&[2, 6])?.sum_dim(&[1], false)?);
    let y = randn(&[5, 4], 15);
    assert_close("other shape", &rows_of(&y)?, &y.sum_dim(&[1], false)?);
    Ok(())
}
