//! A counting global allocator: heap allocations per thread (W1's
//! allocations per call) and the live and peak heap bytes of the whole
//! process (the peak memory of W2's and W3's variants).
//!
//! `#[global_allocator]` can only be declared in a binary, so each bench
//! binary that reports these figures declares
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: aot_benches::alloc::Counting = aot_benches::alloc::Counting;
//! ```
//!
//! Without it the counters stay at zero and [`is_installed`] says so.
//!
//! aot keeps large freed CPU buffers for reuse (up to `AOT_CPU_CACHE_BYTES`,
//! default 1 GiB; see `aot-runtime/src/buffer_cache.rs`): to this allocator
//! they are live heap, so they count in every peak measured after they were
//! cached.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The allocator: forwards to `System` and counts.
pub struct Counting;

thread_local! {
    // `const`, without a destructor, and not atomic: usable from inside the
    // allocator, and cheap enough not to weigh on W1's timings.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// Process-wide, because kernels allocate on rayon's threads too.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn count() {
    // `try_with` fails only while the thread is torn down; nothing to count then.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Relaxed) + bytes;
    // The load first: `fetch_max` is a compare-and-swap loop, needed only
    // when a new peak is reached.
    if live > PEAK.load(Relaxed) {
        PEAK.fetch_max(live, Relaxed);
    }
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments, so
// `System`'s guarantees carry over; counting touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        // On failure the old block stays allocated: nothing changed.
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Heap allocations made so far by the calling thread.
pub fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Whether [`Counting`] is the global allocator of this binary.
pub fn is_installed() -> bool {
    let before = allocations();
    drop(black_box(Box::new(0u64)));
    allocations() > before
}

/// Bytes allocated and not yet freed, over all threads.
pub fn live_bytes() -> usize {
    LIVE.load(Relaxed)
}

/// Starts a new peak at the present live heap.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

/// The most bytes live at once since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Relaxed)
}

/// Runs `f` and returns its result with the peak live heap during it, in
/// bytes above `base` (the heap live before the workload's variants ran:
/// its inputs and whatever earlier work left). `None` without [`Counting`].
pub fn peak_during<R>(base: usize, f: impl FnOnce() -> R) -> (R, Option<usize>) {
    reset_peak();
    let r = f();
    let peak = is_installed().then(|| peak_bytes().saturating_sub(base));
    (r, peak)
}
