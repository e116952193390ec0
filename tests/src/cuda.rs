//! Compiling CUDA sources the way a GPU would load them (feature `cuda`):
//! NVRTC to PTX, then ptxas to machine code, for the architectures the
//! project supports.

use aot_runtime::cuda::nvrtc;

/// The (virtual, real) architecture pairs every kernel must build for.
pub const ARCHS: [(&str, &str); 2] = [("compute_80", "sm_80"), ("compute_90", "sm_90")];

/// Compiles the translation unit `unit` (named `name` in messages) with
/// NVRTC for each of [`ARCHS`] and assembles the PTX with `ptxas`; the
/// first failure, with its log.
pub fn assemble(ptxas: &std::path::Path, name: &str, unit: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("aot-ptxas-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = ARCHS.iter().try_for_each(|&(arch, sm)| {
        let ptx = nvrtc::compile_ptx(name, unit, arch).map_err(|e| e.to_string())?;
        let file = dir.join(format!("{sm}.ptx"));
        std::fs::write(&file, &ptx).map_err(|e| format!("{}: {e}", file.display()))?;
        let out = std::process::Command::new(ptxas)
            .arg(format!("-arch={sm}"))
            .arg("-o")
            .arg(dir.join(format!("{sm}.cubin")))
            .arg(&file)
            .output()
            .map_err(|e| format!("ptxas did not run: {e}"))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!("ptxas {sm} ({name}): {}", String::from_utf8_lossy(&out.stderr))),
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}
