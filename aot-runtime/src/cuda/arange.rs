//! `arange` on the device: one kernel writing `start + i * step` (in
//! double, converted once to the dtype as the CPU backend's cast does; for
//! int64 in wrapping 64-bit integers from the truncated bounds, as the
//! CPU), one thread per element, so the values are made where they live
//! rather than uploaded. The bounds travel as the bits of their doubles.

use super::device::gpu;
use super::scan::{each, launch, Source};
use super::CudaStorage;
use crate::dtype::DType;
use crate::error::{AotError, Result};

/// `out[i] = start + i * step` for `i < n`, in the dtype `d`.
pub(super) fn arange_source(d: DType) -> Source {
    let name = format!("aot_arange_{}", d.name());
    let kd = d;
    let body = format!(
        "extern \"C\" __global__ void {name}({t} *out, const aot_params_{name} p) {{\n\
         \x20   const double first = __longlong_as_double(p.start), delta = __longlong_as_double(p.step);\n\
         \x20   {each} {{\n\
         \x20       out[i] = {store};\n\
         \x20   }}\n}}",
        t = kd.storage(),
        each = each("i", "p.n"),
        // `each` names its own stride `step`
        store = match d {
            // Unsigned: wrapping is defined there, not for signed overflow.
            DType::I64 =>
                "(long long)((unsigned long long)(long long)first + (unsigned long long)i * (unsigned long long)(long long)delta)"
                    .to_string(),
            _ => kd.from_double("first + (double)i * delta"),
        },
    );
    Source::new(name, &[d], &["n", "start", "step"], &[format!("{} *", kd.storage())], &body)
}

/// See [`crate::backend::Backend::arange`].
pub(super) fn fill(op: &'static str, ordinal: usize, dtype: DType, n: usize, start: f64, step: f64) -> Result<CudaStorage> {
    let gpu = gpu(op, ordinal)?;
    let bytes = n.checked_mul(dtype.size_in_bytes()).ok_or(AotError::OutOfMemory { op, bytes: usize::MAX })?;
    let out = CudaStorage { mem: gpu.alloc(op, bytes)?, dtype, len: n, ordinal };
    if n > 0 {
        let words = [n as u64, start.to_bits(), step.to_bits()];
        launch(op, gpu, &arange_source(dtype), n, &[out.mem.address(gpu)], &words)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::nvrtc;

    /// The kernel of every dtype compiles with NVRTC and assembles with ptxas.
    #[test]
    fn arange_kernels_compile_with_nvrtc_and_ptxas() {
        if let Err(why) = nvrtc::nvrtc_status() {
            assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
            eprintln!("skipped: {why}");
            return;
        }
        let all = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];
        let unit: Vec<String> = all.iter().map(|&d| arange_source(d).source).collect();
        nvrtc::compile_and_assemble("aot_arange_test", &unit.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    }
}
