//! The profiler: where the time of a program goes, per kernel and per op,
//! as a table like `torch.profiler`'s `key_averages().table()`.
//!
//! - [`profile`] runs a closure and returns its result with a [`Profile`]
//!   of every backend call the closure's thread made meanwhile: eager ops,
//!   and the kernels of compiled (`#[aot_fn]`) calls, forward and
//!   backward.
//! - `AOT_LOG=profile` (one item of the comma-separated `AOT_LOG`)
//!   profiles the whole process, every thread, and prints the table to
//!   stderr when the process exits (through the C library's `atexit`:
//!   returning from `main` and `std::process::exit` run it; a process
//!   killed by a signal or aborted prints nothing). [`process_profile`]
//!   reads that table at any point, for a program that reports per epoch.
//!
//! Each row is one name on one device. A fused kernel of the kernel stage
//! is named as `AOT_LOG=kernels` and `CompiledFn::kernels_for` name it
//! (`fused_mul_add_3`: its first ops, and its index in its stage; kernels
//! of different functions that share a name share a row); every other call
//! is named by the op it serves (`matmul`, `sum_dim`, `copy_`, `gather`,
//! `softmax`, `index_add_`...), and random fills by their Philox stream
//! (`philox/dropout`, `philox/normal`, `philox/uniform`). An eager op that
//! needs several primitives (a copy to make an operand contiguous, then the
//! op) counts one call per primitive, each under the op's name.
//!
//! A call's time is the host's wall time around the backend call on the
//! CPU. On a CUDA device it is the device's time between two events
//! recorded on its stream around the call: the work the call queued, and
//! any time an idle device waited for the host to queue it (the first
//! call of a kernel includes its compilation). On the simulator
//! (`AOT_CUDA_SIM=1`), whose launches run on the host before they return,
//! the events are host instants. Device times are read when the profile
//! is built, and every thousand calls, so recording does not wait for the
//! device at each call.
//!
//! The bytes are those the call reads plus those it writes, counting each
//! element an operand's layout addresses once (a broadcast operand counts
//! its own elements; a gather counts the elements it picks). Matmuls also
//! count their floating-point operations (`2·m·n·k` per batch), and their
//! rate is in GFLOP/s; every other row's is in GB/s. The shares are of the
//! rows' total, so they sum to 100%. The table's header also gives the
//! wall time; the rest of it went to the host's own work between backend
//! calls (planning a compiled call, autograd's bookkeeping, the caller's
//! code).
//!
//! The allocators' statistics close the table: the host's buffer cache
//! (`buffer_cache`: lookups, hits, bytes held) and, per CUDA device opened,
//! its allocations and the bytes its memory pool holds from the driver
//! (the pool does not report reuse, so no hits).
//!
//! Off (no open [`profile`] scope on any thread, and `AOT_LOG` without
//! `profile`) each backend call costs one relaxed atomic load. On, a call
//! costs a thread-local lookup, two clock reads and a hash-map update (and
//! a lock, with `AOT_LOG=profile`); on a GPU, two events.
//!
//! The record itself is kept low, beside the backend
//! (`backend/profile_record.rs`): the storage opens a span around each
//! backend call through this module's `span`.

mod at_exit;
mod table;

use crate::backend::profile_record::{self, Cost, Scope, Span, Table};
use crate::device::Device;
use crate::dtype::DType;
use crate::layout::Layout;
use std::time::{Duration, Instant};

/// A profile: one row per kernel or op and device, sorted by total time
/// (longest first), and the allocators' statistics. `Display` prints it
/// as a table: `{}` the first [`TABLE_ROWS`](Self::TABLE_ROWS) rows,
/// `{:#}` every row.
#[derive(Clone, Debug)]
pub struct Profile {
    rows: Vec<ProfileRow>,
    wall: Duration,
    allocators: Vec<AllocatorStats>,
}

/// One row of a [`Profile`]: the calls of one kernel or op on one device.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ProfileRow {
    /// The kernel's name, or the op's (see the [module](self)'s docs).
    pub name: String,
    /// Where the calls ran.
    pub device: Device,
    /// The number of backend calls.
    pub calls: u64,
    /// Their total time: host wall time on the CPU, device time on CUDA.
    pub total: Duration,
    /// The bytes they read plus the bytes they wrote.
    pub bytes: u64,
    /// Their floating-point operations (matmuls; 0 for the others).
    pub flops: u64,
    /// This row's share of the profile's total time, in `[0, 1]`.
    pub share: f64,
}

impl ProfileRow {
    /// The mean time of a call.
    pub fn average(&self) -> Duration {
        u32::try_from(self.calls).ok().filter(|&n| n > 0).map_or(self.total, |n| self.total / n)
    }
    /// The achieved rate in GFLOP/s, for rows that count flops.
    pub fn gflops_per_second(&self) -> Option<f64> {
        (self.flops > 0 && !self.total.is_zero()).then(|| self.flops as f64 / self.total.as_secs_f64() / 1e9)
    }
    /// The achieved bandwidth in GB/s (10^9 bytes), for rows that move bytes.
    pub fn gb_per_second(&self) -> Option<f64> {
        (self.bytes > 0 && !self.total.is_zero()).then(|| self.bytes as f64 / self.total.as_secs_f64() / 1e9)
    }
}

/// One allocator's statistics over a profile: counts of the profiled
/// span, bytes held at its end.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllocatorStats {
    /// The device whose memory it allocates.
    pub device: Device,
    /// Which allocator: `host buffer cache`, `CUDA memory pool` or `CUDA
    /// simulator` (host memory).
    pub allocator: &'static str,
    /// Requests it served: buffers allocated on a CUDA device; for the
    /// host's buffer cache, the requests that searched it (buffers of the
    /// sizes it keeps; smaller ones go to the system allocator).
    pub requests: u64,
    /// The bytes of those requests.
    pub bytes_requested: u64,
    /// Requests served by memory freed earlier (`None`: the allocator does
    /// not say).
    pub cache_hits: Option<u64>,
    /// The bytes it holds at the end, in use or kept for reuse.
    pub bytes_reserved: Option<u64>,
    /// The most bytes it held since the process started.
    pub peak_bytes_reserved: Option<u64>,
}

impl Profile {
    /// The rows that `{}` prints (the longest); the rest are summed up in
    /// one line. `{:#}` prints every row.
    pub const TABLE_ROWS: usize = 40;

    /// The rows, longest total time first.
    pub fn rows(&self) -> &[ProfileRow] {
        &self.rows
    }
    /// The row of `name` (on the device with the most time, if several).
    pub fn row(&self, name: &str) -> Option<&ProfileRow> {
        self.rows.iter().find(|r| r.name == name)
    }
    /// The time of all rows.
    pub fn total(&self) -> Duration {
        self.rows.iter().map(|r| r.total).sum()
    }
    /// The backend calls of all rows.
    pub fn calls(&self) -> u64 {
        self.rows.iter().map(|r| r.calls).sum()
    }
    /// The wall time of the profiled span (for [`profile`], until the
    /// device finished its work).
    pub fn wall_time(&self) -> Duration {
        self.wall
    }
    /// The allocators' statistics: the host's, then each CUDA device's.
    pub fn allocators(&self) -> &[AllocatorStats] {
        &self.allocators
    }

    fn new(table: &Table, wall: Duration, allocators: Vec<AllocatorStats>) -> Profile {
        let mut rows: Vec<ProfileRow> = table
            .rows()
            .map(|(device, name, a)| ProfileRow {
                name: name.to_string(),
                device,
                calls: a.calls,
                total: a.time,
                bytes: a.bytes,
                flops: a.flops,
                share: 0.0,
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)).then_with(|| a.device.to_string().cmp(&b.device.to_string()))
        });
        let total = rows.iter().map(|r| r.total).sum::<Duration>().as_secs_f64();
        for r in &mut rows {
            r.share = if total > 0.0 { r.total.as_secs_f64() / total } else { 0.0 };
        }
        Profile { rows, wall, allocators }
    }
}

/// Runs `f` and returns its result with the profile of every backend call
/// this thread made meanwhile (calls made on other threads are not in it).
/// Scopes nest: an inner scope's calls also count in the outer one. On a
/// CUDA device it waits, before returning, for the device times of the
/// calls it recorded.
///
/// ```
/// use aot_runtime::prelude::*;
///
/// #[aot_fn]
/// fn scale_shift(x: &Tensor, w: &Tensor) -> Tensor {
///     (x.matmul(w) * 2.0 + 1.0).relu()
/// }
///
/// let x = Tensor::randn(&[64, 32], DType::F32, &Device::Cpu, 0)?;
/// let w = Tensor::randn(&[32, 16], DType::F32, &Device::Cpu, 1)?;
/// let (y, profile) = aot_runtime::profile(|| scale_shift(&x, &w));
/// assert_eq!(y?.shape(), &[64, 16]);
/// let matmul = profile.row("matmul").expect("a matmul ran");
/// assert_eq!((matmul.calls, matmul.flops), (1, 2 * 64 * 32 * 16));
/// println!("{profile}");
/// # Ok::<(), AotError>(())
/// ```
pub fn profile<R>(f: impl FnOnce() -> R) -> (R, Profile) {
    at_exit::read_aot_log();
    let before = allocators(None);
    let start = Instant::now();
    let scope = Scope::open();
    let r = f();
    let table = scope.finish();
    let wall = start.elapsed();
    (r, Profile::new(&table, wall, allocators(Some(&before))))
}

/// The process-wide profile so far, when `AOT_LOG` names `profile`
/// (else `None`): every thread's calls since the first one, and the
/// allocators' counts since the process started. The same table is
/// printed to stderr at exit.
pub fn process_profile() -> Option<Profile> {
    at_exit::read_aot_log();
    if !profile_record::process_wide() {
        return None;
    }
    let table = profile_record::process_snapshot();
    Some(Profile::new(&table, at_exit::since_start(), allocators(None)))
}

/// A span around one backend call named `name` on `device`, recorded when
/// it drops; `None` (after one atomic load) when nothing records. `cost`
/// is called only when it records.
#[inline]
pub(crate) fn span<'a>(device: Device, name: &'a str, cost: impl FnOnce() -> Cost) -> Option<Span<'a>> {
    let gate = profile_record::gate();
    if gate == profile_record::OFF {
        return None;
    }
    open_span(gate, device, name, cost)
}

#[cold]
fn open_span<'a>(gate: u32, device: Device, name: &'a str, cost: impl FnOnce() -> Cost) -> Option<Span<'a>> {
    let gate = if profile_record::unread(gate) { at_exit::read_aot_log() } else { gate };
    if gate == profile_record::OFF {
        return None;
    }
    let events = || match device {
        Device::Cpu => None,
        Device::Cuda(i) => crate::cuda::device_events(i),
    };
    Span::open(gate, device, name, cost, events)
}

/// The bytes of the elements `l` addresses, of `dtype`: a stride-0 dim
/// (broadcast) counts once.
pub(crate) fn footprint(l: &Layout, dtype: DType) -> u64 {
    let elems: usize = l.shape.iter().zip(&l.stride).map(|(&n, &s)| if s == 0 { n.min(1) } else { n }).product();
    (elems * dtype.size_in_bytes()) as u64
}

/// A call that reads `reads` and writes `writes`.
pub(crate) fn moved(reads: &[(&Layout, DType)], writes: &[(&Layout, DType)]) -> Cost {
    let bytes = reads.iter().chain(writes).map(|(l, d)| footprint(l, *d)).sum();
    Cost { bytes, flops: 0 }
}

/// A batched matmul of `la` `[b, m, k]` and `lb` `[b, k, n]` of `dtype`.
pub(crate) fn matmul_cost(la: &Layout, lb: &Layout, dtype: DType) -> Cost {
    // `[..batch, m, k]` and `[..batch, k, n]`, with one batch dim or more.
    let r = la.rank().min(lb.rank());
    let dim = |l: &Layout, i: usize| l.shape.get(i).copied().unwrap_or(1) as u64;
    let b = (0..r.saturating_sub(2)).map(|i| dim(la, i).max(dim(lb, i))).product::<u64>();
    let (m, k, n) = (dim(la, r.saturating_sub(2)), dim(la, r.saturating_sub(1)), dim(lb, r.saturating_sub(1)));
    let out = b * m * n * dtype.size_in_bytes() as u64;
    Cost { bytes: footprint(la, dtype) + footprint(lb, dtype) + out, flops: 2 * b * m * n * k }
}

/// The allocators' statistics now; with `since`, the counts since that
/// earlier snapshot.
fn allocators(since: Option<&[AllocatorStats]>) -> Vec<AllocatorStats> {
    let cache = crate::buffer_cache::stats();
    let mut all = vec![AllocatorStats {
        device: Device::Cpu,
        allocator: "host buffer cache",
        requests: cache.lookups,
        bytes_requested: cache.bytes_looked_up,
        cache_hits: Some(cache.hits),
        bytes_reserved: Some(cache.bytes_held),
        peak_bytes_reserved: None,
    }];
    all.extend(crate::cuda::allocator_stats().into_iter().map(|p| AllocatorStats {
        device: Device::Cuda(p.ordinal),
        allocator: if p.simulated { "CUDA simulator" } else { "CUDA memory pool" },
        requests: p.buffers,
        bytes_requested: p.bytes,
        cache_hits: None,
        bytes_reserved: p.reserved,
        peak_bytes_reserved: p.peak_reserved,
    }));
    if let Some(before) = since {
        for a in &mut all {
            if let Some(b) = before.iter().find(|b| b.device == a.device) {
                a.requests -= b.requests.min(a.requests);
                a.bytes_requested -= b.bytes_requested.min(a.bytes_requested);
                a.cache_hits = a.cache_hits.map(|h| h - b.cache_hits.unwrap_or(0).min(h));
            }
        }
    }
    all
}
