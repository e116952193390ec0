//! The `gpt` example's model (`examples/gpt/model.rs`) at a tiny size: its
//! loss falls under the compiled training step and AdamW, decoding with the
//! KV cache gives the full forward pass's logits at every position, and the
//! compiled training step (loss, gradients, AdamW's in-place updates)
//! equals the same model written with eager ops.

#[path = "../../examples/gpt/model.rs"]
mod model;

use aot_runtime::prelude::*;
use aot_runtime::testing::num_specializations;
use aot_runtime::tree::LeafKind;
use model::{adamw, decode_step, gpt_forward, AdamState, Config, Gpt, KvCache};

const CFG: Config = Config { vocab: 11, ctx: 8, width: 16, heads: 2 };
const BATCH: usize = 2;
const BETAS: (f64, f64) = (0.9, 0.99);

/// The generator is global and every forward draws from it (dropout, even
/// at p = 0): the tests take turns.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    GENERATOR.lock().unwrap_or_else(|e| e.into_inner())
}

fn ids(v: Vec<i64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape, &Device::Cpu).expect("ids")
}

/// A fixed batch: two windows of a periodic sequence and their next tokens.
fn batch() -> (Tensor, Tensor) {
    let seq: Vec<i64> = (0..40).map(|i| (i * 7 + i / 3) % CFG.vocab as i64).collect();
    let window = |s: usize| seq[s..s + CFG.ctx].to_vec();
    let x = [window(0), window(13)].concat();
    let y = [window(1), window(14)].concat();
    (ids(x, &[BATCH, CFG.ctx]), ids(y, &[BATCH, CFG.ctx]))
}

fn sizes() -> (i64, i64, i64, i64) {
    (BATCH as i64, CFG.ctx as i64, CFG.heads as i64, CFG.head_dim() as i64)
}

/// AdamW's host-side scalars for step `t` at learning rate `lr`:
/// `(step_size, bc2_sqrt, decay)`.
fn adam_scalars(t: i32, lr: f64) -> (f64, f64, f64) {
    (lr / (1.0 - BETAS.0.powi(t)), (1.0 - BETAS.1.powi(t)).sqrt(), 1.0 - lr * 0.1)
}

/// One compiled training step; gives the loss.
fn train_step(m: &mut Gpt, st: &mut AdamState, t: i32, lr: f64, p: f64) -> Result<f32> {
    let (x, y) = batch();
    let nh = sizes().2;
    let (_, loss) = gpt_forward(m, &x, &y, nh, p)?;
    loss.backward()?;
    let grads = m.take_grads()?;
    adamw(m, st, &grads, lr, i64::from(t), 0.1, BETAS.0, BETAS.1, 1e-8)?;
    loss.item::<f32>()
}

#[test]
fn the_loss_falls() -> Result<()> {
    let _turn = turn();
    let mut m = Gpt::new(&CFG, &Device::Cpu, 7)?;
    let mut st = AdamState { m: m.zeros_like()?, v: m.zeros_like()? };
    let losses = (1..=12).map(|t| train_step(&mut m, &mut st, t, 1e-2, 0.0)).collect::<Result<Vec<_>>>()?;
    assert!((losses[0] - (CFG.vocab as f32).ln()).abs() < 0.05, "starts near ln(vocab): {losses:?}");
    assert!(losses[11] < 0.8 * losses[0], "the loss falls: {losses:?}");
    Ok(())
}

/// A model whose logits are far from uniform: the initial weights scaled
/// up, and LayerNorm affines drawn at random.
fn sharp_model(seed: u64) -> Result<Gpt> {
    let m = Gpt::new(&CFG, &Device::Cpu, seed)?;
    let _g = aot_runtime::NoGradGuard::new();
    for (i, leaf) in m.flatten().into_iter().enumerate() {
        if leaf.kind == LeafKind::Parameter {
            let noise = Tensor::randn(&leaf.tensor.shape(), DType::F32, &Device::Cpu, 100 + i as u64)?.mul(0.3)?;
            leaf.tensor.mul_(20.0)?.add_(&noise)?;
        }
    }
    Ok(m)
}

/// Every element within `tol` times the largest magnitude of `want` (at
/// least 1e-30): f32 sums in another order differ in the last bits.
fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1e-30f32, |a, &w| a.max(w.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * scale, "{what}[{i}]: {a} vs {b} (largest {scale})");
    }
}

#[test]
fn decoding_with_the_cache_gives_the_full_forward_logits() -> Result<()> {
    let _turn = turn();
    let _g = aot_runtime::NoGradGuard::new();
    let m = sharp_model(3)?;
    let (x, y) = batch();
    let nh = sizes().2;
    let (full, _) = gpt_forward(&m, &x, &y, nh, 0.0)?;
    let v = CFG.vocab;
    let full = full.to_vec::<f32>()?; // [b, t, v]
    let spread = full.iter().fold(0f32, |a, &l| a.max(l.abs()));
    assert!(spread > 1.0, "the logits are not all near zero: {spread}");

    let mut cache = KvCache::new(&CFG, BATCH, &Device::Cpu)?;
    let k0 = cache.k[0].clone();
    let (tok, p) = (ids(vec![0; BATCH], &[BATCH, 1]), ids(vec![0], &[1]));
    let args = [Arg::tree(&m), Arg::tree(&cache), (&tok).into(), (&p).into(), 1i64.into(), nh.into()];
    assert_eq!(decode_step::compiled().call_path(&args)?, "inference");
    let xs = x.to_vec::<i64>()?;
    for pos in 0..CFG.ctx {
        let tok = ids((0..BATCH).map(|r| xs[r * CFG.ctx + pos]).collect(), &[BATCH, 1]);
        let p = ids(vec![pos as i64], &[1]);
        let got = decode_step(&m, &mut cache, &tok, &p, pos as i64 + 1, nh)?;
        assert_eq!(got.shape(), [BATCH, v]);
        let want: Vec<f32> = (0..BATCH).flat_map(|r| full[(r * CFG.ctx + pos) * v..][..v].to_vec()).collect();
        assert_close(&format!("logits at position {pos}"), &got.to_vec::<f32>()?, &want, 1e-5);
        // The cache is written in place: this position is filled, the next still zero.
        let keys = cache.k[1].to_vec::<f32>()?; // [b, h, ctx, hd]
        let at = |q: usize| keys[q * CFG.head_dim()..][..CFG.head_dim()].iter().any(|&k| k != 0.0);
        assert!(at(pos), "position {pos} was written");
        assert!(pos + 1 == CFG.ctx || !at(pos + 1), "position {} is not written yet", pos + 1);
    }
    assert!(cache.k[0].same_tensor(&k0), "the caller's cache tensors are updated, not replaced");
    // The position is a call-time value: one specialisation serves them all.
    assert_eq!(num_specializations(decode_step::compiled()), 1);
    Ok(())
}

/// LayerNorm over the last dim, in eager ops.
fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let mu = x.mean_dim(&[-1], true)?;
    x.sub(&mu)?.mul(&x.var_dim(&[-1], 0, true)?.add(1e-5)?.rsqrt()?)?.mul(w)?.add(b)
}

/// `gpt_forward`'s loss written with eager ops.
fn loss_eager(m: &Gpt, x: &Tensor, y: &Tensor, p: f64) -> Result<Tensor> {
    let (b, t, nh, hd) = sizes();
    let c = nh * hd;
    let heads = |a: &Tensor| a.view(&[b, t, nh, hd])?.transpose(1, 2);
    let mut h = x.embedding(&m.wte)?.add(&m.wpe.narrow(0, 0, t)?)?.dropout(p)?;
    let pos = Tensor::arange(0.0, t as f64, 1.0, DType::I64, &Device::Cpu)?;
    let masked = pos.unsqueeze(0)?.gt(&pos.unsqueeze(1)?)?;
    for blk in &m.blocks {
        let qkv = layer_norm(&h, &blk.ln1_w, &blk.ln1_b)?.matmul(&blk.w_qkv)?;
        let (q, k, v) = (heads(&qkv.narrow(2, 0, c)?)?, heads(&qkv.narrow(2, c, c)?)?, heads(&qkv.narrow(2, 2 * c, c)?)?);
        let att = q.matmul(&k.transpose(2, 3)?)?.mul(CFG.scale())?.masked_fill(&masked, -1e9)?.softmax(-1)?.dropout(p)?;
        let out = att.matmul(&v)?.transpose(1, 2)?.contiguous()?.view(&[b, t, c])?;
        h = h.add(&out.matmul(&blk.w_o)?.dropout(p)?)?;
        let mlp = layer_norm(&h, &blk.ln2_w, &blk.ln2_b)?.matmul(&blk.w_fc)?.gelu()?.matmul(&blk.w_proj)?;
        h = h.add(&mlp.dropout(p)?)?;
    }
    let logits = layer_norm(&h, &m.lnf_w, &m.lnf_b)?.matmul(&m.wte.t()?)?;
    logits.flatten(0, 1)?.cross_entropy(&y.flatten(0, 1)?)
}

/// `adamw` written with eager ops, leaf by leaf (matrices decay).
fn adamw_eager(m: &Gpt, st: &AdamState, t: i32, lr: f64) -> Result<()> {
    let _g = aot_runtime::NoGradGuard::new();
    let (step_size, bc2_sqrt, decay) = adam_scalars(t, lr);
    let (b1, b2) = BETAS;
    for ((p, mo), v) in m.flatten().into_iter().zip(st.m.flatten()).zip(st.v.flatten()) {
        if p.kind == LeafKind::Buffer {
            continue;
        }
        let g = p.tensor.grad().expect("a gradient");
        p.tensor.set_grad(None);
        if p.tensor.shape().len() == 2 {
            p.tensor.mul_(decay)?;
        }
        mo.tensor.mul_(b1)?.add_(&g.mul(1.0 - b1)?)?;
        v.tensor.mul_(b2)?.add_(&g.square()?.mul(1.0 - b2)?)?;
        p.tensor.sub_(&mo.tensor.div(&v.tensor.sqrt()?.div(bc2_sqrt)?.add(1e-8)?)?.mul(step_size)?)?;
    }
    Ok(())
}

fn leaves(m: &Gpt) -> Vec<(String, Vec<f32>)> {
    m.flatten().into_iter().map(|l| (l.path, l.tensor.to_vec::<f32>().expect("values"))).collect()
}

#[test]
fn the_compiled_training_step_equals_eager() -> Result<()> {
    let _turn = turn();
    let (mut got, want) = (Gpt::new(&CFG, &Device::Cpu, 11)?, Gpt::new(&CFG, &Device::Cpu, 11)?);
    let mut st = AdamState { m: got.zeros_like()?, v: got.zeros_like()? };
    let st_eager = AdamState { m: want.zeros_like()?, v: want.zeros_like()? };
    let wte = got.wte.clone();
    let (x, y) = batch();
    let p = 0.1;
    let nh = sizes().2;
    let args = [Arg::tree(&got), (&x).into(), (&y).into(), nh.into(), p.into()];
    assert_eq!(gpt_forward::compiled().call_path(&args)?, "compiled training");
    // Struct arguments are flattened for the kernel listing too.
    assert!(!gpt_forward::compiled().kernels(&args)?.is_empty(), "the training step lists its kernels");
    let args = [Arg::tree(&got), Arg::tree(&st), Arg::tree(&got), 0.1.into(), 1i64.into(), 0.1.into(), 0.1.into(), 0.1.into(), 0.1.into()];
    assert_eq!(adamw::compiled().call_path(&args)?, "inference", "AdamW records no history");
    // With gradients of their own (not the parameters themselves), each
    // parameter's update is one kernel storing p, m and v in place.
    let g0 = got.zeros_like()?;
    let args = [Arg::tree(&got), Arg::tree(&st), Arg::tree(&g0), 0.1.into(), 1i64.into(), 0.1.into(), 0.1.into(), 0.1.into(), 0.1.into()];
    if std::env::var("AOT_KERNELS").map_or(true, |v| v != "0") {
        let ks = adamw::compiled().kernels(&args)?;
        assert_eq!(ks.len(), leaves(&got).len(), "one AdamW kernel per parameter");
        assert!(ks.iter().all(|k| k.source.matches(" in place of in").count() == 3), "each stores p, m and v: {ks:?}");
    }
    for t in 1..=3 {
        // The same generator state for both: dropout draws the same masks.
        aot_runtime::manual_seed(40 + t as u64);
        let loss = train_step(&mut got, &mut st, t, 5e-3, p)?;
        aot_runtime::manual_seed(40 + t as u64);
        let expect = loss_eager(&want, &x, &y, p)?;
        expect.backward()?;
        adamw_eager(&want, &st_eager, t, 5e-3)?;
        assert_close(&format!("loss at step {t}"), &[loss], &[expect.item::<f32>()?], 1e-5);
        for (tree, (a, b)) in [("params", (&got, &want)), ("m", (&st.m, &st_eager.m)), ("v", (&st.v, &st_eager.v))] {
            for ((path, g), (_, w)) in leaves(a).iter().zip(leaves(b)) {
                assert_close(&format!("{tree}.{path} after step {t}"), g, &w, 1e-5);
            }
        }
    }
    assert!(got.wte.same_tensor(&wte), "AdamW updates the caller's parameters in place");
    assert!(got.wte.requires_grad() && got.wte.is_leaf(), "the parameters stay leaves");
    Ok(())
}
