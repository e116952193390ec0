//! Every generated kernel compiles: the CUDA sources that
//! `kernels_for(&args, &Device::Cuda(0))` reports for every call of both
//! oracle corpora, for a few thousand programs of the differential tests
//! (drawn as `run_case` draws them, with their alias patterns and autograd
//! states), for the `train_mlp` example's functions (its optimizer step a
//! launch of segments) and for the `gpt`
//! example's (training step, AdamW, KV-cache decode step), and for a
//! function of the ops the CUDA backend runs as kernels of its own
//! (gathers and scatters, `cumsum`, `argmax`, `max_dim`, `cross_entropy`,
//! which the listing must name) are deduplicated,
//! batched into a few translation units (names unique within a unit; the
//! renderer guards its shared helpers), compiled with the real NVRTC for
//! `compute_80` and `compute_90`, and assembled with ptxas for `sm_80` and
//! `sm_90`.
//!
//! No GPU is needed: `AOT_CUDA_TOOLS` (`.ci/cuda-tools`) provides NVRTC
//! and ptxas; without them the test fails under CI and says why elsewhere.
//! `AOT_CUDA_SOURCES_PROGRAMS=n` sets the number of differential programs
//! per property.
#![cfg(feature = "cuda")]

#[path = "../../ui-tests/tests/oracle/cases.rs"]
mod cases;
#[path = "../../ui-tests/tests/oracle/cases_extra.rs"]
mod cases_extra;
#[path = "../../examples/gpt/model.rs"]
mod gpt;
#[allow(dead_code)]
#[path = "../../examples/train_mlp.rs"]
mod train_mlp;

use aot_runtime::cuda::nvrtc;
use aot_runtime::prelude::*;
use aot_runtime::{Arg, CompiledFn, KernelSource, NoGradGuard};
use aot_tests::diff_property::{draw_case, options};
use aot_tests::{build_args, load_cases, load_extra_cases, to_args, Case};
use std::collections::HashSet;

/// A model's tail with every op the CUDA backend runs as kernels of its
/// own: a gather (`embedding`), scatters (its gradient, `index_add`),
/// `cumsum`, `argmax`, `max_dim` and `cross_entropy` (`nll_loss` and its
/// gradient).
#[aot_fn]
fn index_scan_loss(ids: &Tensor, table: &Tensor, y: &Tensor, pos: &Tensor) -> (Tensor, Tensor, Tensor) {
    let h = ids.embedding(table);
    let c = h.cumsum(1);
    let logits = c.sum_dim(&[1], false);
    let (best, at) = logits.max_dim(1, false);
    let loss = logits.cross_entropy(y) + best.sum();
    let pred = logits.argmax(-1, false) + at;
    let acc = table.detach().zeros_like().index_add(0, pos, &table.detach());
    (loss, pred, acc)
}

/// Sources per translation unit: NVRTC's fixed cost per unit is most of a
/// small kernel's, so few large units keep the test fast.
const PER_UNIT: usize = 400;

#[derive(Default)]
struct Collected {
    sources: Vec<KernelSource>,
    seen: HashSet<String>,
    calls: usize,
    /// Calls that failed before any kernel (an argument the function
    /// refuses): nothing to compile.
    call_failed: usize,
    unexpected: Vec<String>,
}

impl Collected {
    fn add(&mut self, what: &str, f: &CompiledFn, args: &[Arg]) {
        self.calls += 1;
        match f.kernels_for(args, &Device::Cuda(0)) {
            Ok(ks) => {
                for k in ks {
                    if self.seen.insert(k.source.clone()) {
                        self.sources.push(k);
                    }
                }
            }
            // A kernel the renderer refused: every kernel must render.
            Err(AotError::Unsupported { op: "kernels_for", msg }) => self.unexpected.push(format!("{what}: {msg}")),
            Err(_) => self.call_failed += 1,
        }
    }

    fn oracle(&mut self, corpus: &str, cases: &[Case], fns: &[(&'static str, &'static CompiledFn)]) {
        assert_eq!(cases.len(), fns.len(), "the generated cases are stale");
        for (case, (_, f)) in cases.iter().zip(fns) {
            for call in case.calls.iter().filter(|c| c.eager_error.is_none()) {
                match build_args(call) {
                    Ok((_leaves, args)) => self.add(&format!("{corpus} {} [{}]", case.name, call.label), f, &to_args(&args)),
                    Err(e) => self.unexpected.push(format!("{corpus} {} [{}]: building args: {e}", case.name, call.label)),
                }
            }
        }
    }

    fn differential(&mut self, property: &str, programs: usize, seed: u64) {
        let opts = options(property).expect("a property of the differential tests");
        let mut g = seed;
        let mut next = move || {
            g ^= g << 13;
            g ^= g >> 7;
            g ^= g << 17;
            g
        };
        for case in 0..programs {
            // A choice stream as the property's strategy draws one.
            let choices: Vec<u32> = (0..next() % 512).map(|_| next() as u32).collect();
            let Some((f, templates)) = draw_case(&choices, &opts) else { continue };
            for (k, t) in templates.iter().enumerate() {
                let Ok(m) = t.materialise() else { continue };
                self.add(&format!("{property} program {case} pattern {k}:\n{}", f.graph()), &f, &m.args());
            }
        }
    }

    fn example(&mut self) -> Result<()> {
        let (b, i, h, c) = (8, 12, 16, 10);
        let leaf = |s: &[usize], seed| Tensor::randn(s, DType::F32, &Device::Cpu, seed)?.requires_grad_(true);
        let x = Tensor::randn(&[b, i], DType::F32, &Device::Cpu, 1)?;
        let y = Tensor::zeros(&[b, c], DType::F32, &Device::Cpu)?;
        let p = [leaf(&[i, h], 2)?, leaf(&[h], 3)?, leaf(&[h, h], 4)?, leaf(&[h], 5)?, leaf(&[h, c], 6)?, leaf(&[c], 7)?];
        let mut args = vec![Arg::from(&x), Arg::from(&y)];
        args.extend(p.iter().map(Arg::from));
        self.add("train_mlp forward_loss", train_mlp::forward_loss::compiled(), &args);
        let (mut w, mut buf) = (Tensor::randn(&[i, h], DType::F32, &Device::Cpu, 8)?, Tensor::zeros(&[i, h], DType::F32, &Device::Cpu)?);
        let g = Tensor::randn(&[i, h], DType::F32, &Device::Cpu, 9)?;
        let args = [Arg::from(&mut w), Arg::from(&mut buf), Arg::from(&g), 0.02.into(), 0.9.into()];
        self.add("train_mlp sgd_momentum", train_mlp::sgd_momentum::compiled(), &args);
        let mlp = |seed: u64| -> Result<train_mlp::Mlp> {
            let t = |s: &[usize], k: u64| Tensor::randn(s, DType::F32, &Device::Cpu, seed + k);
            Ok(train_mlp::Mlp {
                w1: t(&[i, h], 0)?,
                b1: t(&[h], 1)?,
                w2: t(&[h, h], 2)?,
                b2: t(&[h], 3)?,
                w3: t(&[h, c], 4)?,
                b3: t(&[c], 5)?,
            })
        };
        let (p, buf, g) = (mlp(10)?, mlp(20)?, mlp(30)?);
        let args = [Arg::tree(&p), Arg::tree(&buf), Arg::tree(&g), 0.02.into(), 0.9.into()];
        self.add("train_mlp sgd_step", train_mlp::sgd_step::compiled(), &args);
        Ok(())
    }

    /// [`index_scan_loss`], training (its backward scatters) and not.
    fn ops(&mut self) -> Result<Vec<String>> {
        let ids = Tensor::from_vec(vec![0i64, 3, 1, 1, 2, 0], &[2, 3], &Device::Cpu)?;
        let table = Tensor::randn(&[4, 5], DType::F32, &Device::Cpu, 3)?.requires_grad_(true)?;
        let y = Tensor::from_vec(vec![4i64, 1], &[2], &Device::Cpu)?;
        let pos = Tensor::from_vec(vec![3i64, 0, 3, 1], &[4], &Device::Cpu)?;
        let args = [Arg::from(&ids), Arg::from(&table), Arg::from(&y), Arg::from(&pos)];
        let f = index_scan_loss::compiled();
        self.add("index_scan_loss", f, &args);
        let mut names: Vec<String> = f.kernels_for(&args, &Device::Cuda(0))?.into_iter().map(|k| k.name).collect();
        let _no_grad = NoGradGuard::new();
        self.add("index_scan_loss (no grad)", f, &args);
        names.extend(f.kernels_for(&args, &Device::Cuda(0))?.into_iter().map(|k| k.name));
        Ok(names)
    }

    /// The `gpt` example's functions at a small size.
    fn gpt_example(&mut self) -> Result<()> {
        let cfg = gpt::Config { vocab: 11, ctx: 8, width: 16, heads: 2 };
        let nh = 2i64;
        let m = gpt::Gpt::new(&cfg, &Device::Cpu, 1)?;
        let ids = Tensor::zeros(&[2, 8], DType::I64, &Device::Cpu)?;
        let args = [Arg::tree(&m), (&ids).into(), (&ids).into(), nh.into(), 0.1.into()];
        self.add("gpt gpt_forward", gpt::gpt_forward::compiled(), &args);
        let st = gpt::AdamState { m: m.zeros_like()?, v: m.zeros_like()? };
        let g = m.zeros_like()?;
        let args =
            [Arg::tree(&m), Arg::tree(&st), Arg::tree(&g), 0.1.into(), 1i64.into(), 0.1.into(), 0.9.into(), 0.99.into(), 1e-8.into()];
        self.add("gpt adamw", gpt::adamw::compiled(), &args);
        let cache = gpt::KvCache::new(&cfg, 2, &Device::Cpu)?;
        let (tok, pos) = (Tensor::zeros(&[2, 1], DType::I64, &Device::Cpu)?, Tensor::zeros(&[1], DType::I64, &Device::Cpu)?);
        let args = [Arg::tree(&m), Arg::tree(&cache), (&tok).into(), (&pos).into(), 1i64.into(), nh.into()];
        self.add("gpt decode_step", gpt::decode_step::compiled(), &args);
        Ok(())
    }
}

/// The sources in units of at most [`PER_UNIT`], no name twice in a unit.
fn units(sources: &[KernelSource]) -> Vec<String> {
    let mut units: Vec<(HashSet<&str>, Vec<&str>)> = Vec::new();
    for k in sources {
        let free = units.iter().position(|(names, srcs)| srcs.len() < PER_UNIT && !names.contains(k.name.as_str()));
        let i = free.unwrap_or_else(|| {
            units.push(Default::default());
            units.len() - 1
        });
        units[i].0.insert(&k.name);
        units[i].1.push(&k.source);
    }
    units.into_iter().map(|(_, srcs)| srcs.join("\n")).collect()
}

#[test]
fn every_generated_kernel_compiles_with_nvrtc_and_ptxas() {
    if let Err(why) = nvrtc::nvrtc_status() {
        assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let ptxas = nvrtc::ptxas().expect("ptxas next to NVRTC");
    let programs = std::env::var("AOT_CUDA_SOURCES_PROGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let start = std::time::Instant::now();
    let mut c = Collected::default();
    c.oracle("oracle", &load_cases(), &cases::all());
    c.oracle("extra oracle", &load_extra_cases(), &cases_extra::all());
    let oracle_sources = c.sources.len();
    c.differential("compiled_matches_eager", programs, 0x5eed_c0de);
    c.differential("compiled_matches_eager_with_autograd_and_no_grad", programs, 0xfeed_beef);
    c.example().expect("the example's arguments");
    let names = c.ops().expect("index_scan_loss's arguments");
    for want in ["aot_take_float32", "aot_cumsum_float32", "aot_max_dim_float32", "aot_nll_loss_float32", "aot_scatter_put_float32"] {
        assert!(names.iter().any(|n| n == want), "{want} is not listed: {names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("aot_nll_loss_backward_")), "{names:?}");
    let failed_before = c.call_failed;
    c.gpt_example().expect("the gpt example's arguments");
    assert_eq!(c.call_failed, failed_before, "a call of the gpt example failed before its kernels");
    let units = units(&c.sources);
    println!(
        "{} calls ({} failed before any kernel), {} distinct CUDA sources ({oracle_sources} from the oracle corpora) in {} units, \
         collected in {:.1} s",
        c.calls,
        c.call_failed,
        c.sources.len(),
        units.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(c.unexpected.is_empty(), "{} calls whose kernels do not render:\n{}", c.unexpected.len(), c.unexpected.join("\n"));
    assert!(c.sources.len() > 100, "only {} sources: the corpora were not reached", c.sources.len());
    let compile = std::time::Instant::now();
    let failures: Vec<String> = std::thread::scope(|s| {
        let (ptxas, units) = (&ptxas, &units);
        let workers: Vec<_> = (0..2)
            .map(|w| {
                s.spawn(move || {
                    (w..units.len())
                        .step_by(2)
                        .filter_map(|u| aot_tests::cuda::assemble(ptxas, &format!("unit{u}"), &units[u]).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|h| h.join().expect("a compile worker panicked")).collect()
    });
    println!("NVRTC and ptxas for sm_80 and sm_90: {:.1} s", compile.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
