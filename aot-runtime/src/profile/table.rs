//! A [`Profile`] printed as a table: a header with the wall time and the
//! rows' total, one line per row (longest first; `{}` prints the first
//! [`Profile::TABLE_ROWS`] and sums up the rest, `{:#}` prints them all),
//! then the allocators.
//! Times are printed in s, ms or us, bytes in decimal units (kB, MB, GB),
//! as the rates are (GB/s, GFLOP/s).

use super::{AllocatorStats, Profile, ProfileRow};
use std::fmt::{self, Display, Formatter, Write as _};
use std::time::Duration;

/// Names longer than this are cut (with `..`), to keep the table readable.
const NAME_WIDTH: usize = 48;

/// `d` with three significant decimals in its unit.
fn time(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} us", s * 1e6)
    }
}

fn bytes(b: u64) -> String {
    let b = b as f64;
    match b {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.2} kB", b / 1e3),
        b => format!("{b} B"),
    }
}

fn rate(r: &ProfileRow) -> String {
    match (r.gflops_per_second(), r.gb_per_second()) {
        (Some(f), _) => format!("{f:.1} GFLOP/s"),
        (None, Some(b)) => format!("{b:.2} GB/s"),
        (None, None) => "-".into(),
    }
}

fn name(n: &str) -> String {
    if n.chars().count() <= NAME_WIDTH {
        return n.to_string();
    }
    let cut: String = n.chars().take(NAME_WIDTH - 2).collect();
    format!("{cut}..")
}

fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}%", 100.0 * part / whole)
    } else {
        "-".into()
    }
}

impl Display for Profile {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let shown = if f.alternate() { self.rows.len() } else { self.rows.len().min(Profile::TABLE_ROWS) };
        let (rows, rest) = self.rows.split_at(shown);
        let names: Vec<String> = rows.iter().map(|r| name(&r.name)).collect();
        let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0).max("Name".len());
        let heads = ["Device", "Calls", "Total", "Share", "Avg", "Bytes", "Rate"];
        let widths = [7, 8, 11, 7, 11, 10, 15];
        let rule = "-".repeat(w + widths.iter().map(|c| c + 2).sum::<usize>());
        let (total, wall) = (self.total(), self.wall);
        writeln!(
            f,
            "{} backend calls, {} of {} wall time ({})",
            self.calls(),
            time(total),
            time(wall),
            percent(total.as_secs_f64(), wall.as_secs_f64())
        )?;
        writeln!(f, "{rule}")?;
        let mut line = format!("{:<w$}", "Name");
        for (h, c) in heads.iter().zip(widths) {
            let _ = write!(line, "  {h:>c$}");
        }
        writeln!(f, "{line}")?;
        writeln!(f, "{rule}")?;
        for (r, n) in rows.iter().zip(&names) {
            let cells = [
                r.device.to_string(),
                r.calls.to_string(),
                time(r.total),
                format!("{:.1}%", 100.0 * r.share),
                time(r.average()),
                bytes(r.bytes),
                rate(r),
            ];
            let mut line = format!("{n:<w$}");
            for (cell, c) in cells.iter().zip(widths) {
                let _ = write!(line, "  {cell:>c$}");
            }
            writeln!(f, "{line}")?;
        }
        if !rest.is_empty() {
            let (calls, t) = rest.iter().fold((0, Duration::ZERO), |(c, t), r| (c + r.calls, t + r.total));
            let share = percent(t.as_secs_f64(), total.as_secs_f64());
            writeln!(f, "... {} more rows ({{:#}} prints them): {calls} calls, {} ({share})", rest.len(), time(t))?;
        }
        writeln!(f, "{rule}")?;
        for a in &self.allocators {
            writeln!(f, "{a}")?;
        }
        Ok(())
    }
}

impl Display for AllocatorStats {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "allocator {} ({}): {} requests, {}", self.device, self.allocator, self.requests, bytes(self.bytes_requested))?;
        if let Some(h) = self.cache_hits {
            write!(f, ", {h} cache hits ({})", percent(h as f64, self.requests as f64))?;
        }
        if let Some(r) = self.bytes_reserved {
            write!(f, "; {} held", bytes(r))?;
        }
        if let Some(p) = self.peak_bytes_reserved {
            write!(f, " (peak {})", bytes(p))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    #[test]
    fn units_and_cut_names() {
        assert_eq!(time(Duration::from_micros(1500)), "1.500 ms");
        assert_eq!(time(Duration::from_nanos(2500)), "2.500 us");
        assert_eq!(bytes(8000), "8.00 kB");
        assert_eq!(bytes(12), "12 B");
        assert_eq!(name(&"x".repeat(60)).len(), NAME_WIDTH);
        let row = ProfileRow {
            name: "copy_".into(),
            device: Device::Cpu,
            calls: 2,
            total: Duration::from_secs(1),
            bytes: 4_000_000_000,
            flops: 0,
            share: 1.0,
        };
        assert_eq!(rate(&row), "4.00 GB/s");
        assert_eq!(row.average(), Duration::from_millis(500));
    }

    #[test]
    fn plain_display_sums_up_the_rows_past_the_limit() {
        let n = Profile::TABLE_ROWS + 5;
        let rows = (0..n)
            .map(|i| ProfileRow {
                name: format!("op{i}"),
                device: Device::Cpu,
                calls: 1,
                total: Duration::from_millis((n - i) as u64),
                bytes: 0,
                flops: 0,
                share: 0.0,
            })
            .collect();
        let p = Profile { rows, wall: Duration::from_secs(1), allocators: Vec::new() };
        let (short, full) = (p.to_string(), format!("{p:#}"));
        assert!(short.contains("op0 ") && !short.contains(&format!("op{} ", n - 1)), "{short}");
        assert!(short.contains("... 5 more rows ({:#} prints them): 5 calls, 15.000 ms"), "{short}");
        assert!(full.contains(&format!("op{} ", n - 1)) && !full.contains("more rows"), "{full}");
    }
}
