//! Event counters that tests read to check that a path was taken (a fused
//! kernel, a buffer reused, a backward compiled once), and the peak size of
//! the executor's value table. They count only in builds with the
//! `test-hooks` feature (and the crate's own unit tests); elsewhere
//! [`bump`] and [`PeakValues`] compile to nothing, so release builds carry
//! no shared counter and no per-call bookkeeping on a hot path. Tests read
//! them through `aot_runtime::testing`.

#[cfg(any(test, feature = "test-hooks"))]
use std::sync::atomic::{AtomicU64, Ordering};

/// What a counter counts, in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Kernels of the kernel stage that ran as one fused pass.
    FusedKernels,
    /// Kernels of the kernel stage that ran op by op (an operand known to
    /// be zero in a backward, or no fused form for the operands).
    OpByOpKernels,
    /// Kernels of inference calls that stored their result over a written
    /// argument's own storage (reinplacing).
    InPlaceKernels,
    /// First writes of inference calls whose new version was computed out
    /// of place, without copying the input first.
    FreshWrites,
    /// Results of compiled calls written over the buffer of an operand
    /// that died at their node (`Storage::fused_over`).
    ReusedBuffers,
    /// Written inputs of inference calls that took the call's final buffer
    /// instead of a copy of it.
    SwappedWriteBacks,
    /// Written inputs of inference calls that the epilogue copied back
    /// (storage to storage).
    CopiedWriteBacks,
    /// Backward stages of training plans compiled (on their first
    /// `backward()`).
    BackwardCompiles,
    /// Compiled calls that reused the last call's guard key (the same
    /// tensors, their states unchanged).
    LastCallHits,
    /// Runs of NVRTC (CUDA C compiled to PTX, not found in the cache).
    #[cfg(feature = "cuda")]
    NvrtcRuns,
    /// CUDA primitives that ran on the host (downloaded, computed by the
    /// CPU backend, uploaded).
    #[cfg(feature = "cuda")]
    HostRoundTrips,
    /// Products cuBLAS computes (on the simulator, the CPU's gemm in its
    /// stead): launches of library kernels, not counted as
    /// [`Counter::KernelLaunches`].
    #[cfg(feature = "cuda")]
    CublasGemms,
    /// CUDA kernels launched (of aot's CUDA C).
    #[cfg(feature = "cuda")]
    KernelLaunches,
}

/// The last variant (the CUDA ones exist with the `cuda` feature only).
#[cfg(all(any(test, feature = "test-hooks"), feature = "cuda"))]
const LAST: Counter = Counter::KernelLaunches;
#[cfg(all(any(test, feature = "test-hooks"), not(feature = "cuda")))]
const LAST: Counter = Counter::LastCallHits;

/// How many counters there are.
#[cfg(any(test, feature = "test-hooks"))]
const N: usize = LAST as usize + 1;

#[cfg(any(test, feature = "test-hooks"))]
static COUNTS: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];

/// Counts one event of `c`.
#[inline(always)]
pub(crate) fn bump(c: Counter) {
    #[cfg(any(test, feature = "test-hooks"))]
    COUNTS[c as usize].fetch_add(1, Ordering::Relaxed);
    #[cfg(not(any(test, feature = "test-hooks")))]
    let _ = c;
}

/// How many events of `c` were counted in this process.
#[cfg(any(test, feature = "test-hooks"))]
pub fn count(c: Counter) -> u64 {
    COUNTS[c as usize].load(Ordering::Relaxed)
}

/// The number of values a run's table holds, and the most it held (tests
/// check that values are dropped after their last use); it records only
/// with `test-hooks`, and is an empty type without.
pub(crate) struct PeakValues {
    #[cfg(any(test, feature = "test-hooks"))]
    held: usize,
    #[cfg(any(test, feature = "test-hooks"))]
    peak: usize,
}

impl PeakValues {
    /// A recorder for a table that holds `held()` values at the start.
    #[inline(always)]
    pub(crate) fn start(held: impl FnOnce() -> usize) -> PeakValues {
        #[cfg(any(test, feature = "test-hooks"))]
        {
            let held = held();
            PeakValues { held, peak: held }
        }
        #[cfg(not(any(test, feature = "test-hooks")))]
        {
            let _ = held;
            PeakValues {}
        }
    }

    /// A value was stored; `new`: in a slot that was empty.
    #[inline(always)]
    pub(crate) fn stored(&mut self, new: bool) {
        #[cfg(any(test, feature = "test-hooks"))]
        {
            self.held += usize::from(new);
            self.peak = self.peak.max(self.held);
        }
        #[cfg(not(any(test, feature = "test-hooks")))]
        let _ = new;
    }

    /// `n` values were dropped from the table.
    #[inline(always)]
    pub(crate) fn released(&mut self, n: usize) {
        #[cfg(any(test, feature = "test-hooks"))]
        {
            self.held -= n;
        }
        #[cfg(not(any(test, feature = "test-hooks")))]
        let _ = n;
    }

    /// The run finished: its peak becomes [`last_peak_values`] of this
    /// thread.
    #[inline(always)]
    pub(crate) fn finish(self) {
        #[cfg(any(test, feature = "test-hooks"))]
        PEAK_VALUES.with(|p| p.set(self.peak));
    }
}

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    static PEAK_VALUES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most values the table held at once during the last run that
/// finished on this thread.
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn last_peak_values() -> usize {
    PEAK_VALUES.with(std::cell::Cell::get)
}
