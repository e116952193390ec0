//! The summary table of the `all` binary: one row per figure, with its
//! target where there is one, in Markdown.

use crate::{eager_unary, gemm_ceiling, mib, w1, w2, w3, w4};

/// A target on a ratio: at least or at most a bound.
#[derive(Clone, Copy)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    fn met(self, ratio: f64) -> bool {
        match self {
            Target::AtLeast(t) => ratio >= t,
            Target::AtMost(t) => ratio <= t,
        }
    }

    fn describe(self) -> String {
        match self {
            Target::AtLeast(t) => format!(">= {t}x"),
            Target::AtMost(t) => format!("<= {t}x"),
        }
    }
}

/// One row: the workload, aot's and candle's figures, the peer figure
/// (what the ratio or the target is measured against, when not candle),
/// the ratio with its name, and the target.
pub struct Row {
    pub workload: String,
    pub aot: String,
    pub candle: String,
    pub peer: String,
    pub ratio: Option<(&'static str, f64)>,
    pub target: Option<Target>,
}

impl Row {
    fn markdown(&self) -> String {
        let ratio = self.ratio.map_or("—".to_string(), |(name, r)| format!("{name} {r:.2}x"));
        let (target, met) = match (self.target, self.ratio) {
            (Some(t), Some((_, r))) => (t.describe(), if t.met(r) { "yes" } else { "no" }.to_string()),
            _ => ("—".to_string(), "—".to_string()),
        };
        format!("| {} | {} | {} | {} | {ratio} | {target} | {met} |", self.workload, self.aot, self.candle, self.peer)
    }
}

/// Everything the `all` binary measured.
pub struct All {
    pub w1: w1::Report,
    pub w2: w2::Report,
    pub w3: w3::Report,
    pub w4: w4::Report,
    pub gemm: gemm_ceiling::Report,
    pub unary: eager_unary::Report,
}

fn row(workload: &str, aot: String, candle: String, peer: String) -> Row {
    Row { workload: workload.to_string(), aot, candle, peer, ratio: None, target: None }
}

impl All {
    /// The rows of the table, the four targets among them.
    pub fn rows(&self) -> Vec<Row> {
        let (w1, w2, w3) = (&self.w1, &self.w2, &self.w3);
        let mut rows = vec![
            Row {
                ratio: Some(("compiled/candle", w1.compiled_ns() / w1.candle_ns())),
                target: Some(Target::AtMost(1.5)),
                ..row(
                    "W1 per call",
                    format!("{:.2} µs compiled", w1.compiled_ns() / 1e3),
                    format!("{:.2} µs", w1.candle_ns() / 1e3),
                    format!("{:.2} µs aot eager", w1.eager_ns() / 1e3),
                )
            },
            Row {
                ratio: Some(("candle/compiled", w2.speedup())),
                target: Some(Target::AtLeast(20.0)),
                ..row(
                    "W2 16M f32",
                    format!("{:.1} ms compiled, {:.1} ms eager", w2.compiled_ms, w2.eager_ms),
                    format!("{:.1} ms", w2.candle_ms),
                    format!("{:.1} ms copy", w2.copy_ms),
                )
            },
            row(
                "W2 peak heap",
                format!("{} compiled, {} eager", mib(w2.compiled_peak), mib(w2.eager_peak)),
                mib(w2.candle_peak),
                "—".to_string(),
            ),
            Row {
                ratio: Some(("candle/compiled", w3.speedup())),
                target: Some(Target::AtLeast(4.5)),
                ..row(
                    "W3 training step",
                    format!("{:.1} ms compiled, {:.1} ms eager", w3.compiled_ms(), w3.eager_ms()),
                    format!("{:.1} ms", w3.candle_ms()),
                    format!("{:.1} ms its 8 matmuls in gemm alone", self.gemm.best_ms()),
                )
            },
            row("W3 peak heap", format!("{} compiled, {} eager", mib(w3.peak[0]), mib(w3.peak[1])), mib(w3.peak[2]), "—".to_string()),
            Row {
                ratio: Some(("aot/candle", w3.speedup())),
                ..row(
                    "train_mlp steps/s",
                    format!("{:.1} compiled, {:.1} eager", 1e3 / w3.compiled_ms(), 1e3 / w3.eager_ms()),
                    format!("{:.1}", 1e3 / w3.candle_ms()),
                    "—".to_string(),
                )
            },
        ];
        let w4 = &self.w4;
        let torch = w4.torch_best().map_or("PyTorch not found".to_string(), |t| format!("{t:.0} tok/s PyTorch eager"));
        let aot = format!("{:.0} tok/s compiled, {:.0} eager", w4.compiled(), w4.eager());
        rows.push(Row {
            ratio: w4.compiled_over_torch().map(|r| ("compiled/PyTorch", r)),
            ..row("W4 gpt training step", aot.clone(), "—".to_string(), torch)
        });
        rows.push(Row {
            ratio: Some(("compiled/eager", w4.compiled_over_eager())),
            ..row("W4 gpt training step", aot, "—".to_string(), "aot eager".to_string())
        });
        for op in &self.unary.ops {
            // Only tanh has a target; the other ops show the same comparison.
            let target = (op.name == "tanh").then_some(Target::AtMost(2.0));
            rows.push(Row {
                ratio: Some(("aot/copy", op.aot_ms / self.unary.copy_ms)),
                target,
                ..row(
                    &format!("eager {} 16M f32", op.name),
                    format!("{:.1} ms", op.aot_ms),
                    format!("{:.1} ms", op.candle_ms),
                    format!("{:.1} ms copy", self.unary.copy_ms),
                )
            });
        }
        rows
    }

    /// The table in Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| workload | aot | candle | peer | ratio | target | met? |\n|---|---|---|---|---|---|---|\n");
        for r in self.rows() {
            out.push_str(&r.markdown());
            out.push('\n');
        }
        out
    }
}
