//! W4: one training step of the `gpt` example's model
//! (`examples/gpt/model.rs`, included below): 2 blocks, width 96, 4 heads,
//! context 64, batch 16, dropout 0.1, a vocabulary of 96 (a character
//! vocabulary's size) and random token ids; AdamW with betas (0.9, 0.99),
//! weight decay 0.1 on the matrices and lr 3e-3. Tokens/s of three
//! variants:
//!
//! - aot compiled: `gpt_forward`, `loss.backward()` and `adamw`, the
//!   `#[aot_fn]` functions as the example calls them;
//! - aot eager: the same functions run op by op on eager tensors
//!   (`NAME::compiled().run_eager`, the DSL's eager twin of an `#[aot_fn]`),
//!   with eager autograd for the backward and AdamW's in-place ops under
//!   no-grad;
//! - PyTorch eager: `benches/python/gpt_torch.py` in a child process, when
//!   a Python with torch is found ([`python`]).
//!
//! The two aot variants alternate step by step on their own copies of the
//! model. PyTorch runs alone, before them and after them, each time twice:
//! as the environment has it, and with `OMP_WAIT_POLICY=PASSIVE`. Its
//! OpenMP threads spin while they wait for each other by default, so other
//! load on the machine slows it far more than it slows aot, whose idle
//! threads sleep: on a 2-core machine with a load average of 4-7, the
//! default ran at 0.05-0.4x the passive policy's tokens/s. The ratio takes
//! the fastest of the four runs. Each figure is the mean over the timed
//! steps (tokens / total time), as the PyTorch script computes its own; the
//! report shows the machine's load average.

#[path = "../../examples/gpt/model.rs"]
mod model;

use crate::{median, BenchResult};
use aot_runtime::prelude::*;
use model::{adamw, gpt_forward, AdamState, Config, Gpt};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

pub const VOCAB: usize = 96;
pub const BATCH: usize = 16;
pub const CTX: usize = 64;
pub const WIDTH: usize = 96;
pub const HEADS: usize = 4;
const DROPOUT: f64 = 0.1;
const LR: f64 = 3e-3;
const BETAS: (f64, f64) = (0.9, 0.99);
const WEIGHT_DECAY: f64 = 0.1;
const EPS: f64 = 1e-8;
const SEED: u64 = 1337;
const WARMUP: usize = 5;
/// Tokens per step.
const TOKENS: usize = BATCH * CTX;
/// The aot variants, in [`Report`]'s order.
pub const VARIANTS: [&str; 2] = ["aot compiled", "aot eager"];

/// W4's figures.
pub struct Report {
    pub steps: usize,
    /// Mean tokens/s of the aot variants, in [`VARIANTS`]' order.
    pub tokens_per_s: [f64; 2],
    /// Median ms per step of the aot variants.
    pub median_ms: [f64; 2],
    /// Median ms of each phase (forward, backward with `take_grads`,
    /// AdamW) of the aot variants.
    pub phase_ms: [[f64; 3]; 2],
    pub first_loss: [f32; 2],
    pub last_loss: [f32; 2],
    /// PyTorch's tokens/s before and after the aot variants (the outer
    /// index), each with the environment's OpenMP wait policy and with
    /// `PASSIVE`; or why there are none.
    pub torch: std::result::Result<[[f64; 2]; 2], String>,
    /// `/proc/loadavg`'s 1-minute figure at the start, where there is one.
    pub load: Option<f64>,
}

impl Report {
    pub fn compiled(&self) -> f64 {
        self.tokens_per_s[0]
    }
    pub fn eager(&self) -> f64 {
        self.tokens_per_s[1]
    }
    /// compiled/eager tokens/s.
    pub fn compiled_over_eager(&self) -> f64 {
        self.compiled() / self.eager()
    }
    /// PyTorch's tokens/s: the fastest of its runs.
    pub fn torch_best(&self) -> Option<f64> {
        self.torch.as_ref().ok().map(|r| r.iter().flatten().fold(0.0, |a, &b| b.max(a)))
    }
    /// compiled/PyTorch tokens/s, when PyTorch ran.
    pub fn compiled_over_torch(&self) -> Option<f64> {
        self.torch_best().map(|t| self.compiled() / t)
    }

    pub fn print(&self) {
        println!(
            "W4: the gpt example's training step ({} blocks, width {WIDTH}, {HEADS} heads, batch {BATCH}, context {CTX}, \
             vocabulary {VOCAB}, dropout {DROPOUT}, AdamW); mean of {} steps after {WARMUP} warm-up, {} cores",
            model::LAYERS,
            self.steps,
            crate::cores()
        );
        if let Some(l) = self.load {
            println!("  load average at the start: {l:.2}");
        }
        for (i, name) in VARIANTS.iter().enumerate() {
            let [f, b, o] = self.phase_ms[i];
            println!(
                "  {name:<13} {:>8.0} tokens/s  median {:.2} ms/step (forward {f:.2}, backward {b:.2}, AdamW {o:.2})  loss {:.4} -> {:.4}",
                self.tokens_per_s[i], self.median_ms[i], self.first_loss[i], self.last_loss[i]
            );
        }
        match &self.torch {
            Ok([[a, b], [c, d]]) => println!(
                "  {:<13} {:>8.0} tokens/s, the fastest of: before aot {a:.0} (default OpenMP wait), {b:.0} (passive); after {c:.0}, {d:.0}",
                "PyTorch eager",
                self.torch_best().unwrap_or(0.0)
            ),
            Err(why) => println!("  {why}"),
        }
        let torch = self.compiled_over_torch().map_or("n/a".to_string(), |r| format!("{r:.2}x"));
        println!("  ratio compiled/PyTorch {torch}  compiled/eager {:.2}x  (tokens/s)", self.compiled_over_eager());
    }
}

/// Random token ids in `[0, VOCAB)`, `BATCH` rows of `CTX + 1`: the
/// inputs and the same shifted by one, `[BATCH, CTX]` each.
fn batch() -> Result<(Tensor, Tensor)> {
    let mut s = SEED;
    let mut next = || {
        // SplitMix64
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % VOCAB as u64) as i64
    };
    let rows: Vec<Vec<i64>> = (0..BATCH).map(|_| (0..=CTX).map(|_| next()).collect()).collect();
    let x = rows.iter().flat_map(|r| r[..CTX].to_vec()).collect();
    let y = rows.iter().flat_map(|r| r[1..].to_vec()).collect();
    Ok((Tensor::from_vec(x, &[BATCH, CTX], &Device::Cpu)?, Tensor::from_vec(y, &[BATCH, CTX], &Device::Cpu)?))
}

/// One aot variant: its model, AdamW's moments and step count.
struct GptStep {
    compiled: bool,
    model: Gpt,
    state: AdamState,
    x: Tensor,
    y: Tensor,
    t: i64,
    /// Each step's ms per phase: forward, backward, AdamW.
    phases: [Vec<f64>; 3],
}

impl GptStep {
    fn new(compiled: bool) -> Result<GptStep> {
        let cfg = Config { vocab: VOCAB, ctx: CTX, width: WIDTH, heads: HEADS };
        let model = Gpt::new(&cfg, &Device::Cpu, SEED)?;
        let state = AdamState { m: model.zeros_like()?, v: model.zeros_like()? };
        let (x, y) = batch()?;
        Ok(GptStep { compiled, model, state, x, y, t: 0, phases: Default::default() })
    }

    /// The forward and the loss, the backward, AdamW; gives the loss.
    fn step(&mut self) -> BenchResult<f32> {
        self.t += 1;
        let nh = HEADS as i64;
        let st = Instant::now();
        let loss = if self.compiled {
            gpt_forward(&self.model, &self.x, &self.y, nh, DROPOUT)?.1
        } else {
            let args = [Arg::tree(&self.model), (&self.x).into(), (&self.y).into(), nh.into(), DROPOUT.into()];
            gpt_forward::compiled().run_eager(&args)?.pop().ok_or("gpt_forward returned nothing")?
        };
        let forward = st.elapsed();
        loss.backward()?;
        let grads = self.model.take_grads()?;
        let backward = st.elapsed();
        let (b1, b2) = BETAS;
        if self.compiled {
            adamw(&mut self.model, &mut self.state, &grads, LR, self.t, WEIGHT_DECAY, b1, b2, EPS)?;
        } else {
            let (m, st, g) = (Arg::tree(&self.model), Arg::tree(&self.state), Arg::tree(&grads));
            let args = [m, st, g, LR.into(), self.t.into(), WEIGHT_DECAY.into(), b1.into(), b2.into(), EPS.into()];
            adamw::compiled().run_eager(&args)?;
        }
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        for (v, x) in self.phases.iter_mut().zip([ms(forward), ms(backward - forward), ms(st.elapsed() - backward)]) {
            v.push(x);
        }
        Ok(loss.item::<f32>()?)
    }
}

/// Runs W4: PyTorch for `steps` after its own warm-up, the aot variants
/// alternating for `WARMUP + steps` steps, then PyTorch again.
pub fn run(steps: usize) -> BenchResult<Report> {
    let load = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| s.split_whitespace().next()?.parse().ok());
    let torch_before = run_torch(steps, false).and_then(|a| Ok([a, run_torch(steps, true)?]));
    aot_runtime::manual_seed(SEED);
    let mut variants = [GptStep::new(true)?, GptStep::new(false)?];
    let mut t: [Vec<f64>; 2] = Default::default();
    let (mut first_loss, mut last_loss) = ([0.0f32; 2], [0.0f32; 2]);
    for step in 0..WARMUP + steps {
        if step == WARMUP {
            variants.iter_mut().for_each(|v| v.phases = Default::default());
        }
        for (i, v) in variants.iter_mut().enumerate() {
            let st = Instant::now();
            let loss = black_box(v.step()?);
            let ms = st.elapsed().as_secs_f64() * 1e3;
            if step == 0 {
                first_loss[i] = loss;
            }
            last_loss[i] = loss;
            if step >= WARMUP {
                t[i].push(ms);
            }
        }
    }
    let tokens_per_s = [0, 1].map(|i| (TOKENS * t[i].len()) as f64 / (t[i].iter().sum::<f64>() / 1e3));
    let median_ms = [0, 1].map(|i| median(&mut t[i]));
    let phase_ms = [0, 1].map(|i| [0, 1, 2].map(|p| median(&mut variants[i].phases[p])));
    let torch = torch_before.and_then(|a| Ok([a, [run_torch(steps, false)?, run_torch(steps, true)?]]));
    Ok(Report { steps, tokens_per_s, median_ms, phase_ms, first_loss, last_loss, torch, load })
}

/// Times one aot variant alone (`compiled` or `eager`), for a profiler: its
/// median ms per step over `steps` after the warm-up.
pub fn run_only(name: &str, steps: usize) -> BenchResult<f64> {
    let compiled = match name {
        "compiled" => true,
        "eager" => false,
        _ => return Err("W4_ONLY is compiled or eager".into()),
    };
    aot_runtime::manual_seed(SEED);
    let mut v = GptStep::new(compiled)?;
    let mut t = Vec::new();
    for step in 0..WARMUP + steps {
        let st = Instant::now();
        black_box(v.step()?);
        if step >= WARMUP {
            t.push(st.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(median(&mut t))
}

/// The Python to run PyTorch with: `AOT_BENCH_PYTHON`, else
/// `benches/.venv/bin/python`, else `python3`; `Err` when that Python
/// cannot import torch.
pub fn python() -> std::result::Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let py = match std::env::var_os("AOT_BENCH_PYTHON") {
        Some(p) => PathBuf::from(p),
        None if venv.exists() => venv,
        None => PathBuf::from("python3"),
    };
    match Command::new(&py).args(["-c", "import torch"]).output() {
        Ok(o) if o.status.success() => Ok(py),
        _ => Err(format!(
            "PyTorch not found ({} cannot import torch; set AOT_BENCH_PYTHON or make benches/.venv, see docs/benchmarks.md)",
            py.display()
        )),
    }
}

/// PyTorch's tokens/s from `benches/python/gpt_torch.py` at W4's sizes;
/// `passive` sets `OMP_WAIT_POLICY=PASSIVE` (else the environment's).
fn run_torch(steps: usize, passive: bool) -> std::result::Result<f64, String> {
    let py = python()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/gpt_torch.py");
    let n = |v: usize| v.to_string();
    let args = [
        ("--vocab", n(VOCAB)),
        ("--batch", n(BATCH)),
        ("--ctx", n(CTX)),
        ("--width", n(WIDTH)),
        ("--heads", n(HEADS)),
        ("--layers", n(model::LAYERS)),
        ("--dropout", DROPOUT.to_string()),
        ("--steps", n(steps)),
        ("--warmup", n(WARMUP)),
    ];
    let mut cmd = Command::new(&py);
    cmd.arg(&script);
    if passive {
        cmd.env("OMP_WAIT_POLICY", "PASSIVE");
    }
    for (flag, value) in &args {
        cmd.args([flag, value.as_str()]);
    }
    let out = cmd.output().map_err(|e| format!("PyTorch: cannot run {}: {e}", py.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("PyTorch failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("tokens_per_s ").and_then(|v| v.trim().parse().ok()))
        .ok_or_else(|| format!("PyTorch printed no tokens_per_s line: {}", stdout.trim()))
}
