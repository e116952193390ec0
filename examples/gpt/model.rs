//! The `gpt` example's model: a character-level GPT (nanoGPT's layout,
//! linear layers without biases, the output head tied to the token
//! embedding) whose forward pass, AdamW update and KV-cache decode step are
//! `#[aot_fn]` functions over structs of tensors. LayerNorm and Adam's
//! update of one parameter are `#[aot_fn]`s of their own, which those call:
//! a call is inlined into the caller's graph, so it fuses with what is
//! around it.
//!
//! `tests/tests/gpt.rs` includes this file: it checks the decode step
//! against the full forward pass and the compiled training step against
//! eager ops.
//!
//! `#[aot_fn]` loops are unrolled over literal ranges, so the number of
//! blocks is fixed here ([`LAYERS`], the `0..2` of every loop); widths,
//! heads, batch and context length are call-time values.

// Not every user of this file calls every item.
#![allow(dead_code)]

use aot_runtime::prelude::*;

/// Transformer blocks (the bound of the `for` loops below, which must be a
/// literal).
pub const LAYERS: usize = 2;

/// The sizes of a model.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub vocab: usize,
    /// Context length: the most positions a sequence (and the KV cache) has.
    pub ctx: usize,
    /// Model width, `heads * head_dim`.
    pub width: usize,
    pub heads: usize,
}

impl Config {
    pub fn head_dim(&self) -> usize {
        self.width / self.heads
    }

    /// The attention's `1 / sqrt(head_dim)`.
    pub fn scale(&self) -> f64 {
        1.0 / (self.head_dim() as f64).sqrt()
    }
}

/// One transformer block: LayerNorm, causal self-attention, LayerNorm, MLP.
#[derive(TensorTree)]
pub struct Block {
    pub ln1_w: Tensor,
    pub ln1_b: Tensor,
    /// `[width, 3 * width]`: queries, keys and values side by side.
    pub w_qkv: Tensor,
    pub w_o: Tensor,
    pub ln2_w: Tensor,
    pub ln2_b: Tensor,
    pub w_fc: Tensor,
    pub w_proj: Tensor,
}

/// The GPT: embeddings, blocks, the final LayerNorm; the lm head is
/// `wte.t()`.
#[derive(TensorTree)]
pub struct Gpt {
    pub wte: Tensor,
    pub wpe: Tensor,
    pub blocks: Vec<Block>,
    pub lnf_w: Tensor,
    pub lnf_b: Tensor,
}

/// AdamW's moments, one struct of the model's shape each.
#[derive(TensorTree)]
pub struct AdamState {
    pub m: Gpt,
    pub v: Gpt,
}

/// The keys and values of every block, `[batch, heads, ctx, head_dim]`
/// each, written in place at each decoded position.
#[derive(TensorTree)]
pub struct KvCache {
    #[buffer]
    pub k: Vec<Tensor>,
    #[buffer]
    pub v: Vec<Tensor>,
}

impl Gpt {
    /// GPT-2's initialisation: weights `N(0, 0.02)`, the residual
    /// projections scaled by `1 / sqrt(2 * LAYERS)`, LayerNorms `(1, 0)`; the
    /// parameters require grad.
    pub fn new(cfg: &Config, dev: &Device, seed: u64) -> Result<Gpt> {
        let (c, mut seed) = (cfg.width, seed);
        let mut normal = |shape: &[usize], std: f64| -> Result<Tensor> {
            seed += 1;
            Tensor::randn(shape, DType::F32, dev, seed)?.mul(std)
        };
        let proj_std = 0.02 / (2.0 * LAYERS as f64).sqrt();
        let ones = || Tensor::ones(&[c], DType::F32, dev);
        let zeros = || Tensor::zeros(&[c], DType::F32, dev);
        let mut blocks = Vec::with_capacity(LAYERS);
        for _ in 0..LAYERS {
            blocks.push(Block {
                ln1_w: ones()?,
                ln1_b: zeros()?,
                w_qkv: normal(&[c, 3 * c], 0.02)?,
                w_o: normal(&[c, c], proj_std)?,
                ln2_w: ones()?,
                ln2_b: zeros()?,
                w_fc: normal(&[c, 4 * c], 0.02)?,
                w_proj: normal(&[4 * c, c], proj_std)?,
            });
        }
        let model = Gpt { wte: normal(&[cfg.vocab, c], 0.02)?, wpe: normal(&[cfg.ctx, c], 0.02)?, blocks, lnf_w: ones()?, lnf_b: zeros()? };
        for leaf in model.flatten() {
            if leaf.kind == aot_runtime::tree::LeafKind::Parameter {
                leaf.tensor.requires_grad_(true)?;
            }
        }
        Ok(model)
    }

    /// The number of trained values.
    pub fn num_params(&self) -> usize {
        self.flatten().iter().filter(|l| l.kind == aot_runtime::tree::LeafKind::Parameter).map(|l| l.tensor.numel()).sum()
    }

    /// A struct of the same shape whose tensors are zeros (AdamW's moments).
    pub fn zeros_like(&self) -> Result<Gpt> {
        let zeros = self.flatten().iter().map(|l| l.tensor.detach()?.zeros_like()).collect::<Result<Vec<_>>>()?;
        self.rebuild_from(zeros)
    }

    /// The parameters' gradients as a struct of the model's shape; a buffer
    /// stands for itself (AdamW never reads it). Clears the gradients
    /// (`zero_grad(set_to_none=True)`).
    pub fn take_grads(&self) -> Result<Gpt> {
        let mut grads = Vec::new();
        for leaf in self.flatten() {
            grads.push(match leaf.kind {
                aot_runtime::tree::LeafKind::Buffer => leaf.tensor,
                aot_runtime::tree::LeafKind::Parameter => {
                    let msg = format!("the parameter `{}` got no gradient", leaf.path);
                    let g = leaf.tensor.grad().ok_or(AotError::Autograd { op: "take_grads".into(), msg })?;
                    leaf.tensor.set_grad(None);
                    g
                }
            });
        }
        self.rebuild_from(grads)
    }
}

impl KvCache {
    /// Zeros for `batch` sequences of up to `cfg.ctx` positions.
    pub fn new(cfg: &Config, batch: usize, dev: &Device) -> Result<KvCache> {
        let shape = [batch, cfg.heads, cfg.ctx, cfg.head_dim()];
        let zeros = || (0..LAYERS).map(|_| Tensor::zeros(&shape, DType::F32, dev)).collect::<Result<Vec<_>>>();
        Ok(KvCache { k: zeros()?, v: zeros()? })
    }
}

/// LayerNorm over the last dim with eps 1e-5 (PyTorch's `F.layer_norm`),
/// called from the functions below: its graph is inlined into theirs.
#[aot_fn]
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let mu = x.mean_dim(&[-1], true);
    (x - mu) * (x.var_dim(&[-1], 0, true) + 1e-5).rsqrt() * w + b
}

/// The forward pass over `idx` (`[b, t]` token ids) and the mean
/// cross-entropy against `targets` (`[b, t]`) with `nh` attention heads:
/// `(logits [b, t, vocab], loss)`. `p` is the dropout probability (0 to
/// evaluate). The batch, the context length and the width are read from
/// the arguments' sizes at call time.
#[aot_fn]
pub fn gpt_forward(m: &Gpt, idx: &Tensor, targets: &Tensor, nh: i64, p: f64) -> (Tensor, Tensor) {
    let (b, t, c) = (idx.size(0), idx.size(1), m.wte.size(1));
    let hd = c / nh;
    let scale = 1.0 / (hd as f64).sqrt();
    let mut x = (idx.embedding(&m.wte) + m.wpe.narrow(0, 0, t)).dropout(p);
    // Position j is hidden from position i when j > i.
    let pos = Tensor::arange(0, t, 1, DType::I64, &idx.device());
    let masked = pos.unsqueeze(0).gt(&pos.unsqueeze(1));
    for l in 0..2 {
        let blk = &m.blocks[l];
        let h = layer_norm(&x, &blk.ln1_w, &blk.ln1_b);
        let qkv = h.matmul(&blk.w_qkv);
        let q = qkv.narrow(2, 0, c).view(&[b, t, nh, hd]).transpose(1, 2);
        let k = qkv.narrow(2, c, c).view(&[b, t, nh, hd]).transpose(1, 2);
        let v = qkv.narrow(2, 2 * c, c).view(&[b, t, nh, hd]).transpose(1, 2);
        let att = (q.matmul(&k.transpose(2, 3)) * scale).masked_fill(&masked, -1e9).softmax(-1).dropout(p);
        let y = att.matmul(&v).transpose(1, 2).contiguous().view(&[b, t, c]);
        x = x + y.matmul(&blk.w_o).dropout(p);
        let h = layer_norm(&x, &blk.ln2_w, &blk.ln2_b);
        x = x + h.matmul(&blk.w_fc).gelu().matmul(&blk.w_proj).dropout(p);
    }
    let h = layer_norm(&x, &m.lnf_w, &m.lnf_b);
    let logits = h.matmul(&m.wte.t());
    let loss = logits.flatten(0, 1).cross_entropy(&targets.flatten(0, 1));
    (logits, loss)
}

/// One decode step for `tok` (`[b, 1]`) at position `pos` (`[1]`, I64;
/// `len = pos + 1` positions are then filled) with `nh` heads: writes this
/// position's keys and values into the cache in place, attends over the
/// filled prefix, and gives the next token's logits `[b, vocab]`.
#[aot_fn]
pub fn decode_step(m: &Gpt, cache: &mut KvCache, tok: &Tensor, pos: &Tensor, len: i64, nh: i64) -> Tensor {
    let (b, c) = (tok.size(0), m.wte.size(1));
    let hd = c / nh;
    let scale = 1.0 / (hd as f64).sqrt();
    let mut x = tok.embedding(&m.wte) + pos.embedding(&m.wpe);
    for l in 0..2 {
        let blk = &m.blocks[l];
        let h = layer_norm(&x, &blk.ln1_w, &blk.ln1_b);
        let qkv = h.matmul(&blk.w_qkv);
        let q = qkv.narrow(2, 0, c).view(&[b, 1, nh, hd]).transpose(1, 2);
        cache.k[l].index_copy_(2, pos, &qkv.narrow(2, c, c).view(&[b, 1, nh, hd]).transpose(1, 2));
        cache.v[l].index_copy_(2, pos, &qkv.narrow(2, 2 * c, c).view(&[b, 1, nh, hd]).transpose(1, 2));
        let keys = cache.k[l].narrow(2, 0, len);
        let att = (q.matmul(&keys.transpose(2, 3)) * scale).softmax(-1);
        let y = att.matmul(&cache.v[l].narrow(2, 0, len)).transpose(1, 2).contiguous().view(&[b, 1, c]);
        x = x + y.matmul(&blk.w_o);
        let h = layer_norm(&x, &blk.ln2_w, &blk.ln2_b);
        x = x + h.matmul(&blk.w_fc).gelu().matmul(&blk.w_proj);
    }
    let h = layer_norm(&x, &m.lnf_w, &m.lnf_b);
    h.matmul(&m.wte.t()).select(1, 0)
}

/// Adam's update of one parameter and its moments, in place, with the
/// step's bias corrections (`adamw` calls it for every parameter; the
/// calls are inlined).
#[aot_fn]
#[allow(clippy::too_many_arguments)]
pub fn adam_update(p: &mut Tensor, m: &mut Tensor, v: &mut Tensor, g: &Tensor, b1: f64, b2: f64, eps: f64, step_size: f64, bc2_sqrt: f64) {
    no_grad! {
        m.mul_(b1).add_(g * (1.0 - b1));
        v.mul_(b2).add_(g.square() * (1.0 - b2));
        p.sub_(m / (v.sqrt() / bc2_sqrt + eps) * step_size);
    }
}

/// PyTorch's `AdamW` step on every parameter, in place (`torch.optim.AdamW`,
/// `foreach=False`): `p *= 1 - lr * wd` (matrices only, as nanoGPT decays
/// only 2-D parameters), `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g²`,
/// `p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)`, with the bias
/// corrections of step `t` computed in the body, at call time:
/// `step_size = lr / (1 - b1^t)`, `bc2_sqrt = sqrt(1 - b2^t)`,
/// `decay = 1 - lr * wd`.
#[aot_fn]
#[allow(clippy::too_many_arguments)]
pub fn adamw(p: &mut Gpt, st: &mut AdamState, g: &Gpt, lr: f64, t: i64, wd: f64, b1: f64, b2: f64, eps: f64) {
    // The bias corrections of step `t`, computed at call time.
    let step_size = lr / (1.0 - b1.powi(t));
    let bc2_sqrt = (1.0 - b2.powi(t)).sqrt();
    let decay = 1.0 - lr * wd;
    no_grad! {
        p.wte.mul_(decay);
        adam_update(&mut p.wte, &mut st.m.wte, &mut st.v.wte, &g.wte, b1, b2, eps, step_size, bc2_sqrt);
        p.wpe.mul_(decay);
        adam_update(&mut p.wpe, &mut st.m.wpe, &mut st.v.wpe, &g.wpe, b1, b2, eps, step_size, bc2_sqrt);
        adam_update(&mut p.lnf_w, &mut st.m.lnf_w, &mut st.v.lnf_w, &g.lnf_w, b1, b2, eps, step_size, bc2_sqrt);
        adam_update(&mut p.lnf_b, &mut st.m.lnf_b, &mut st.v.lnf_b, &g.lnf_b, b1, b2, eps, step_size, bc2_sqrt);
        for l in 0..2 {
            let pb = &p.blocks[l];
            let mb = &st.m.blocks[l];
            let vb = &st.v.blocks[l];
            let gb = &g.blocks[l];
            adam_update(&mut pb.ln1_w, &mut mb.ln1_w, &mut vb.ln1_w, &gb.ln1_w, b1, b2, eps, step_size, bc2_sqrt);
            adam_update(&mut pb.ln1_b, &mut mb.ln1_b, &mut vb.ln1_b, &gb.ln1_b, b1, b2, eps, step_size, bc2_sqrt);
            pb.w_qkv.mul_(decay);
            adam_update(&mut pb.w_qkv, &mut mb.w_qkv, &mut vb.w_qkv, &gb.w_qkv, b1, b2, eps, step_size, bc2_sqrt);
            pb.w_o.mul_(decay);
            adam_update(&mut pb.w_o, &mut mb.w_o, &mut vb.w_o, &gb.w_o, b1, b2, eps, step_size, bc2_sqrt);
            adam_update(&mut pb.ln2_w, &mut mb.ln2_w, &mut vb.ln2_w, &gb.ln2_w, b1, b2, eps, step_size, bc2_sqrt);
            adam_update(&mut pb.ln2_b, &mut mb.ln2_b, &mut vb.ln2_b, &gb.ln2_b, b1, b2, eps, step_size, bc2_sqrt);
            pb.w_fc.mul_(decay);
            adam_update(&mut pb.w_fc, &mut mb.w_fc, &mut vb.w_fc, &gb.w_fc, b1, b2, eps, step_size, bc2_sqrt);
            pb.w_proj.mul_(decay);
            adam_update(&mut pb.w_proj, &mut mb.w_proj, &mut vb.w_proj, &gb.w_proj, b1, b2, eps, step_size, bc2_sqrt);
        }
    }
}
