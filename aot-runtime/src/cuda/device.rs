//! A CUDA device as the backend uses it: memory, uploads, downloads and
//! launches of rendered kernels. One type, [`Gpu`], for a real GPU
//! (through cudarc; kernels compiled by NVRTC) and for the simulator
//! ([`super::sim`]: the same CUDA C, compiled by the host compiler, on host
//! memory), so everything above this file is the same for both.
//!
//! `AOT_CUDA_SIM=1` makes `Device::Cuda(0)` the simulator, with or without
//! a GPU (the simulator has one device). Otherwise `Device::Cuda(i)` is GPU
//! `i` when the driver loads and reports it.

use super::profiling::AllocCount;
use super::sim::{Entry, SimModule};
use crate::backend::kernel_record;
use crate::backend::KernelSource;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use cudarc::cublas::{sys as blas_sys, CudaBlas};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

/// A buffer of a CUDA device: host memory on the simulator (8-byte
/// aligned), device memory on a GPU.
#[derive(Debug)]
pub(crate) enum Mem {
    Host(Box<[u64]>),
    Device(CudaSlice<u8>),
}

/// The launch parameters of a kernel, passed by value: the renderer's
/// parameter struct is a sequence of 8-byte words (at most [`MAX_WORDS`]);
/// the driver copies as many bytes as the kernel's struct has.
#[repr(C)]
#[derive(Clone, Copy)]
struct ParamWords([u64; MAX_WORDS]);
const MAX_WORDS: usize = 480;

// SAFETY: plain old data of 8-byte words, which the kernel reads as its
// parameter struct (a prefix of these words).
unsafe impl DeviceRepr for ParamWords {}

/// A real GPU.
#[derive(Debug)]
pub(crate) struct Real {
    pub(super) stream: Arc<CudaStream>,
    arch: &'static str,
    /// Loaded kernels by a hash of their source.
    functions: Mutex<HashMap<u64, CudaFunction>>,
    /// The cuBLAS handle on `stream`, made on first use (or why not).
    blas: OnceLock<std::result::Result<CudaBlas, String>>,
    /// The buffers allocated, for the profiler.
    allocs: AllocCount,
}

/// A CUDA device.
#[derive(Debug)]
pub(crate) enum Gpu {
    Sim,
    Real(Real),
}

fn unavailable(op: &'static str, msg: impl Into<String>) -> AotError {
    AotError::DeviceUnavailable { op, msg: msg.into() }
}

fn driver(op: &'static str, e: cudarc::driver::DriverError) -> AotError {
    unavailable(op, format!("CUDA driver error: {e:?}"))
}

/// Whether `AOT_CUDA_SIM` asks for the simulator.
pub(crate) fn simulated() -> bool {
    std::env::var("AOT_CUDA_SIM").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The devices opened so far, by ordinal.
static OPEN: OnceLock<Mutex<HashMap<usize, &'static Gpu>>> = OnceLock::new();

/// The device `ordinal`, opened on first use.
pub(crate) fn gpu(op: &'static str, ordinal: usize) -> Result<&'static Gpu> {
    let open = OPEN.get_or_init(Default::default);
    let mut open = open.lock().map_err(|_| AotError::internal(op, "the CUDA device table lock was poisoned"))?;
    if let Some(g) = open.get(&ordinal) {
        return Ok(g);
    }
    let g: &'static Gpu = Box::leak(Box::new(open_gpu(op, ordinal)?));
    open.insert(ordinal, g);
    Ok(g)
}

/// The devices opened so far, by ordinal.
pub(super) fn opened() -> Vec<(usize, &'static Gpu)> {
    let Some(open) = OPEN.get() else { return Vec::new() };
    let mut all: Vec<(usize, &'static Gpu)> = open.lock().map(|m| m.iter().map(|(&i, &g)| (i, g)).collect()).unwrap_or_default();
    all.sort_by_key(|&(i, _)| i);
    all
}

fn open_gpu(op: &'static str, ordinal: usize) -> Result<Gpu> {
    if simulated() {
        return match ordinal {
            0 => Ok(Gpu::Sim),
            i => Err(unavailable(op, format!("the CUDA simulator (AOT_CUDA_SIM) has one device, cuda:0, not cuda:{i}"))),
        };
    }
    if !super::is_available() {
        return Err(unavailable(op, "no CUDA driver (libcuda) or no GPU was found on this machine; AOT_CUDA_SIM=1 simulates one"));
    }
    let count = CudaContext::device_count().map_err(|e| driver(op, e))?;
    if ordinal >= usize::try_from(count).unwrap_or(0) {
        return Err(unavailable(op, format!("cuda:{ordinal} does not exist: this machine has {count} CUDA device(s)")));
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| driver(op, e))?;
    keep_freed_memory(&ctx);
    let (major, minor) = ctx.compute_capability().map_err(|e| driver(op, e))?;
    let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
    Ok(Gpu::Real(Real {
        stream: ctx.default_stream(),
        arch,
        functions: Mutex::new(HashMap::new()),
        blas: OnceLock::new(),
        allocs: AllocCount::new(),
    }))
}

/// Buffers are allocated stream-ordered from the device's default memory
/// pool (cudarc uses `cuMemAllocAsync` where the device supports pools).
/// By default the pool returns freed memory to the driver at every
/// synchronisation, so each training step would map its activations
/// anew; an unbounded release threshold keeps them for the next step, as
/// PyTorch's caching allocator does. Best effort: a device without memory
/// pools allocates directly, and a failure here changes nothing else.
fn keep_freed_memory(ctx: &CudaContext) {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold = u64::MAX;
    // SAFETY: `pool` is a valid out-pointer for the device's default pool
    // handle; the attribute call reads one u64 through the pointer, which
    // lives across the call, and runs only when the pool handle was set.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS && !pool.is_null() {
            let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
            let _ = sys::cuMemPoolSetAttribute(pool, attr, (&mut threshold as *mut u64).cast());
        }
    }
}

impl Gpu {
    /// The buffers allocated on this device.
    pub(super) fn alloc_count(&self) -> &AllocCount {
        static SIM: AllocCount = AllocCount::new();
        match self {
            Gpu::Sim => &SIM,
            Gpu::Real(r) => &r.allocs,
        }
    }

    /// A zeroed buffer of `bytes` bytes.
    pub(crate) fn alloc(&self, op: &'static str, bytes: usize) -> Result<Mem> {
        let m = self.alloc_zeroed(op, bytes)?;
        self.alloc_count().note(bytes);
        Ok(m)
    }

    fn alloc_zeroed(&self, op: &'static str, bytes: usize) -> Result<Mem> {
        match self {
            Gpu::Sim => {
                let words = bytes.div_ceil(8);
                let mut v: Vec<u64> = Vec::new();
                v.try_reserve_exact(words).map_err(|_| AotError::OutOfMemory { op, bytes })?;
                v.resize(words, 0);
                Ok(Mem::Host(v.into_boxed_slice()))
            }
            Gpu::Real(r) => r.stream.alloc_zeros::<u8>(bytes.max(1)).map(Mem::Device).map_err(|_| AotError::OutOfMemory { op, bytes }),
        }
    }

    /// A buffer holding `data`.
    pub(crate) fn upload(&self, op: &'static str, data: &[u8]) -> Result<Mem> {
        let mut m = self.alloc(op, data.len())?;
        match (&mut m, self) {
            (Mem::Host(h), _) => {
                // SAFETY: `h` has at least `data.len()` bytes; u64 has no
                // invalid bit patterns.
                let bytes = unsafe { std::slice::from_raw_parts_mut(h.as_mut_ptr().cast::<u8>(), data.len()) };
                bytes.copy_from_slice(data);
            }
            (Mem::Device(d), Gpu::Real(r)) => {
                if !data.is_empty() {
                    r.stream.memcpy_htod(data, &mut d.slice_mut(..data.len())).map_err(|e| driver(op, e))?;
                }
            }
            (Mem::Device(_), Gpu::Sim) => return Err(AotError::internal(op, "device memory on the simulator")),
        }
        Ok(m)
    }

    /// The first `bytes` bytes of `m`.
    pub(crate) fn download(&self, op: &'static str, m: &Mem, bytes: usize) -> Result<Vec<u8>> {
        match (m, self) {
            (Mem::Host(h), _) => {
                // SAFETY: reading the buffer's own bytes.
                let all = unsafe { std::slice::from_raw_parts(h.as_ptr().cast::<u8>(), h.len() * 8) };
                all.get(..bytes).map(<[u8]>::to_vec).ok_or_else(|| AotError::internal(op, "download past the buffer"))
            }
            (Mem::Device(d), Gpu::Real(r)) => {
                let mut out = vec![0u8; bytes];
                if bytes > 0 {
                    r.stream.memcpy_dtoh(&d.slice(..bytes), &mut out).map_err(|e| driver(op, e))?;
                    r.stream.synchronize().map_err(|e| driver(op, e))?;
                }
                Ok(out)
            }
            (Mem::Device(_), Gpu::Sim) => Err(AotError::internal(op, "device memory on the simulator")),
        }
    }

    /// Launches the entry `entry` of the rendered unit `source` over
    /// `grid` blocks of `block` threads, with `bufs` (the address of each
    /// pointer argument, from [`Mem::address`]) and the parameter words.
    /// Every kernel of the backend launches here, so this is where launches
    /// are counted and noted for `kernels_for`.
    ///
    /// # Safety
    /// The addresses must be live buffers of this device, of the entry's
    /// pointer types, holding every element the words address; a buffer
    /// the kernel writes is not used elsewhere during the launch.
    pub(crate) unsafe fn launch(
        &self,
        op: &'static str,
        source: &str,
        entry: &Entry,
        (grid, block): (u32, u32),
        bufs: &[u64],
        words: &[u64],
    ) -> Result<()> {
        crate::counters::bump(crate::counters::Counter::KernelLaunches);
        kernel_record::note_launch(|| KernelSource { name: entry.name.clone(), source: source.to_string() });
        match self {
            Gpu::Sim => {
                let m = SimModule::build(&[source], std::slice::from_ref(entry))?;
                let ptrs: Vec<*mut c_void> = bufs.iter().map(|&a| a as usize as *mut c_void).collect();
                // SAFETY: the caller's guarantee.
                unsafe { m.launch(&entry.name, grid, block, &ptrs, words) }
            }
            Gpu::Real(r) => {
                if words.len() > MAX_WORDS {
                    return Err(AotError::unsupported(op, format!("a kernel with {} parameter words (at most {MAX_WORDS})", words.len())));
                }
                let f = r.function(op, source, &entry.name)?;
                let mut p = ParamWords([0; MAX_WORDS]);
                p.0[..words.len()].copy_from_slice(words);
                let mut b = r.stream.launch_builder(&f);
                for a in bufs {
                    b.arg(a);
                }
                b.arg(&p);
                let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
                // SAFETY: the caller's guarantee; the arguments are the
                // kernel's pointers, then its parameter struct by value.
                unsafe { b.launch(cfg) }.map_err(|e| driver(op, e))?;
                Ok(())
            }
        }
    }
}

impl Gpu {
    /// `out` (contiguous `[batch, m, n]`) `= a · b` through cuBLAS, with
    /// the arguments `g` that `cublas::plan` worked out for these layouts
    /// (see `cublas.rs`). Only a real GPU has cuBLAS: the simulator is an
    /// internal error here (its caller computes on the host instead).
    ///
    /// # Safety
    /// The addresses are live buffers of this device of `dtype`, holding
    /// the layouts' elements; `g` is `cublas::plan`'s for these layouts;
    /// `out` holds `batch * m * n` and is used by nothing else during the
    /// call.
    pub(crate) unsafe fn gemm(
        &self,
        op: &'static str,
        dtype: DType,
        g: &super::cublas::GemmArgs,
        a: (u64, &Layout),
        b: (u64, &Layout),
        out: u64,
    ) -> Result<()> {
        let Gpu::Real(r) = self else { return Err(AotError::internal(op, "cuBLAS on the simulator")) };
        let (ty, compute) = match dtype {
            DType::F32 => (blas_sys::cudaDataType::CUDA_R_32F, blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
            DType::F64 => (blas_sys::cudaDataType::CUDA_R_64F, blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_64F),
            DType::F16 => (blas_sys::cudaDataType::CUDA_R_16F, blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
            DType::BF16 => (blas_sys::cudaDataType::CUDA_R_16BF, blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
            _ => return Err(AotError::internal(op, format!("a cuBLAS gemm of {dtype:?}"))),
        };
        let blas = r
            .blas
            .get_or_init(|| {
                // SAFETY: only tries to load the library (see `is_available`).
                let present = std::panic::catch_unwind(|| unsafe { blas_sys::is_culib_present() }).unwrap_or(false);
                if !present {
                    return Err("cuBLAS (libcublas) was not found".into());
                }
                CudaBlas::new(r.stream.clone()).map_err(|e| format!("{e:?}"))
            })
            .as_ref()
            .map_err(|e| unavailable(op, e.clone()))?;
        let size = dtype.size_in_bytes() as u64;
        let at = |(base, l): (u64, &Layout)| (base + l.offset as u64 * size) as usize as *const c_void;
        // f64 scales are doubles; every other type's are floats (the
        // compute type's), as cuBLAS requires.
        let (one64, zero64, one32, zero32) = (1.0f64, 0.0f64, 1.0f32, 0.0f32);
        let (alpha, beta): (*const c_void, *const c_void) = if dtype == DType::F64 {
            ((&one64 as *const f64).cast(), (&zero64 as *const f64).cast())
        } else {
            ((&one32 as *const f32).cast(), (&zero32 as *const f32).cast())
        };
        let flag = |t: bool| if t { blas_sys::cublasOperation_t::CUBLAS_OP_T } else { blas_sys::cublasOperation_t::CUBLAS_OP_N };
        // SAFETY: the caller's guarantee; `gemm_args` checked the leading
        // dimensions against the sizes; cuBLAS's A is our right operand.
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                *blas.handle(),
                flag(g.transa),
                flag(g.transb),
                g.m,
                g.n,
                g.k,
                alpha,
                at(b),
                ty,
                g.lda,
                g.stride_a,
                at(a),
                ty,
                g.ldb,
                g.stride_b,
                beta,
                out as usize as *mut c_void,
                ty,
                g.ldc,
                g.stride_c,
                g.batch,
                compute,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| unavailable(op, format!("cuBLAS: {e:?}")))?;
        Ok(())
    }
}

impl Real {
    /// The kernel `name` of `source`, compiled with NVRTC on first use.
    fn function(&self, op: &'static str, source: &str, name: &str) -> Result<CudaFunction> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (source, name).hash(&mut h);
        let key = h.finish();
        let mut fs = self.functions.lock().map_err(|_| AotError::internal(op, "the CUDA kernel cache lock was poisoned"))?;
        if let Some(f) = fs.get(&key) {
            return Ok(f.clone());
        }
        let ptx = super::nvrtc::compile_ptx_cached(name, source, self.arch)?;
        let module = self.stream.context().load_module(ptx.into()).map_err(|e| driver(op, e))?;
        let f = module.load_function(name).map_err(|e| driver(op, e))?;
        fs.insert(key, f.clone());
        Ok(f)
    }
}

impl Mem {
    /// The buffer's address on its device, for [`Gpu::launch`].
    pub(crate) fn address(&self, gpu: &Gpu) -> u64 {
        match (self, gpu) {
            (Mem::Host(h), _) => h.as_ptr() as usize as u64,
            (Mem::Device(d), Gpu::Real(r)) => d.device_ptr(&r.stream).0,
            (Mem::Device(_), Gpu::Sim) => 0,
        }
    }
}
