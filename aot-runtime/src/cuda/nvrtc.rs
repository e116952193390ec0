//! NVRTC: generated CUDA C to PTX, for a device's architecture.
//!
//! cudarc loads `libnvrtc.so.12` by name. Where the CUDA toolkit is not on
//! the library path, `AOT_CUDA_TOOLS` names a folder laid out as NVIDIA's
//! pip wheels install it (`.ci/cuda-tools` makes one: NVRTC, the runtime
//! headers and ptxas, the same 12.9 release), and the library is loaded
//! from there first, by its full path, so the load by name finds it. The
//! library must not be symlinked elsewhere: it finds its builtins library
//! next to itself.
//!
//! Every unit is compiled with `--fmad=false` and the precise division and
//! square root (NVRTC's defaults), as the renderer requires for the CPU's
//! bits, and with `--include-path` to the runtime headers for
//! `cuda_fp16.h` and `cuda_bf16.h`.
//!
//! [`compile_ptx_cached`] keeps the PTX on disk, by a hash of the source,
//! the entry and the architecture, under `$AOT_CACHE_DIR/ptx` (else
//! `$XDG_CACHE_HOME/aot/ptx`, else `~/.cache/aot/ptx`), so a second
//! process skips NVRTC. A cache that cannot be read or written is only
//! slower.

use crate::error::{AotError, Result};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The folder of cached PTX, if a cache folder can be named.
fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("AOT_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("aot")))
        .or_else(|| env("HOME").map(|h| h.join(".cache/aot")))
        .map(|d| d.join("ptx"))
}

/// [`compile_ptx`] through the disk cache (see the module doc).
pub fn compile_ptx_cached(name: &str, source: &str, arch: &'static str) -> Result<String> {
    // FNV-1a: stable across builds and processes, unlike the std hasher.
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    (name, source, arch).hash(&mut h);
    let file = cache_dir().map(|d| d.join(format!("{:016x}-{arch}.ptx", h.finish())));
    if let Some(ptx) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        return Ok(ptx);
    }
    let ptx = compile_ptx(name, source, arch)?;
    if let Some(f) = file {
        // Written under a name of this process, then renamed, so a reader
        // never sees half a file.
        let tmp = f.with_extension(format!("{}.tmp", std::process::id()));
        let stored = f.parent().is_some_and(|d| std::fs::create_dir_all(d).is_ok()) && std::fs::write(&tmp, &ptx).is_ok();
        if !(stored && std::fs::rename(&tmp, &f).is_ok()) {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(ptx)
}

/// The folder of [`AOT_CUDA_TOOLS`](self), if set.
fn tools_dir() -> Option<PathBuf> {
    std::env::var_os("AOT_CUDA_TOOLS").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Where `cuda_fp16.h` is: the tools folder's runtime headers, else
/// `$CUDA_HOME/include` or `/usr/local/cuda/include`.
pub fn include_dir() -> Option<PathBuf> {
    let candidates = [
        tools_dir().map(|d| d.join("nvidia/cuda_runtime/include")),
        std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("include")),
        Some(PathBuf::from("/usr/local/cuda/include")),
    ];
    candidates.into_iter().flatten().find(|d| d.join("cuda_fp16.h").is_file())
}

/// `ptxas` from the tools folder, else from `$CUDA_HOME/bin`.
pub fn ptxas() -> Option<PathBuf> {
    let candidates = [
        tools_dir().map(|d| d.join("nvidia/cuda_nvcc/bin/ptxas")),
        std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("bin/ptxas")),
        Some(PathBuf::from("/usr/local/cuda/bin/ptxas")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_file())
}

/// Compiles `unit` with NVRTC for `compute_80` and `compute_90` and
/// assembles each PTX with [`ptxas`] for `sm_80` and `sm_90`: the check
/// that generated CUDA C builds for the GPUs aot targets, without a GPU.
pub fn compile_and_assemble(name: &str, unit: &str) -> Result<()> {
    let ptxas = ptxas().ok_or_else(|| AotError::DeviceUnavailable {
        op: "ptxas",
        msg: "ptxas was not found: set AOT_CUDA_TOOLS to the folder `.ci/cuda-tools` prints, or CUDA_HOME".into(),
    })?;
    for (arch, sm) in [("compute_80", "sm_80"), ("compute_90", "sm_90")] {
        let ptx = compile_ptx(name, unit, arch)?;
        let dir = std::env::temp_dir().join(format!("aot-ptxas-{}-{name}", std::process::id()));
        let io = |e: std::io::Error| AotError::Internal { op: "ptxas", msg: format!("{}: {e}", dir.display()) };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let file = dir.join(format!("{sm}.ptx"));
        std::fs::write(&file, &ptx).map_err(io)?;
        let out = std::process::Command::new(&ptxas)
            .arg(format!("-arch={sm}"))
            .arg("-o")
            .arg(dir.join(format!("{sm}.cubin")))
            .arg(&file)
            .output()
            .map_err(io)?;
        let _ = std::fs::remove_dir_all(&dir);
        if !out.status.success() {
            let log = String::from_utf8_lossy(&out.stderr).into_owned();
            return Err(AotError::KernelCompile { op: "ptxas", kernel: name.to_string(), arch: sm.to_string(), log });
        }
    }
    Ok(())
}

/// Whether NVRTC loads, or why not. Computed once per process; never
/// panics.
pub fn nvrtc_status() -> std::result::Result<(), String> {
    static STATUS: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    STATUS.get_or_init(load).clone()
}

fn load() -> std::result::Result<(), String> {
    if let Some(dir) = tools_dir() {
        let path = dir.join("nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
        if path.is_file() {
            // SAFETY: loading NVRTC runs no initialisers beyond the C
            // library's own; the handle is leaked so the library stays
            // loaded for cudarc, which then finds it by its soname.
            match unsafe { libloading::Library::new(&path) } {
                Ok(lib) => std::mem::forget(lib),
                Err(e) => return Err(format!("cannot load {}: {e}", path.display())),
            }
        }
    }
    // cudarc panics when it finds a library of the wrong version (a
    // missing symbol): that means no usable NVRTC, not a crash.
    // SAFETY: `is_culib_present` only tries to dlopen the library.
    let present = std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }).unwrap_or(false);
    if present {
        Ok(())
    } else {
        Err("NVRTC (libnvrtc.so.12) was not found: install the CUDA toolkit, or set AOT_CUDA_TOOLS to the folder \
             `.ci/cuda-tools` prints"
            .into())
    }
}

/// Compiles one translation unit (`name` names it in errors) to PTX for
/// `arch` (`"compute_80"`, `"compute_90"`, ...).
pub fn compile_ptx(name: &str, source: &str, arch: &'static str) -> Result<String> {
    nvrtc_status().map_err(|msg| AotError::DeviceUnavailable { op: "nvrtc", msg })?;
    if source.contains('\0') {
        return Err(AotError::Internal { op: "nvrtc", msg: format!("kernel `{name}`: a NUL byte in its source") });
    }
    let include = include_dir().ok_or_else(|| AotError::DeviceUnavailable {
        op: "nvrtc",
        msg: "the CUDA runtime headers (cuda_fp16.h) were not found: set AOT_CUDA_TOOLS or CUDA_HOME".into(),
    })?;
    let opts = cudarc::nvrtc::CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        arch: Some(arch),
        include_paths: vec![include.display().to_string()],
        name: Some(format!("{name}.cu")),
        ..Default::default()
    };
    crate::counters::bump(crate::counters::Counter::NvrtcRuns);
    let failed = |log: String| AotError::KernelCompile { op: "nvrtc", kernel: name.to_string(), arch: arch.to_string(), log };
    match std::panic::catch_unwind(|| cudarc::nvrtc::compile_ptx_with_opts(source, opts).map(|p| p.to_src())) {
        Ok(Ok(ptx)) => Ok(ptx),
        Ok(Err(cudarc::nvrtc::CompileError::CompileError { log, .. })) => Err(failed(log.to_string_lossy().into_owned())),
        Ok(Err(e)) => Err(failed(format!("{e:?}"))),
        Err(_) => Err(failed("NVRTC panicked".into())),
    }
}
