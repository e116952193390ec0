//! What the profiler (`crate::profile`) reads of a CUDA device (feature
//! `cuda`): the events that time one backend call on the device's stream
//! ([`device_events`]), and the allocator's statistics
//! ([`allocator_stats`]).
//!
//! On a GPU the events are CUDA events with timing, recorded on the
//! device's stream around the call, so a row's time is the device's time
//! for the work, not the host's time to queue it. The simulator runs each
//! launch on the host before returning, so its events are host instants.
//!
//! Buffers come from the driver's default memory pool (`device.rs`,
//! stream-ordered allocation with freed memory kept for reuse). The pool
//! reports the bytes it holds from the driver and their high-water mark;
//! it does not say which requests reused freed memory, so no cache hits
//! are reported. The allocations themselves are counted here, per device.

use super::device::{self, Gpu};
use super::PoolStats;
use crate::backend::profile_record::DeviceEvents;
use cudarc::driver::{sys, CudaEvent, CudaStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Buffers allocated on one device, and their bytes.
#[derive(Debug)]
pub(super) struct AllocCount {
    buffers: AtomicU64,
    bytes: AtomicU64,
}

impl AllocCount {
    pub(super) const fn new() -> AllocCount {
        AllocCount { buffers: AtomicU64::new(0), bytes: AtomicU64::new(0) }
    }
    /// Counts one buffer of `bytes`: a relaxed add beside a driver call.
    pub(super) fn note(&self, bytes: usize) {
        self.buffers.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// The simulator's events: host instants (its launches finish before they
/// return).
struct HostEvents {
    start: Instant,
    end: Option<Instant>,
}

impl DeviceEvents for HostEvents {
    fn stop(&mut self) {
        self.end = Some(Instant::now());
    }
    fn elapsed(&self) -> Option<Duration> {
        Some(self.end?.duration_since(self.start))
    }
}

/// CUDA events with timing on a GPU's stream.
struct GpuEvents {
    stream: Arc<CudaStream>,
    start: CudaEvent,
    end: Option<CudaEvent>,
}

impl DeviceEvents for GpuEvents {
    fn stop(&mut self) {
        self.end = self.stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).ok();
    }
    fn elapsed(&self) -> Option<Duration> {
        // Waits for the end event: the work before it has run.
        let ms = self.start.elapsed_ms(self.end.as_ref()?).ok()?;
        Some(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

/// Events around a call on device `ordinal`, its start recorded now;
/// `None` where the device is not open or an event cannot be made (the
/// host's time then stands).
pub(crate) fn device_events(ordinal: usize) -> Option<Box<dyn DeviceEvents>> {
    match device::gpu("profile", ordinal).ok()? {
        Gpu::Sim => Some(Box::new(HostEvents { start: Instant::now(), end: None })),
        Gpu::Real(r) => {
            let start = r.stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).ok()?;
            Some(Box::new(GpuEvents { stream: r.stream.clone(), start, end: None }))
        }
    }
}

/// The allocator's statistics of every device opened so far.
pub(crate) fn allocator_stats() -> Vec<PoolStats> {
    device::opened()
        .into_iter()
        .map(|(ordinal, gpu)| {
            let counts = gpu.alloc_count();
            let (reserved, peak_reserved) = match gpu {
                Gpu::Sim => (None, None),
                Gpu::Real(r) => pool_reserved(&r.stream),
            };
            PoolStats {
                ordinal,
                simulated: matches!(gpu, Gpu::Sim),
                buffers: counts.buffers.load(Ordering::Relaxed),
                bytes: counts.bytes.load(Ordering::Relaxed),
                reserved,
                peak_reserved,
            }
        })
        .collect()
}

/// The bytes the default memory pool of `stream`'s device holds from the
/// driver, now and at most; `None` where the device has no pools.
fn pool_reserved(stream: &CudaStream) -> (Option<u64>, Option<u64>) {
    let ctx = stream.context();
    if ctx.bind_to_thread().is_err() {
        return (None, None);
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer for the device's pool handle.
    let found = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) } == sys::CUresult::CUDA_SUCCESS;
    if !found || pool.is_null() {
        return (None, None);
    }
    let read = |attr: sys::CUmemPool_attribute| {
        let mut v = 0u64;
        // SAFETY: both attributes are read as one u64 through the pointer,
        // which lives across the call; `pool` is the handle found above.
        let ok = unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&mut v as *mut u64).cast()) } == sys::CUresult::CUDA_SUCCESS;
        ok.then_some(v)
    };
    (
        read(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
        read(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH),
    )
}
