//! Hooks for the project's own tests and benches: event counters, the
//! peak size of the executor's value table, a compiled function's caches,
//! the joint executors. It exists for tests only (feature `test-hooks`)
//! and is not part of the API: it changes whenever the internals do.
//!
//! The counters are those of `counters` ([`Counter`], [`count`]); the
//! functions below name the ones tests read most.

pub use crate::compiled::introspect::{cache_probe, num_loop_stages, num_specializations, training_listing, value_sizes};
pub use crate::counters::{count, Counter};
pub use crate::tensor::saved::saved_storage_bytes;

/// The joint executors, for tests that run joint graphs directly.
pub mod joint {
    pub use crate::executor::joint::{run_backward, run_forward, run_joint, run_subgraph, Outcome};
}

/// How many backward stages of training plans were compiled (on their
/// first `backward()`), in this process.
pub fn backward_compiles() -> u64 {
    count(Counter::BackwardCompiles)
}

/// How many kernels of the kernel stage ran fused, and how many op by
/// op, in this process (tests check that the fused path is taken).
pub fn kernel_stats() -> (u64, u64) {
    (count(Counter::FusedKernels), count(Counter::OpByOpKernels))
}

/// How many compiled calls reused the last call's guard key (the same
/// tensors, states unchanged), in this process.
pub fn last_call_hits() -> u64 {
    count(Counter::LastCallHits)
}

/// How many written inputs of inference calls took the call's final
/// buffer instead of a copy of it, in this process.
pub fn swapped_write_backs() -> u64 {
    count(Counter::SwappedWriteBacks)
}

/// How many first writes of inference calls computed their new version
/// out of place, without copying the input first, in this process.
pub fn fresh_writes() -> u64 {
    count(Counter::FreshWrites)
}

/// How many results of compiled calls were written over the buffer of
/// an operand that died at their node, instead of a new buffer, in this
/// process.
pub fn reused_buffers() -> u64 {
    count(Counter::ReusedBuffers)
}

/// How many kernels of inference calls stored their result over a
/// written argument's own storage (reinplacing), in this process.
pub fn in_place_kernels() -> u64 {
    count(Counter::InPlaceKernels)
}

/// How many written inputs of inference calls the epilogue copied back
/// (storage to storage), in this process.
pub fn copied_write_backs() -> u64 {
    count(Counter::CopiedWriteBacks)
}

/// The most values the executor's table held at once during the last
/// run of a graph (any stage) that finished on this thread: values are
/// dropped after their last use.
pub fn last_peak_values() -> usize {
    crate::counters::last_peak_values()
}

/// How many CUDA primitives ran on the host (no kernel yet), and how many
/// launched a kernel, in this process.
#[cfg(feature = "cuda")]
pub fn host_round_trips() -> (u64, u64) {
    (count(Counter::HostRoundTrips), count(Counter::KernelLaunches))
}

/// How many products cuBLAS computed (on the simulator: the CPU's gemm
/// in its stead), in this process; kernel launches of a library, which
/// [`host_round_trips`] does not count.
#[cfg(feature = "cuda")]
pub fn cublas_gemms() -> u64 {
    count(Counter::CublasGemms)
}

/// How many times this process ran NVRTC.
#[cfg(feature = "cuda")]
pub fn nvrtc_runs() -> u64 {
    count(Counter::NvrtcRuns)
}
