//! The fiber shim on hand-written kernels of the shapes the renderer's
//! reductions take: a shared-memory tree, warp shuffles of every kind, a
//! two-stage block reduction whose second stage only warp 0 runs, blocks
//! that are not a whole number of warps, and a barrier that can never be
//! released. Skipped without a host C++ compiler.

use super::super::host::host_prelude;
use super::FIBERS;
use std::process::Command;

const KERNELS: &str = r#"
__global__ void tree_sum(const float *in, float *out, float *total, int n) {
    __shared__ float buf[256];
    const unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    buf[t] = i < (unsigned)n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) { out[blockIdx.x] = buf[0]; atomicAdd(total, buf[0]); }
}
__global__ void butterfly(const double *in, double *out) {
    double v = in[threadIdx.x];
    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
    out[threadIdx.x] = v;
}
__global__ void two_stage_max(const float *in, float *out, int n) {
    __shared__ float part[32];
    const unsigned t = threadIdx.x, lane = t % 32, warp = t / 32;
    float v = -1e30f;
    for (unsigned i = t; i < (unsigned)n; i += blockDim.x) v = fmaxf(v, in[i]);
    for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, d));
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const unsigned warps = (blockDim.x + 31) / 32;
        v = lane < warps ? part[lane] : -1e30f;
        for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, d));
        if (lane == 0) out[0] = v;
    }
}
__global__ void scan(const int *in, int *out) {
    int v = in[threadIdx.x];
    for (unsigned d = 1; d < 32; d *= 2) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (threadIdx.x % 32 >= d) v += u;
    }
    out[threadIdx.x] = v;
}
__global__ void segments(const int *in, int *out) {
    /* Width-8 segments: each lane reads lane 0 of its segment. */
    out[threadIdx.x] = __shfl_sync(0xffffffffu, in[threadIdx.x], 0, 8);
}
__global__ void stuck(int *out) {
    if (threadIdx.x % 2) __syncthreads(); else __syncwarp();
    out[threadIdx.x] = 1;
}
int main(int argc, char **argv) {
    if (argc > 1) { int o[64]; aot_host_launch_sync(1, 64, [&] { stuck(o); }); return 0; }
    static float in[1000], blocks[4], total = 0.0f;
    for (int i = 0; i < 1000; i++) in[i] = (float)((i * 37) % 101) - 50.0f;
    aot_host_launch_sync(4, 256, [&] { tree_sum(in, blocks, &total, 1000); });
    printf("tree %g %g %g %g %g\n", blocks[0], blocks[1], blocks[2], blocks[3], total);
    static double d[64], dout[64];
    for (int i = 0; i < 64; i++) d[i] = i * 0.5;
    aot_host_launch_sync(1, 64, [&] { butterfly(d, dout); });
    printf("butterfly %g %g %g\n", dout[0], dout[31], dout[63]);
    float mx = 0.0f;
    aot_host_launch_sync(1, 100, [&] { two_stage_max(in, &mx, 1000); });
    printf("max %g\n", mx);
    static int s[64], so[64], seg[64];
    for (int i = 0; i < 64; i++) s[i] = i + 1;
    aot_host_launch_sync(1, 64, [&] { scan(s, so); });
    printf("scan %d %d %d %d\n", so[0], so[31], so[32], so[63]);
    aot_host_launch_sync(1, 64, [&] { segments(s, seg); });
    printf("segments %d %d %d %d\n", seg[0], seg[7], seg[8], seg[63]);
    return 0;
}
"#;

/// Sums of `in[i] = (i * 37) % 101 - 50` over `range`.
fn sum(range: std::ops::Range<i64>) -> i64 {
    range.map(|i| (i * 37) % 101 - 50).sum()
}

#[test]
fn fibers_run_block_and_warp_reductions_as_a_gpu_does() {
    let dir = std::env::temp_dir().join(format!("aot-fibers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("fibers.cpp");
    let exe = dir.join("fibers");
    std::fs::write(&src, format!("{}{FIBERS}{KERNELS}", host_prelude())).unwrap();
    let built = Command::new("g++").args(["-std=c++17", "-O1", "-ffp-contract=off", "-o"]).arg(&exe).arg(&src).output();
    let Ok(built) = built else {
        eprintln!("skipped: no g++");
        return;
    };
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8(out.stdout).unwrap();
    let blocks: Vec<i64> = (0..4).map(|b| sum(b * 256..((b + 1) * 256).min(1000))).collect();
    let max = (0..1000).map(|i| (i * 37) % 101 - 50).max().unwrap();
    let want = format!(
        "tree {} {} {} {} {}\nbutterfly {} {} {}\nmax {max}\nscan 1 528 33 1552\nsegments 1 1 9 57\n",
        blocks[0],
        blocks[1],
        blocks[2],
        blocks[3],
        sum(0..1000),
        (0..32).map(|i| i as f64 * 0.5).sum::<f64>(),
        (0..32).map(|i| i as f64 * 0.5).sum::<f64>(),
        (32..64).map(|i| i as f64 * 0.5).sum::<f64>(),
    );
    assert_eq!(out, want);
    // Lanes of one warp at different barriers: reported, not a hang.
    let stuck = Command::new(&exe).arg("stuck").output().unwrap();
    assert!(!stuck.status.success());
    assert!(String::from_utf8_lossy(&stuck.stderr).contains("deadlocked"), "{}", String::from_utf8_lossy(&stuck.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
