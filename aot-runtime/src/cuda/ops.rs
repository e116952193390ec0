//! Kernels for the CUDA primitives that are not a single elementwise op of
//! a tensor's own dtype: `clamp`, scalar ops of every dtype, and
//! `scatter_add`. Each computes exactly what the CPU backend computes.
//!
//! - `clamp` is `minimum(maximum(x, min), max)`: `torch.maximum` and
//!   `torch.minimum` keep a NaN input and take a NaN bound, as the CPU's
//!   clamp does, and an i64 bound saturates as the CPU converts it. Two
//!   one-op kernels, the second in place (f16/bf16 round between them,
//!   which cannot change the result: both ops select one of their
//!   operands). Bool has no clamp; the host says so.
//! - Scalar ops (`a op s`, `s op a`) are one-op kernels with the scalar in
//!   a parameter slot, in every dtype whose op the renderer has: floats,
//!   i64's exact integer ops and comparisons, bool's or/and and
//!   comparisons (integer `pow` included: eager has already refused a
//!   negative exponent). The ops the CPU refuses (integer `div`, bool
//!   `sub`) run on the host, which reports the CPU's error.
//! - `scatter_add` sums, per destination position, its old value and
//!   every addend in f64, in row-major order, and rounds once (the CPU's
//!   definition; i64 into i64 sums exactly, wrapping, as the CPU). Where the destination layout does not overlap and both
//!   buffers have one float dtype with one shape, that is one in-place
//!   `add` kernel: a single addend added in the compute type and rounded
//!   to the dtype gives the same bits as in f64 (f32 has more than twice
//!   f16's and bf16's precision plus two bits, f64 more than twice
//!   f32's). Everything else (overlapping destinations, i64, bool, mixed
//!   dtypes or shapes) takes the general path: the host lists each
//!   destination position's source offsets from the layouts alone (no
//!   data moves), a gather kernel sums each position's addends in f64 (or
//!   i64) in that order (one thread per position, so no atomics and the same bits
//!   in every run), the renderer's cast rounds the sums to the dtype, and
//!   a put kernel writes them. `dst` is written only by the last kernel.

use super::backend::{binary_kind, renders};
use super::device::{Gpu, Mem};
use super::kernels;
use super::sim::Entry;
use super::CudaStorage;
use crate::backend::one_op::OneOp;
use crate::backend::Backend;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::OpKind;
use std::fmt::Write as _;

pub(super) const BLOCK: u32 = 256;

pub(super) fn grid(n: usize) -> u32 {
    u32::try_from(n.div_ceil(BLOCK as usize).clamp(1, 1024)).unwrap_or(1024)
}

/// `torch.clamp` with optional bounds (see the module doc).
pub(super) fn clamp(
    x: &CudaStorage,
    op: &'static str,
    l: &Layout,
    min: Option<f64>,
    max: Option<f64>,
    out: &Layout,
) -> Result<CudaStorage> {
    let d = x.dtype;
    if d == DType::Bool {
        // The CPU's error, from the same code.
        return x.on_host(op, |h| h.clamp(op, l, min, max, out));
    }
    let bound = |kind: OpKind| OneOp::with_scalar(kind, false, d);
    let (first, rest) = match (min, max) {
        (Some(lo), hi) => ((bound(OpKind::Maximum), lo), hi),
        (None, Some(hi)) => ((bound(OpKind::Minimum), hi), None),
        (None, None) => {
            let copy = OneOp::cast(d);
            return CudaStorage::launch_new(op, x.ordinal, &copy, &[(x, l)], &[], d, out);
        }
    };
    let y = CudaStorage::launch_new(op, x.ordinal, &first.0, &[(x, l)], &[first.1], d, out)?;
    if let Some(hi) = rest {
        let gpu = y.gpu(op)?;
        let me = y.buf(gpu, out);
        // SAFETY: `y` is new and ours; it is read and written with the one
        // layout it was written with.
        unsafe { kernels::launch(op, gpu, &bound(OpKind::Minimum), &[me], &[hi], me) }?;
    }
    Ok(y)
}

/// Whether `op` of a tensor of `dtype` with a scalar has a kernel.
pub(super) fn scalar_renders(op: OpKind, dtype: DType) -> bool {
    let Ok(kind) = binary_kind(op) else { return false };
    match dtype {
        DType::Bool => op.is_comparison() || matches!(kind, OpKind::Add | OpKind::Mul | OpKind::Maximum | OpKind::Minimum),
        d => renders(kind, d),
    }
}

/// `a op s`, or `s op a` if `scalar_first` (see the module doc).
pub(super) fn binary_scalar(a: &CudaStorage, op: OpKind, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<CudaStorage> {
    if !scalar_renders(op, a.dtype) {
        return a.on_host(op.name(), |h| h.binary_scalar(op, la, s, scalar_first, out));
    }
    let dtype = if op.is_comparison() { DType::Bool } else { a.dtype };
    // The scalar converts as the CPU converts it: to the compute type for
    // float arithmetic, to the tensor's dtype otherwise (the renderer's
    // rules for a scalar slot).
    let one = OneOp::with_scalar(binary_kind(op)?, scalar_first, a.dtype);
    CudaStorage::launch_new(op.name(), a.ordinal, &one, &[(a, la)], &[s], dtype, out)
}

pub(super) fn check_within(op: &'static str, l: &Layout, len: usize, what: &str) -> Result<()> {
    // An empty layout reads and writes nothing, whatever its offset (a
    // slice past the end of a storage is empty, as on the CPU).
    if l.numel() == 0 || l.checked_storage_extent().is_some_and(|e| e <= len) {
        Ok(())
    } else {
        Err(AotError::internal(op, format!("the {what} layout {:?} / {:?} + {} exceeds its {len} elements", l.shape, l.stride, l.offset)))
    }
}

/// Adds `src` (read through `ls`, row-major) into `dst` at the positions
/// of `ld` (see the module doc).
pub(super) fn scatter_add(src: &CudaStorage, op: &'static str, ls: &Layout, dst: &mut CudaStorage, ld: &Layout) -> Result<()> {
    let n = ls.numel();
    if n != ld.numel() {
        return Err(AotError::shape(op, format!("cannot add {n} elements into {} positions", ld.numel())));
    }
    check_within(op, ls, src.len, "source")?;
    check_within(op, ld, dst.len, "destination")?;
    if n == 0 {
        return Ok(());
    }
    let gpu = dst.gpu(op)?;
    if ld.is_non_overlapping() && ls.shape == ld.shape && src.dtype == dst.dtype && dst.dtype.is_float() {
        let one = OneOp::binary(OpKind::Add, dst.dtype);
        let (me, from) = (dst.buf(gpu, ld), src.buf(gpu, ls));
        // SAFETY: `dst` is borrowed mutably, read and written with one
        // layout; `src` is another live buffer (the storage refuses a
        // scatter into its own source); both layouts were checked above.
        return unsafe { kernels::launch(op, gpu, &one, &[me, from], &[], me) };
    }
    scatter_by_index(src, op, ls, dst, ld, gpu)
}

/// The destination positions of a scatter, each once, with its addends'
/// source offsets: position `at[u]` takes `from[starts[u]..starts[u + 1]]`
/// in row-major order.
pub(super) struct Plan {
    pub(super) at: Vec<i64>,
    pub(super) starts: Vec<i64>,
    pub(super) from: Vec<i64>,
}

fn plan(op: &'static str, ls: &Layout, ld: &Layout) -> Result<Plan> {
    let pairs = crate::host_alloc::try_collect(op, ld.offsets().zip(ls.offsets()))?;
    Ok(plan_pairs(pairs, !ld.is_non_overlapping()))
}

/// The plan of `(destination, source)` offset pairs in row-major order;
/// `repeats`: a destination may occur more than once.
pub(super) fn plan_pairs(mut pairs: Vec<(usize, usize)>, repeats: bool) -> Plan {
    if repeats {
        // Stable: each position's addends stay in row-major order.
        pairs.sort_by_key(|&(o, _)| o);
    }
    let (mut at, mut starts) = (Vec::new(), Vec::new());
    for (i, &(o, _)) in pairs.iter().enumerate() {
        if i == 0 || pairs[i - 1].0 != o {
            at.push(o as i64);
            starts.push(i as i64);
        }
    }
    starts.push(pairs.len() as i64);
    Plan { at, starts, from: pairs.iter().map(|&(_, s)| s as i64).collect() }
}

pub(super) fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `x`, a stored element of `d`, as a double (exact, as the CPU's `to_f64`).
fn to_double(d: DType, x: &str) -> String {
    match d {
        DType::F16 => format!("(double)__half2float({x})"),
        DType::BF16 => format!("(double)__bfloat162float({x})"),
        DType::Bool => format!("({x} ? 1.0 : 0.0)"),
        _ => format!("(double){x}"),
    }
}

/// A translation unit with the headers `dtypes` need, the parameter
/// struct of `name` (one `long long n`) and `body`.
pub(super) fn unit(name: &str, dtypes: &[DType], body: &str) -> String {
    let mut s = format!("// `{name}`, generated by aot (scatter_add, gather).\n");
    let mut headers: Vec<&str> = dtypes.iter().filter_map(|d| d.header()).collect();
    headers.sort_unstable();
    headers.dedup();
    for h in headers {
        let _ = writeln!(s, "#include <{h}>");
    }
    let _ = writeln!(s, "struct aot_params_{name} {{ long long n; }};\n{body}");
    s
}

/// Whether a scatter of `src` into `dst` sums exactly in 64-bit integers
/// (wrapping, as the CPU does for i64 into i64) rather than in f64.
fn sums_integers(src: DType, dst: DType) -> bool {
    src == DType::I64 && dst == DType::I64
}

/// The dtype of the gather kernel's sums of `src` into `dst`.
pub(super) fn sum_dtype(src: DType, dst: DType) -> DType {
    if sums_integers(src, dst) {
        DType::I64
    } else {
        DType::F64
    }
}

/// The gather kernel: `sums[u] = dst[at[u]] + Σ src[from[j]]` in f64, or
/// in wrapping 64-bit integers for i64 into i64 ([`sums_integers`]).
pub(super) fn gather_source(src: DType, dst: DType) -> (String, Entry) {
    let name = format!("aot_scatter_gather_{}_{}", src.name(), dst.name());
    let (ts, td) = (src.storage(), dst.storage());
    let (sum_t, acc_t, init, add) = if sums_integers(src, dst) {
        // Unsigned: wrapping is defined there, not for signed overflow.
        ("long long", "unsigned long long", "(unsigned long long)dst[at[u]]".to_string(), "(unsigned long long)src[from[j]]".to_string())
    } else {
        ("double", "double", to_double(dst, "dst[at[u]]"), to_double(src, "src[from[j]]"))
    };
    let body = format!(
        "extern \"C\" __global__ void {name}({sum_t} *sums, const {td} *dst, const {ts} *src, const long long *at,\n\
         \x20   const long long *starts, const long long *from, const aot_params_{name} p) {{\n\
         \x20   const long long step = (long long)blockDim.x * gridDim.x;\n\
         \x20   for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < p.n; u += step) {{\n\
         \x20       {acc_t} acc = {init};\n\
         \x20       for (long long j = starts[u]; j < starts[u + 1]; ++j) acc += {add};\n\
         \x20       sums[u] = ({sum_t})acc;\n\
         \x20   }}\n}}",
    );
    let sums_ptr = format!("{sum_t} *");
    let pointers =
        [&sums_ptr[..], &format!("const {td} *"), &format!("const {ts} *"), "const long long *", "const long long *", "const long long *"];
    let entry = Entry { name: name.clone(), pointers: pointers.iter().map(|p| p.to_string()).collect(), sync: false };
    (unit(&name, &[src, dst], &body), entry)
}

/// The put kernel: `dst[at[u]] = vals[u]`.
pub(super) fn put_source(dst: DType) -> (String, Entry) {
    let name = format!("aot_scatter_put_{}", dst.name());
    let t = dst.storage();
    let body = format!(
        "extern \"C\" __global__ void {name}({t} *dst, const {t} *vals, const long long *at, const aot_params_{name} p) {{\n\
         \x20   const long long step = (long long)blockDim.x * gridDim.x;\n\
         \x20   for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < p.n; u += step) dst[at[u]] = vals[u];\n}}"
    );
    let pointers = vec![format!("{t} *"), format!("const {t} *"), "const long long *".to_string()];
    (unit(&name, &[dst], &body), Entry { name, pointers, sync: false })
}

/// The general path of [`scatter_add`].
fn scatter_by_index(src: &CudaStorage, op: &'static str, ls: &Layout, dst: &mut CudaStorage, ld: &Layout, gpu: &Gpu) -> Result<()> {
    scatter_plan(src, op, plan(op, ls, ld)?, dst, gpu)
}

/// Adds, per destination `p.at[u]`, the source elements `p.from[..]` of
/// its run into `dst` (f64 sums rounded once; i64 exactly).
pub(super) fn scatter_plan(src: &CudaStorage, op: &'static str, p: Plan, dst: &mut CudaStorage, gpu: &Gpu) -> Result<()> {
    let u = p.at.len();
    let (at, starts, from) =
        (gpu.upload(op, &i64_bytes(&p.at))?, gpu.upload(op, &i64_bytes(&p.starts))?, gpu.upload(op, &i64_bytes(&p.from))?);
    let sum_dtype = sum_dtype(src.dtype, dst.dtype);
    let sums = CudaStorage { mem: gpu.alloc(op, u * 8)?, dtype: sum_dtype, len: u, ordinal: dst.ordinal };
    let (source, entry) = gather_source(src.dtype, dst.dtype);
    let bufs = [&sums.mem, &dst.mem, &src.mem, &at, &starts, &from].map(|m: &Mem| m.address(gpu));
    // SAFETY: every buffer is live on this device with the entry's pointer
    // types; `plan` took each offset from a layout checked against its
    // buffer, and `starts` has `u + 1` entries; only `sums` (new) is written.
    unsafe { gpu.launch(op, &source, &entry, (grid(u), BLOCK), &bufs, &[u as u64]) }?;
    let line = Layout::contiguous(&[u]);
    let vals = if dst.dtype == sum_dtype { sums } else { sums.cast(op, &line, dst.dtype, &line)? };
    put(op, gpu, dst, &vals, &at, u)
}

/// `dst[at[u]] = vals[u]` for `u < n`.
pub(super) fn put(op: &'static str, gpu: &Gpu, dst: &mut CudaStorage, vals: &CudaStorage, at: &Mem, n: usize) -> Result<()> {
    let (source, entry) = put_source(dst.dtype);
    let bufs = [&dst.mem, &vals.mem, at].map(|m: &Mem| m.address(gpu));
    // SAFETY: `dst` is borrowed mutably and each `at[u]` is a distinct
    // offset inside it (checked layouts, deduplicated by the plan); `vals`
    // holds `n` elements of `dst`'s dtype.
    unsafe { gpu.launch(op, &source, &entry, (grid(n), BLOCK), &bufs, &[n as u64]) }
}

#[cfg(test)]
mod tests {
    use super::{gather_source, put_source};
    use crate::cuda::nvrtc;
    use crate::dtype::DType;

    const ALL: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];

    /// The scatter kernels (and the take kernels of `cuda/index.rs`) are
    /// not the renderer's, so `kernels_for` never reports them: every one
    /// compiles here, in one unit, with NVRTC and ptxas for sm_80 and sm_90.
    #[test]
    fn scatter_kernels_compile_with_nvrtc_and_ptxas() {
        if let Err(why) = nvrtc::nvrtc_status() {
            assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
            eprintln!("skipped: {why}");
            return;
        }
        let mut unit: Vec<String> = ALL.iter().flat_map(|&s| ALL.iter().map(move |&d| gather_source(s, d).0)).collect();
        unit.extend(ALL.iter().map(|&d| put_source(d).0));
        // the gather kernels of `cuda/index.rs`
        unit.extend(ALL.iter().map(|&d| crate::cuda::index::take_source(d).0));
        // Each unit defines its own struct and kernel; the headers guard themselves.
        let unit = unit.join("\n");
        let ptxas = nvrtc::ptxas().expect("ptxas next to NVRTC");
        let dir = std::env::temp_dir().join(format!("aot-scatter-ptx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (arch, sm) in [("compute_80", "sm_80"), ("compute_90", "sm_90")] {
            let ptx = nvrtc::compile_ptx("aot_scatter", &unit, arch).unwrap_or_else(|e| panic!("{e}"));
            assert!(ptx.contains("aot_scatter_gather_bfloat16_int64") && ptx.contains("aot_scatter_put_bool"));
            assert!(ptx.contains("aot_take_float16") && ptx.contains("aot_take_int64"));
            let file = dir.join(format!("{sm}.ptx"));
            std::fs::write(&file, &ptx).expect("write ptx");
            let out = std::process::Command::new(&ptxas)
                .arg(format!("-arch={sm}"))
                .arg("-o")
                .arg(dir.join(format!("{sm}.cubin")))
                .arg(&file)
                .output()
                .expect("run ptxas");
            assert!(out.status.success(), "ptxas {sm}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
