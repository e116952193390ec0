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

use std::any::{Any, TypeId};
use std::sync::{Mutex, OnceLock};

/// Buffers below this size are left to the system allocator, which reuses
/// small freed blocks itself.
pub(crate) const MIN_BYTES: usize = 4 << 20;

struct Entry {
    ty: TypeId,
    bytes: usize,
    capacity: usize,
    buf: Box<dyn Any + Send>,
}

#[derive(Default)]
struct Cache {
    entries: Vec<Entry>,
    bytes: usize,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { entries: Vec::new(), bytes: 0 });

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
    if bytes < MIN_BYTES || limit() == 0 {
        return None;
    }
    let mut c = cache();
    let ty = TypeId::of::<T>();
    let at = c.entries.iter().position(|e| e.ty == ty && e.capacity >= n && e.capacity - e.capacity / 8 <= n)?;
    let e = c.entries.remove(at);
    c.bytes -= e.bytes;
    let mut v = *e.buf.downcast::<Vec<T>>().ok()?;
    v.clear();
    Some(v)
}

/// Keeps `v`'s memory for a later [`take`] (or frees it, if it is small or
/// the cache is full).
pub(crate) fn give<T: Send + 'static>(mut v: Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    let limit = limit();
    if bytes < MIN_BYTES || bytes > limit {
        return;
    }
    v.clear();
    let mut c = cache();
    while c.bytes + bytes > limit && !c.entries.is_empty() {
        let old = c.entries.remove(0);
        c.bytes -= old.bytes;
    }
    c.bytes += bytes;
    let capacity = v.capacity();
    c.entries.push(Entry { ty: TypeId::of::<T>(), bytes, capacity, buf: Box::new(v) });
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
}
