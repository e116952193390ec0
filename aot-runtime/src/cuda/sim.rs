//! The simulated CUDA device: the CUDA C the renderer generates, compiled
//! by the host C++ compiler through the shim (`aot_ir::kernel::render::
//! host` and `fibers`) into a shared object, loaded, and launched on host
//! memory. It runs exactly the sources NVRTC compiles for a GPU, so the
//! test suites can check the CUDA backend's kernels on a machine without
//! one.
//!
//! A [`SimModule`] is one translation unit: rendered units concatenated,
//! and per entry point a trampoline `aot_launch_<name>(grid, block, bufs,
//! words, nwords)` that casts the buffers to the entry's pointer types,
//! rebuilds its parameter struct from the packed words
//! (`aot_ir::kernel::render::pack_params`, checking the word count) and
//! launches it: one thread after another for kernels that do not
//! synchronise, one fiber per thread for those that do.
//!
//! Compiling costs about a second, so modules are cached: in memory, and
//! on disk by a hash of their source (under `$AOT_CUDA_SIM_CACHE`, or
//! `aot-cuda-sim` in the temporary folder), so that a later process
//! skips the compiler. Batch many kernels into one module.
//!
//! With `AOT_CUDA_SIM_NVRTC=1` (as `.ci/run` sets), each module is also
//! compiled with NVRTC and assembled with ptxas before it runs here: what
//! the simulator runs is what a GPU would be given.

use crate::error::{AotError, Result};
use aot_ir::kernel::render::{fibers::FIBERS, host};
use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

/// One entry point of a module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The `extern "C" __global__` function.
    pub name: String,
    /// The C type of each pointer argument, in order (`float *`, `const
    /// __half *`, ...); the parameter struct `aot_params_<name>` follows.
    pub pointers: Vec<String>,
    /// Whether the kernel synchronises (`__syncthreads`, shuffles): then
    /// each block runs as fibers.
    pub sync: bool,
}

/// A compiled and loaded module.
pub struct SimModule {
    lib: libloading::Library,
    entries: Vec<Entry>,
}

type Trampoline = unsafe extern "C" fn(u32, u32, *const *mut c_void, *const u64, usize) -> i32;

/// Launches of kernels that synchronise share their `__shared__` arrays
/// (statics of the module), so they run one at a time.
static SYNC_LAUNCH: Mutex<()> = Mutex::new(());

impl SimModule {
    /// Compiles (or finds in a cache) the module of `units` with `entries`.
    pub fn build(units: &[&str], entries: &[Entry]) -> Result<Arc<SimModule>> {
        let source = translation_unit(units, entries);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut h);
        let key = h.finish();
        static LOADED: OnceLock<Mutex<HashMap<u64, Arc<SimModule>>>> = OnceLock::new();
        let loaded = LOADED.get_or_init(Default::default);
        if let Some(m) = loaded.lock().map_err(|_| poisoned())?.get(&key) {
            return Ok(m.clone());
        }
        // One compile at a time in this process: threads asking for the
        // same module wait for the first, then find it.
        static COMPILING: Mutex<()> = Mutex::new(());
        let _one = COMPILING.lock().map_err(|_| poisoned())?;
        if let Some(m) = loaded.lock().map_err(|_| poisoned())?.get(&key) {
            return Ok(m.clone());
        }
        if std::env::var_os("AOT_CUDA_SIM_NVRTC").is_some_and(|v| v == "1") {
            check_with_nvrtc(units, key)?;
        }
        let path = compile(&source, key)?;
        // SAFETY: the library is our own compiled module; its initialisers
        // are the C++ runtime's and the shim's thread-locals.
        let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| sim_error(format!("cannot load {}: {e}", path.display())))?;
        let m = Arc::new(SimModule { lib, entries: entries.to_vec() });
        loaded.lock().map_err(|_| poisoned())?.insert(key, m.clone());
        Ok(m)
    }

    /// Launches `entry` over `grid` blocks of `block` threads.
    ///
    /// # Safety
    /// `bufs` must point to host buffers of the entry's pointer types, each
    /// large enough for every element the parameters `words` address, and
    /// a buffer the kernel writes must not be read or written elsewhere
    /// during the launch.
    pub unsafe fn launch(&self, entry: &str, grid: u32, block: u32, bufs: &[*mut c_void], words: &[u64]) -> Result<()> {
        let e = self.entries.iter().find(|e| e.name == entry).ok_or_else(|| sim_error(format!("no entry `{entry}` in the module")))?;
        if bufs.len() != e.pointers.len() {
            return Err(sim_error(format!("`{entry}` takes {} buffers, given {}", e.pointers.len(), bufs.len())));
        }
        if block == 0 || block > 1024 {
            return Err(sim_error(format!("`{entry}`: a block of {block} threads")));
        }
        let symbol = format!("aot_launch_{entry}\0");
        // SAFETY: every trampoline of the module has this signature
        // (`translation_unit`), and the entry is one of the module's.
        let f: libloading::Symbol<'_, Trampoline> =
            unsafe { self.lib.get(symbol.as_bytes()) }.map_err(|err| sim_error(format!("`{entry}`: {err}")))?;
        let _one_at_a_time = if e.sync { Some(SYNC_LAUNCH.lock().map_err(|_| poisoned())?) } else { None };
        // SAFETY: the caller guarantees the buffers; the trampoline checks
        // the word count against the parameter struct's size.
        match unsafe { f(grid, block, bufs.as_ptr(), words.as_ptr(), words.len()) } {
            0 => Ok(()),
            _ => Err(sim_error(format!("`{entry}`: {} parameter words do not match its parameter struct", words.len()))),
        }
    }
}

fn sim_error(msg: String) -> AotError {
    AotError::DeviceUnavailable { op: "cuda simulator", msg }
}

fn poisoned() -> AotError {
    AotError::Internal { op: "cuda simulator", msg: "a lock was poisoned by a panic".into() }
}

/// The module's source: the shim, the units, a trampoline per entry.
fn translation_unit(units: &[&str], entries: &[Entry]) -> String {
    let mut s = host::host_prelude();
    s.push_str(FIBERS);
    for u in units {
        s.push_str(u);
        s.push('\n');
    }
    for e in entries {
        let args: Vec<String> = e.pointers.iter().enumerate().map(|(i, t)| format!("({t})bufs[{i}]")).collect();
        let launch = if e.sync { "aot_host_launch_sync" } else { "aot_host_launch" };
        let _ = write!(
            s,
            "extern \"C\" int aot_launch_{n}(unsigned grid, unsigned block, void *const *bufs, const unsigned long long *w, size_t nw) {{\n\
             \x20   aot_params_{n} p;\n\
             \x20   if (nw * 8 != sizeof p) return 1;\n\
             \x20   memcpy(&p, w, sizeof p);\n\
             \x20   {launch}(grid, block, [&] {{ {n}({args}, p); }});\n\
             \x20   return 0;\n}}\n",
            n = e.name,
            args = args.join(", "),
        );
    }
    s
}

/// With `AOT_CUDA_SIM_NVRTC=1`, every module the simulator builds is also
/// compiled with the real NVRTC and assembled by ptxas for `sm_80` and
/// `sm_90` (`nvrtc::compile_and_assemble`), so the suites that run on the
/// simulated device check that every kernel they launch builds for a GPU.
/// A module that passed leaves a marker in the cache, which later
/// processes trust.
fn check_with_nvrtc(units: &[&str], key: u64) -> Result<()> {
    let marker = cache_dir().join(format!("{key:016x}.nvrtc-ok"));
    if marker.is_file() {
        return Ok(());
    }
    let unit = units.join("\n");
    super::nvrtc::compile_and_assemble(&format!("sim_{key:016x}"), &unit)?;
    let _ = std::fs::create_dir_all(cache_dir());
    let _ = std::fs::write(&marker, b"");
    Ok(())
}

/// The folder of compiled modules (and of the shim's headers).
fn cache_dir() -> PathBuf {
    std::env::var_os("AOT_CUDA_SIM_CACHE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| std::env::temp_dir().join("aot-cuda-sim"), PathBuf::from)
}

/// The shared object of `source`, compiled unless the cache has it.
fn compile(source: &str, key: u64) -> Result<PathBuf> {
    let dir = cache_dir();
    let so = dir.join(format!("{key:016x}.so"));
    if so.is_file() {
        return Ok(so);
    }
    let io = |what: &str, e: std::io::Error| sim_error(format!("{what} in {}: {e}", dir.display()));
    std::fs::create_dir_all(&dir).map_err(|e| io("cannot create the cache", e))?;
    std::fs::write(dir.join("cuda_fp16.h"), host::CUDA_FP16_H).map_err(|e| io("cannot write cuda_fp16.h", e))?;
    std::fs::write(dir.join("cuda_bf16.h"), host::CUDA_BF16_H).map_err(|e| io("cannot write cuda_bf16.h", e))?;
    // Written under names of this process, then renamed: another process
    // may build the same module at the same time.
    let tag = format!("{key:016x}.{}", std::process::id());
    let (cpp, tmp) = (dir.join(format!("{tag}.cpp")), dir.join(format!("{tag}.so")));
    std::fs::write(&cpp, source).map_err(|e| io("cannot write the source", e))?;
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(&cxx)
        .args(["-std=c++17", "-O2", "-ffp-contract=off", "-fPIC", "-shared", "-w", "-I"])
        .arg(&dir)
        .arg("-o")
        .arg(&tmp)
        .arg(&cpp)
        .output()
        .map_err(|e| sim_error(format!("the host C++ compiler `{cxx}` did not run: {e}")))?;
    if !out.status.success() {
        return Err(sim_error(format!(
            "`{cxx}` could not compile the module ({}):\n{}",
            cpp.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::rename(&tmp, &so).map_err(|e| io("cannot store the module", e))?;
    let _ = std::fs::remove_file(&cpp);
    Ok(so)
}

#[cfg(test)]
mod tests;
