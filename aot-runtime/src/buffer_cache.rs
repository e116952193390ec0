//! A cache of large freed CPU buffers, so that a buffer of the same size
//! allocated soon after (the next call's output, the next step's
//! activations) reuses memory whose pages are already mapped. A fresh
//! large allocation is new memory from the kernel, and writing it costs a
//! page fault per 4 KiB page: on a 64 MiB output, more than the work of a
//! fused elementwise kernel. (PyTorch's CUDA caching allocator exists for
//! the same reason.)
//!
//! Only buffers of at least [`MIN_BYTES`] are kept, at most
//! `AOT_CPU_CACHE_BYTES` bytes in all (default 1 GiB; `0` turns the cache
//! off); the oldest go first. A buffer is reused for a request of the same
//! element type needing between 7/8 of its capacity and all of it, and is
//! handed out empty: it is a capacity, and its callers write every element
//! before reading it, as they do with a fresh one.
//!
//! Compiled runs give back smaller buffers too ([`recycling`]): an
//! intermediate dropped after its last use, a written input's old buffer
//! after the epilogue took the new one. Those of at least
//! [`RECYCLE_MIN_BYTES`] are kept, at most [`RECYCLE_LIMIT`] bytes of them,
//! so that the next call of the same plan (an optimizer step, whose
//! parameters are a few MB each) finds its buffers again instead of paying
//! the page faults of new memory; buffers freed anywhere else stay with
//! the system allocator, and the bound keeps the cache from holding memory
//! the rest of the process would reuse.
//!
//! The cache counts its lookups and hits ([`stats`], under the lock every
//! lookup takes anyway), which the profiler reports.

use std::any::{Any, TypeId};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Buffers below this size are left to the system allocator, which reuses
/// small freed blocks itself (unless a compiled run gives them back).
pub(crate) const MIN_BYTES: usize = 4 << 20;

/// The smallest buffer a compiled run gives back that is kept.
pub(crate) const RECYCLE_MIN_BYTES: usize = 256 << 10;

/// At most this many bytes of buffers below [`MIN_BYTES`] are kept.
pub(crate) const RECYCLE_LIMIT: usize = 64 << 20;

/// Bytes of the kept buffers below [`MIN_BYTES`] (read without the lock,
/// so that a small request finds an empty tier cheaply).
static SMALL: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static RECYCLING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the buffers it frees on this thread given back by a
/// compiled run (kept down to [`RECYCLE_MIN_BYTES`]).
pub(crate) fn recycling<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            RECYCLING.with(|r| r.set(self.0));
        }
    }
    let _restore = Restore(RECYCLING.with(|r| r.replace(true)));
    f()
}

struct Entry {
    ty: TypeId,
    bytes: usize,
    /// Below `MIN_BYTES` (counted in `SMALL`).
    small: bool,
    capacity: usize,
    buf: Box<dyn Any + Send>,
}

#[derive(Default)]
struct Cache {
    entries: Vec<Entry>,
    bytes: usize,
    /// Counted under the lock, which every lookup takes anyway.
    stats: Stats,
}

/// What the cache did since the process started, for the profiler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Requests that searched the cache (of a size it keeps, while it held
    /// buffers of that tier), and their bytes.
    pub lookups: u64,
    pub bytes_looked_up: u64,
    /// Of those, the requests a kept buffer served.
    pub hits: u64,
    /// The bytes of the buffers it holds now.
    pub bytes_held: u64,
}

static CACHE: Mutex<Cache> =
    Mutex::new(Cache { entries: Vec::new(), bytes: 0, stats: Stats { lookups: 0, bytes_looked_up: 0, hits: 0, bytes_held: 0 } });

/// The cache's statistics.
pub(crate) fn stats() -> Stats {
    let c = cache();
    Stats { bytes_held: c.bytes as u64, ..c.stats }
}

fn limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| std::env::var("AOT_CPU_CACHE_BYTES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(1 << 30))
}

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    // A poisoned lock only follows a panic elsewhere; the list is still valid.
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// An empty vector with room for `n` elements from the cache, if it holds
/// one that fits.
pub(crate) fn take<T: Send + 'static>(n: usize) -> Option<Vec<T>> {
    let bytes = n.checked_mul(std::mem::size_of::<T>())?;
    let small = bytes < MIN_BYTES;
    if (small && (bytes < RECYCLE_MIN_BYTES || SMALL.load(Ordering::Relaxed) == 0)) || limit() == 0 {
        return None;
    }
    let mut c = cache();
    c.stats.lookups += 1;
    c.stats.bytes_looked_up += bytes as u64;
    let ty = TypeId::of::<T>();
    let at = c.entries.iter().position(|e| e.ty == ty && e.capacity >= n && e.capacity - e.capacity / 8 <= n)?;
    c.stats.hits += 1;
    let e = c.remove(at);
    let mut v = *e.buf.downcast::<Vec<T>>().ok()?;
    v.clear();
    Some(v)
}

/// Keeps `v`'s memory for a later [`take`] (or frees it, if it is small or
/// the cache is full).
pub(crate) fn give<T: Send + 'static>(mut v: Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    let limit = limit();
    let small = bytes < MIN_BYTES;
    if (small && (bytes < RECYCLE_MIN_BYTES || !RECYCLING.with(Cell::get))) || bytes > limit {
        return;
    }
    v.clear();
    let mut c = cache();
    while c.bytes + bytes > limit && !c.entries.is_empty() {
        c.remove(0);
    }
    while small && SMALL.load(Ordering::Relaxed) + bytes > RECYCLE_LIMIT {
        let Some(oldest) = c.entries.iter().position(|e| e.small) else { break };
        c.remove(oldest);
    }
    c.bytes += bytes;
    if small {
        SMALL.fetch_add(bytes, Ordering::Relaxed);
    }
    let capacity = v.capacity();
    c.entries.push(Entry { ty: TypeId::of::<T>(), bytes, small, capacity, buf: Box::new(v) });
}

impl Cache {
    /// Takes entry `at` out of the cache's accounts.
    fn remove(&mut self, at: usize) -> Entry {
        let e = self.entries.remove(at);
        self.bytes -= e.bytes;
        if e.small {
            SMALL.fetch_sub(e.bytes, Ordering::Relaxed);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_freed_buffer_is_reused_for_a_request_that_fits() {
        let n = MIN_BYTES / 4 + 1000;
        let v: Vec<f32> = vec![1.0; n];
        let ptr = v.as_ptr();
        give(v);
        assert!(take::<f64>(n).is_none_or(|w| w.as_ptr() != ptr.cast()), "another element type");
        assert!(take::<f32>(n / 2).is_none_or(|w| w.as_ptr() != ptr), "far smaller: not this one");
        let w = take::<f32>(n - 10).expect("the cached buffer");
        assert_eq!((w.as_ptr(), w.len()), (ptr, 0));
        assert!(w.capacity() >= n - 10);
        // Small buffers are not kept.
        give(vec![0u8; 16]);
        assert!(take::<u8>(16).is_none());
    }

    /// Buffers below `MIN_BYTES` are kept only when a compiled run gives
    /// them back, down to `RECYCLE_MIN_BYTES`. (Element types no other test
    /// uses, so that parallel tests do not take each other's buffers.)
    #[test]
    fn a_compiled_run_gives_back_smaller_buffers() {
        let n = MIN_BYTES / 8 / 2;
        let v: Vec<u64> = vec![1; n];
        give(v);
        assert!(take::<u64>(n).is_none(), "freed elsewhere: left to the system allocator");
        let v: Vec<u64> = vec![1; n];
        let ptr = v.as_ptr();
        recycling(|| give(v));
        let w = take::<u64>(n).expect("given back by a run");
        assert_eq!((w.as_ptr(), w.len()), (ptr, 0));
        let tiny: Vec<i16> = vec![0; RECYCLE_MIN_BYTES / 4];
        recycling(|| give(tiny));
        assert!(take::<i16>(RECYCLE_MIN_BYTES / 4).is_none(), "below RECYCLE_MIN_BYTES");
        assert!(!RECYCLING.with(Cell::get), "the flag is restored");
    }
}
