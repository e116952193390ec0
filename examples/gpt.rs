//! Trains a character-level GPT on this repository's own Rust sources, then
//! generates text with a KV cache. Every step runs through `#[aot_fn]`
//! functions over structs of tensors (`examples/gpt/model.rs`):
//!
//! - `gpt_forward`: embeddings, causal multi-head attention, LayerNorm, GELU
//!   MLP, residuals and dropout, and the cross-entropy loss; gradients come
//!   from `loss.backward()` through the compiled backward;
//! - `adamw`: PyTorch's AdamW step on every parameter of the model in place
//!   (`&mut Gpt`, and the moments in a `&mut AdamState`), with the bias
//!   corrections computed here on the host;
//! - `decode_step`: one token through the model, writing its keys and values
//!   into a cache preallocated to the context length (`index_copy_`, in
//!   place) and attending over the filled prefix.
//!
//! ```sh
//! cargo run --release --example gpt
//! cargo run --release --example gpt -- --steps 1000 --width 128 --plot loss.svg
//! ```
//!
//! Flags (each takes a value): `--device cpu|cuda|cuda:N`, `--steps`,
//! `--batch`, `--ctx` (context length), `--width`, `--heads`, `--dropout`,
//! `--lr`, `--tokens` (to generate), `--temperature` (0 for greedy),
//! `--seed`, `--plot` (the SVG of the loss curve; default in the temp
//! folder). It fails if the loss does not fall.

#[path = "gpt/model.rs"]
mod model;

use aot_runtime::prelude::*;
use indicatif::{ProgressBar, ProgressStyle};
use model::{adamw, decode_step, gpt_forward, AdamState, Config, Gpt, KvCache};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The corpus: a few of this repository's sources, a few hundred KB.
const CORPUS: [&str; 6] = [
    include_str!("../aot-runtime/src/tensor.rs"),
    include_str!("../aot-runtime/src/tree.rs"),
    include_str!("../aot-runtime/src/compiled.rs"),
    include_str!("../aot-ir/src/op.rs"),
    include_str!("../aot-macros/src/ast.rs"),
    include_str!("../aot-macros/src/lower.rs"),
];
const LOG_EVERY: usize = 50;
const BETAS: (f64, f64) = (0.9, 0.99);
const WEIGHT_DECAY: f64 = 0.1;
const PROMPT: &str = "    pub fn ";

/// The command line.
struct Options {
    dev: Device,
    steps: usize,
    batch: usize,
    ctx: usize,
    width: usize,
    heads: usize,
    dropout: f64,
    lr: f64,
    tokens: usize,
    temperature: f64,
    seed: u64,
    plot: PathBuf,
}

fn options() -> std::result::Result<Options, String> {
    let usage = "usage: gpt [--device cpu|cuda|cuda:N] [--steps N] [--batch N] [--ctx N] [--width N] [--heads N] \
                 [--dropout P] [--lr X] [--tokens N] [--temperature T] [--seed N] [--plot FILE.svg]";
    let mut o = Options {
        dev: Device::Cpu,
        steps: 1000,
        batch: 16,
        ctx: 64,
        width: 96,
        heads: 4,
        dropout: 0.1,
        lr: 3e-3,
        tokens: 300,
        temperature: 0.8,
        seed: 1337,
        plot: std::env::temp_dir().join("gpt_loss.svg"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value; {usage}"))?;
        let count = |name: &str| value.parse::<usize>().ok().filter(|&n| n > 0).ok_or(format!("{name} takes a positive count; {usage}"));
        let real = |name: &str| {
            value.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or(format!("{name} takes a number >= 0; {usage}"))
        };
        match flag.as_str() {
            "--device" => {
                o.dev = match value.as_str() {
                    "cpu" => Device::Cpu,
                    "cuda" => Device::Cuda(0),
                    v => match v.strip_prefix("cuda:").map(str::parse) {
                        Some(Ok(i)) => Device::Cuda(i),
                        _ => return Err(format!("unknown device `{v}`; {usage}")),
                    },
                }
            }
            "--steps" => o.steps = count("--steps")?,
            "--batch" => o.batch = count("--batch")?,
            "--ctx" => o.ctx = count("--ctx")?,
            "--width" => o.width = count("--width")?,
            "--heads" => o.heads = count("--heads")?,
            "--tokens" => o.tokens = count("--tokens")?,
            "--seed" => o.seed = value.parse().map_err(|_| format!("--seed takes an integer; {usage}"))?,
            "--dropout" => o.dropout = real("--dropout")?.min(0.9),
            "--lr" => o.lr = real("--lr")?,
            "--temperature" => o.temperature = real("--temperature")?,
            "--plot" => o.plot = PathBuf::from(value),
            _ => return Err(format!("unknown argument `{flag}`; {usage}")),
        }
    }
    if !o.width.is_multiple_of(o.heads) {
        return Err(format!("--width {} is not a multiple of --heads {}", o.width, o.heads));
    }
    Ok(o)
}

/// SplitMix64: batch offsets and sampling, deterministic and dependency-free.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The corpus as token ids over its characters; the last tenth is held out.
struct Data {
    chars: Vec<char>,
    train: Vec<i64>,
    val: Vec<i64>,
}

impl Data {
    fn new() -> Data {
        let text: String = CORPUS.concat();
        let chars: Vec<char> = text.chars().collect::<BTreeSet<_>>().into_iter().collect();
        let ids: Vec<i64> = text.chars().map(|ch| chars.binary_search(&ch).unwrap_or(0) as i64).collect();
        let split = ids.len() * 9 / 10;
        Data { chars, train: ids[..split].to_vec(), val: ids[split..].to_vec() }
    }

    fn encode(&self, s: &str) -> Vec<i64> {
        s.chars().map(|ch| self.chars.binary_search(&ch).unwrap_or(0) as i64).collect()
    }

    fn decode(&self, ids: &[i64]) -> String {
        ids.iter().map(|&i| self.chars.get(i as usize).copied().unwrap_or('?')).collect()
    }

    /// `batch` random windows of `ctx` tokens and the same shifted by one:
    /// `(idx, targets)`, `[batch, ctx]` each.
    fn batch(ids: &[i64], batch: usize, ctx: usize, rng: &mut SplitMix64, dev: &Device) -> Result<(Tensor, Tensor)> {
        let (mut x, mut y) = (Vec::with_capacity(batch * ctx), Vec::with_capacity(batch * ctx));
        for _ in 0..batch {
            let start = (rng.next() % (ids.len() - ctx - 1) as u64) as usize;
            x.extend_from_slice(&ids[start..start + ctx]);
            y.extend_from_slice(&ids[start + 1..start + ctx + 1]);
        }
        Ok((Tensor::from_vec(x, &[batch, ctx], dev)?, Tensor::from_vec(y, &[batch, ctx], dev)?))
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpt: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let o = options()?;
    let data = Data::new();
    let cfg = Config { vocab: data.chars.len(), ctx: o.ctx, width: o.width, heads: o.heads };
    let mut model = Gpt::new(&cfg, &o.dev, o.seed)?;
    println!(
        "GPT: {} blocks, width {}, {} heads, context {}, vocabulary {} characters ({} parameters) on {}",
        model::LAYERS,
        cfg.width,
        cfg.heads,
        cfg.ctx,
        cfg.vocab,
        model.num_params(),
        o.dev
    );
    println!(
        "corpus: {} characters of this repository's sources ({} held out); {} steps of AdamW (lr {}, batch {}, dropout {})",
        data.train.len() + data.val.len(),
        data.val.len(),
        o.steps,
        o.lr,
        o.batch,
        o.dropout
    );
    aot_runtime::manual_seed(o.seed);
    let losses = train(&mut model, &cfg, &data, &o)?;
    let val = evaluate(&model, &cfg, &data, &o)?;
    println!("held-out loss {val:.4}");
    plot(&losses, &o.plot)?;
    println!("loss curve: {}", o.plot.display());
    generate(&model, &cfg, &data, &o)?;
    let (first, last) = (losses[0], mean_tail(&losses));
    if last >= first {
        return Err(format!("training failed: the final loss {last:.4} is not below the first {first:.4}").into());
    }
    Ok(())
}

fn mean_tail(losses: &[f32]) -> f32 {
    let tail = &losses[losses.len().saturating_sub(LOG_EVERY)..];
    tail.iter().sum::<f32>() / tail.len() as f32
}

/// The training loop; gives every step's loss.
fn train(model: &mut Gpt, cfg: &Config, data: &Data, o: &Options) -> std::result::Result<Vec<f32>, Box<dyn std::error::Error>> {
    let mut state = AdamState { m: model.zeros_like()?, v: model.zeros_like()? };
    let nh = cfg.heads as i64;
    let mut rng = SplitMix64(o.seed);
    let bar = ProgressBar::new(o.steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40.cyan/blue} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")?.progress_chars("=> "),
    );
    let warmup = (o.steps / 10).max(1);
    let mut losses = Vec::with_capacity(o.steps);
    let start = Instant::now();
    for step in 1..=o.steps {
        // Linear warmup, then cosine decay to a tenth.
        let lr = if step <= warmup {
            o.lr * step as f64 / warmup as f64
        } else {
            let frac = (step - warmup) as f64 / (o.steps - warmup).max(1) as f64;
            o.lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * frac).cos()))
        };
        let (x, y) = Data::batch(&data.train, o.batch, cfg.ctx, &mut rng, &o.dev)?;
        let (_logits, loss) = gpt_forward(model, &x, &y, nh, o.dropout)?;
        loss.backward()?;
        let grads = model.take_grads()?;
        let (b1, b2) = BETAS;
        adamw(model, &mut state, &grads, lr, step as i64, WEIGHT_DECAY, b1, b2, 1e-8)?;

        let value = loss.item::<f32>()?;
        if !value.is_finite() {
            bar.abandon();
            return Err(format!("step {step}: the loss is {value}").into());
        }
        losses.push(value);
        bar.set_message(format!("loss {value:.4}"));
        bar.inc(1);
        if step == 1 || step % LOG_EVERY == 0 {
            let avg = mean_tail(&losses);
            // `suspend` prints even when stdout is no terminal (the bar is hidden then).
            bar.suspend(|| println!("step {step:>4}  loss {value:.4}  (mean of the last {:>2}: {avg:.4})", losses.len().min(LOG_EVERY)));
        }
    }
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "trained {} steps in {secs:.1} s: {:.0} tokens/s; loss {:.4} -> {:.4} (mean of the last {LOG_EVERY})",
        o.steps,
        (o.steps * o.batch * cfg.ctx) as f64 / secs,
        losses[0],
        mean_tail(&losses)
    );
    Ok(losses)
}

/// The mean loss on held-out windows, without dropout or gradients.
fn evaluate(model: &Gpt, cfg: &Config, data: &Data, o: &Options) -> Result<f32> {
    let _no_grad = aot_runtime::NoGradGuard::new();
    let mut rng = SplitMix64(o.seed ^ 0xDA7A);
    let nh = cfg.heads as i64;
    let mut sum = 0.0;
    for _ in 0..8 {
        let (x, y) = Data::batch(&data.val, o.batch, cfg.ctx, &mut rng, &o.dev)?;
        sum += gpt_forward(model, &x, &y, nh, 0.0)?.1.item::<f32>()?;
    }
    Ok(sum / 8.0)
}

/// A token drawn from `logits` at `temperature` (the most likely one at 0).
fn sample(logits: &[f32], temperature: f64, rng: &mut SplitMix64) -> i64 {
    let best = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
    if temperature == 0.0 {
        return best as i64;
    }
    let top = logits[best] as f64;
    let weights: Vec<f64> = logits.iter().map(|&l| ((l as f64 - top) / temperature).exp()).collect();
    let mut u = rng.uniform() * weights.iter().sum::<f64>();
    for (i, w) in weights.iter().enumerate() {
        u -= w;
        if u < 0.0 {
            return i as i64;
        }
    }
    best as i64
}

/// Feeds the prompt through the decode step, then samples until the
/// context is full or `--tokens` are generated. A full context starts a
/// fresh cache over the last half of the text (the model has no positions
/// beyond the context).
fn generate(model: &Gpt, cfg: &Config, data: &Data, o: &Options) -> Result<()> {
    let _no_grad = aot_runtime::NoGradGuard::new();
    let nh = cfg.heads as i64;
    let mut cache = KvCache::new(cfg, 1, &o.dev)?;
    let mut rng = SplitMix64(o.seed ^ 0x5A3F);
    let mut text = data.encode(PROMPT);
    let target = text.len() + o.tokens;
    // The tokens not yet in the cache: the prompt first, then each new one.
    let mut pending = text[text.len().saturating_sub(cfg.ctx)..].to_vec();
    let (mut fed, mut positions) = (0usize, 0usize);
    let start = Instant::now();
    loop {
        let mut logits = Vec::new();
        for &tok in &pending {
            let tok = Tensor::from_vec(vec![tok], &[1, 1], &o.dev)?;
            let pos = Tensor::from_vec(vec![fed as i64], &[1], &o.dev)?;
            logits = decode_step(model, &mut cache, &tok, &pos, fed as i64 + 1, nh)?.to_vec::<f32>()?;
            fed += 1;
            positions += 1;
        }
        let next = sample(&logits, o.temperature, &mut rng);
        text.push(next);
        if text.len() >= target {
            break;
        }
        pending = if fed == cfg.ctx {
            // The context is full: positions restart at 0 over the last half.
            fed = 0;
            text[text.len() - (cfg.ctx / 2).max(1)..].to_vec()
        } else {
            vec![next]
        };
    }
    let secs = start.elapsed().as_secs_f64();
    println!("decoded {positions} positions in {secs:.2} s: {:.0} tokens/s (KV cache, batch 1)", positions as f64 / secs);
    println!("--- sample (temperature {}) ---\n{}\n---", o.temperature, data.decode(&text));
    Ok(())
}

/// The loss curve (every step, and its running mean) as an SVG.
fn plot(losses: &[f32], path: &PathBuf) -> std::result::Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = losses.iter().copied().fold(0.0f32, f32::max) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption("gpt: training loss", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(1..losses.len(), 0f32..top)?;
    chart.configure_mesh().x_desc("step").y_desc("cross-entropy").draw()?;
    chart.draw_series(LineSeries::new(losses.iter().enumerate().map(|(i, &l)| (i + 1, l)), BLUE.mix(0.35)))?;
    let running = losses.iter().scan((0.0f32, 0usize), |(acc, n), &l| {
        *n += 1;
        *acc = if *n == 1 { l } else { 0.95 * *acc + 0.05 * l };
        Some(*acc)
    });
    chart.draw_series(LineSeries::new(running.enumerate().map(|(i, l)| (i + 1, l)), RED.stroke_width(2)))?;
    root.present()?;
    Ok(())
}
