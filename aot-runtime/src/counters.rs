//! Event counters that tests read to check that a path was taken (a fused
//! kernel, a buffer reused, a backward compiled once). They count only in
//! builds with the `test-hooks` feature (and the crate's own unit tests);
//! elsewhere [`bump`] compiles to nothing, so release builds carry no
//! shared counter on a hot path.

#[cfg(any(test, feature = "test-hooks"))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

/// What a counter counts, in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Results of compiled calls written over the buffer of an operand
    /// that died at their node (`Storage::fused_over`).
    ReusedBuffers,
}

#[cfg(any(test, feature = "test-hooks"))]
const N: usize = Counter::ReusedBuffers as usize + 1;

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

/// How many events of `c` were counted in this process (always 0 without
/// the `test-hooks` feature).
pub fn count(c: Counter) -> u64 {
    #[cfg(any(test, feature = "test-hooks"))]
    return COUNTS[c as usize].load(Ordering::Relaxed);
    #[cfg(not(any(test, feature = "test-hooks")))]
    {
        let _ = (c, Ordering::Relaxed);
        0
    }
}
