//! The host shim for kernels that synchronise: `__syncthreads`, warp
//! shuffles, `__shared__` memory and atomics, run on the CPU by one fiber
//! per CUDA thread, so the CPU tests can check the block and warp
//! reductions the renderer emits.
//!
//! [`FIBERS`] goes after [`super::host::host_prelude`]. It defines
//! `aot_host_launch_sync(grid, block, f)`: the blocks run one after
//! another on the calling thread; within a block, every thread is a fiber
//! (`ucontext`) with its own stack, and a scheduler resumes them in turn.
//! A fiber runs until it waits at a barrier or returns:
//!
//! - `__syncthreads()` waits until every live thread of the block waits
//!   there;
//! - `__syncwarp()` and the shuffles wait only for the live threads of the
//!   caller's warp, so a branch that only one warp takes (the second stage
//!   of a block reduction, `if (warp == 0)`) synchronises as on the GPU;
//! - `__shfl_sync`, `__shfl_xor_sync`, `__shfl_down_sync` and
//!   `__shfl_up_sync` exchange through a per-warp table: each lane writes
//!   its value, the warp synchronises, each lane reads its source lane's
//!   value, and the warp synchronises again before the table is reused. A
//!   source lane outside the `width`-lane segment gives the caller's own
//!   value, as on the GPU. The mask is not checked: every lane of the warp
//!   must take part, which is how the renderer uses them.
//!
//! `__shared__` is `static`: fibers of one block share it, and blocks do
//! not overlap in time. `atomicAdd`, `atomicMax`-style updates are plain
//! read-modify-writes, for the same reason. A barrier that can never be
//! released (threads of one block waiting at different barriers, with
//! nothing left to run) aborts with a message, where a GPU would hang.
//!
//! Warps are 32 threads, `threadIdx.x / 32`; one-dimensional blocks only,
//! up to 1024 threads, as the renderer launches them.

/// The synchronising launcher and the CUDA intrinsics it supports.
pub const FIBERS: &str = r#"
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define __shared__ static
#define warpSize 32
namespace aot_fibers {
enum State { READY, AT_BLOCK, AT_WARP, DONE };
struct Fiber { ucontext_t ctx; State state; char *stack; };
static const size_t STACK = 64 * 1024;
static thread_local ucontext_t sched;
static thread_local Fiber *fibers = 0;
static thread_local unsigned count = 0, current = 0;
static thread_local void (*entry)(void *) = 0;
static thread_local void *entry_arg = 0;
static thread_local unsigned long long exchange[32][32];
static void start(void) {
    entry(entry_arg);
    fibers[current].state = DONE;
}
static void wait(State s) {
    fibers[current].state = s;
    swapcontext(&fibers[current].ctx, &sched);
}
/* Releases the waiting fibers whose barrier is complete; false if none. */
static bool release(void) {
    bool any = false;
    unsigned live = 0, at_block = 0;
    for (unsigned t = 0; t < count; t++) {
        if (fibers[t].state != DONE) live++;
        if (fibers[t].state == AT_BLOCK) at_block++;
    }
    if (live > 0 && at_block == live) {
        for (unsigned t = 0; t < count; t++) if (fibers[t].state == AT_BLOCK) fibers[t].state = READY;
        return true;
    }
    for (unsigned w = 0; w * 32 < count; w++) {
        unsigned wl = 0, wa = 0;
        for (unsigned t = w * 32; t < count && t < w * 32 + 32; t++) {
            if (fibers[t].state != DONE) wl++;
            if (fibers[t].state == AT_WARP) wa++;
        }
        if (wl > 0 && wa == wl) {
            for (unsigned t = w * 32; t < count && t < w * 32 + 32; t++) if (fibers[t].state == AT_WARP) fibers[t].state = READY;
            any = true;
        }
    }
    return any;
}
/* Runs one block: `block` fibers of `f` until all return. */
template <class F> static void run_block(unsigned block, F &f) {
    static thread_local Fiber pool[1024];
    static thread_local bool allocated = false;
    if (!allocated) {
        for (unsigned t = 0; t < 1024; t++) pool[t].stack = 0;
        allocated = true;
    }
    fibers = pool;
    count = block;
    entry = [](void *p) { (*(F *)p)(); };
    entry_arg = &f;
    for (unsigned t = 0; t < block; t++) {
        if (!pool[t].stack) pool[t].stack = (char *)malloc(STACK);
        if (!pool[t].stack) { fprintf(stderr, "aot fibers: out of memory\n"); abort(); }
        getcontext(&pool[t].ctx);
        pool[t].ctx.uc_stack.ss_sp = pool[t].stack;
        pool[t].ctx.uc_stack.ss_size = STACK;
        pool[t].ctx.uc_link = &sched;
        makecontext(&pool[t].ctx, start, 0);
        pool[t].state = READY;
    }
    for (;;) {
        bool ran = false;
        for (unsigned t = 0; t < block; t++) {
            if (pool[t].state != READY) continue;
            current = t;
            threadIdx.x = t; threadIdx.y = 0; threadIdx.z = 0;
            swapcontext(&sched, &pool[t].ctx);
            ran = true;
        }
        bool done = true;
        for (unsigned t = 0; t < block; t++) done = done && pool[t].state == DONE;
        if (done) return;
        if (!release() && !ran) {
            fprintf(stderr, "aot fibers: block %u deadlocked at a barrier\n", blockIdx.x);
            abort();
        }
    }
}
template <class T> static T shuffle(T v, unsigned src, int width) {
    const unsigned lane = current % 32, warp = current / 32;
    const unsigned seg = lane - lane % (unsigned)width;
    unsigned long long bits = 0;
    memcpy(&bits, &v, sizeof(T));
    exchange[warp][lane] = bits;
    wait(AT_WARP);
    T r = v;
    if (src >= seg && src < seg + (unsigned)width && warp * 32 + src < count) memcpy(&r, &exchange[warp][src], sizeof(T));
    wait(AT_WARP);
    return r;
}
}
static inline void __syncthreads(void) { aot_fibers::wait(aot_fibers::AT_BLOCK); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; aot_fibers::wait(aot_fibers::AT_WARP); }
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    (void)mask;
    const unsigned lane = aot_fibers::current % 32;
    return aot_fibers::shuffle(v, lane - lane % (unsigned)width + (unsigned)src % (unsigned)width, width);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    (void)mask;
    return aot_fibers::shuffle(v, (aot_fibers::current % 32) ^ (unsigned)lane_mask, width);
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    (void)mask;
    return aot_fibers::shuffle(v, aot_fibers::current % 32 + delta, width);
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    (void)mask;
    const unsigned lane = aot_fibers::current % 32;
    return aot_fibers::shuffle(v, lane >= delta ? lane - delta : 1000u, width);
}
template <class T> static inline T atomicAdd(T *p, T v) { T old = *p; *p = old + v; return old; }
template <class T> static inline T atomicMax(T *p, T v) { T old = *p; if (v > old) *p = v; return old; }
template <class T> static inline T atomicMin(T *p, T v) { T old = *p; if (v < old) *p = v; return old; }
template <class F> static void aot_host_launch_sync(unsigned grid, unsigned block, F f) {
    if (block == 0 || block > 1024) { fprintf(stderr, "aot fibers: block of %u threads\n", block); abort(); }
    gridDim.x = grid; gridDim.y = 1; gridDim.z = 1;
    blockDim.x = block; blockDim.y = 1; blockDim.z = 1;
    for (unsigned b = 0; b < grid; b++) {
        blockIdx.x = b; blockIdx.y = 0; blockIdx.z = 0;
        aot_fibers::run_block(block, f);
    }
}
"#;

#[cfg(test)]
mod tests;
