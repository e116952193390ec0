//! Compiles rendered kernels with the host C++ compiler through the shim
//! and runs launches of them: one translation unit, one process, many
//! launches.

use super::super::host::{host_prelude, CUDA_BF16_H, CUDA_FP16_H};
use super::super::{pack_params, Operand, RenderedKernel};
use super::DType;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// An operand's layout (elements).
#[derive(Clone, Debug)]
pub struct Layout {
    pub offset: i64,
    pub strides: Vec<i64>,
}

/// One launch of kernel `unit` (an index into the compiled kernels).
pub struct Launch {
    pub unit: usize,
    pub sizes: Vec<i64>,
    /// The output's layout and the whole output buffer (its initial bits).
    pub out: (Layout, Vec<u64>),
    /// Per input its layout and buffer (bits of the storage type).
    pub inputs: Vec<(Layout, Vec<u64>)>,
    pub scalars: Vec<f64>,
    pub grid: u32,
    pub block: u32,
}

/// The compiled program, or `None` (with a note) when there is no compiler.
pub struct Program {
    dir: PathBuf,
    exe: PathBuf,
}

fn bytes(d: DType) -> usize {
    match d {
        DType::F32 => 4,
        DType::F64 | DType::I64 => 8,
        DType::F16 | DType::BF16 => 2,
        DType::Bool => 1,
    }
}

/// The per-kernel runner: the params struct from the words (checking that
/// the ABI's word count is the struct's size), then the launch.
/// `dtypes`: the output's, then each input's.
fn runner(i: usize, k: &RenderedKernel, dtypes: &[DType]) -> String {
    let (name, st) = (&k.name, dtypes[0].storage());
    let mut s = format!("static void aot_run_{i}(const unsigned long long *w, size_t nw, void **bufs, unsigned grid, unsigned block) {{\n");
    let _ = writeln!(s, "    aot_params_{name} p;\n    if (nw * 8 != sizeof p) {{ fprintf(stderr, \"ABI: %zu words for %zu bytes\\n\", nw, sizeof p); exit(3); }}");
    s.push_str("    memcpy(&p, w, sizeof p);\n");
    let _ = writeln!(s, "    {st} *out = ({st} *)bufs[0];");
    let mut args = vec!["out".to_string()];
    for (j, d) in dtypes[1..].iter().enumerate() {
        let st = d.storage();
        let _ = writeln!(s, "    const {st} *in{j} = (const {st} *)bufs[{}];", j + 1);
        args.push(format!("in{j}"));
    }
    args.push("p".into());
    let _ = writeln!(s, "    aot_host_launch(grid, block, [&] {{ {name}({}); }});\n}}", args.join(", "));
    s
}

/// `main`: reads launches as hex words (unit, grid, block, params, then
/// per buffer its length and elements), prints each output buffer as a
/// line. `sizes`: per unit, its buffers' element sizes (output first).
fn main_fn(sizes: &[Vec<usize>]) -> String {
    let n = sizes.len();
    let mut s = String::from("typedef void (*aot_runner)(const unsigned long long *, size_t, void **, unsigned, unsigned);\n");
    let runners: Vec<String> = (0..n).map(|i| format!("aot_run_{i}")).collect();
    let bytes: Vec<String> =
        sizes.iter().map(|u| format!("{{{}}}", u.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", "))).collect();
    let _ = writeln!(s, "static const aot_runner aot_runners[] = {{{}}};", runners.join(", "));
    let _ = writeln!(s, "static const int aot_bytes[][16] = {{{}}};", bytes.join(", "));
    s.push_str(
        "static unsigned long long rd(void) { unsigned long long v; if (scanf(\"%llx\", &v) != 1) exit(2); return v; }
int main(void) {
    unsigned long long unit;
    while (scanf(\"%llx\", &unit) == 1) {
        const unsigned grid = (unsigned)rd(), block = (unsigned)rd();
        const size_t nw = (size_t)rd();
        unsigned long long *w = (unsigned long long *)malloc(8 * nw + 8);
        for (size_t i = 0; i < nw; i++) w[i] = rd();
        const size_t nb = (size_t)rd();
        if (nb < 1 || nb > 16) exit(2);
        void *bufs[16] = {0};
        size_t lens[16] = {0};
        for (size_t j = 0; j < nb; j++) {
            const int b = aot_bytes[unit][j];
            lens[j] = (size_t)rd();
            bufs[j] = malloc(b * lens[j] + 8);
            for (size_t i = 0; i < lens[j]; i++) {
                const unsigned long long v = rd();
                memcpy((char *)bufs[j] + b * i, &v, b);
            }
        }
        aot_runners[unit](w, nw, bufs, grid, block);
        for (size_t i = 0; i < lens[0]; i++) {
            unsigned long long v = 0;
            memcpy(&v, (char *)bufs[0] + aot_bytes[unit][0] * i, aot_bytes[unit][0]);
            printf(\"%llx \", v);
        }
        printf(\"\\n\");
        for (size_t j = 0; j < nb; j++) free(bufs[j]);
        free(w);
    }
    return 0;
}
",
    );
    s
}

/// The host C++ compiler: `$CXX`, else `c++`; `None` when it does not run.
fn compiler() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ok = Command::new(&cxx).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    ok.then_some(cxx)
}

impl Program {
    /// Compiles `kernels` (each with its buffers' dtypes: the output's,
    /// then each input's) into one program; `None`, with a printed note,
    /// without a C++ compiler.
    pub fn build(tag: &str, kernels: &[(RenderedKernel, Vec<DType>)]) -> Option<Program> {
        let Some(cxx) = compiler() else {
            // Straight to stderr: the test harness captures `eprintln!`.
            let _ = writeln!(std::io::stderr(), "note: no host C++ compiler (`$CXX` or `c++`): the CPU shim test `{tag}` is skipped");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("aot-render-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cuda_fp16.h"), CUDA_FP16_H).unwrap();
        std::fs::write(dir.join("cuda_bf16.h"), CUDA_BF16_H).unwrap();
        let mut src = host_prelude();
        src.push_str("#include <stdio.h>\n#include <stdlib.h>\n");
        // The rendered units, concatenated, exactly as rendered.
        for (k, _) in kernels {
            src.push_str(&k.source);
        }
        for (i, (k, d)) in kernels.iter().enumerate() {
            src.push_str(&runner(i, k, d));
        }
        src.push_str(&main_fn(&kernels.iter().map(|(_, d)| d.iter().map(|&d| bytes(d)).collect()).collect::<Vec<_>>()));
        let (file, exe) = (dir.join("kernels.cpp"), dir.join("kernels"));
        std::fs::write(&file, &src).unwrap();
        let out = Command::new(&cxx)
            .args(["-std=c++17", "-O1", "-ffp-contract=off", "-Wall", "-Werror", "-I"])
            .arg(&dir)
            .arg("-o")
            .arg(&exe)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the rendered kernels failed to compile ({}):\n{}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Program { dir, exe })
    }

    /// Runs the launches; per launch, the output buffer's bits.
    pub fn run(&self, launches: &[Launch]) -> Vec<Vec<u64>> {
        let mut input = String::new();
        for l in launches {
            fn op(l: &Layout) -> Operand<'_> {
                Operand { offset: l.offset, strides: &l.strides }
            }
            let ins: Vec<Operand<'_>> = l.inputs.iter().map(|(lay, _)| op(lay)).collect();
            let words = pack_params(&l.sizes, op(&l.out.0), &ins, &l.scalars).unwrap();
            let _ = write!(input, "{:x} {:x} {:x} {:x}", l.unit, l.grid, l.block, words.len());
            words.iter().for_each(|w| {
                let _ = write!(input, " {w:x}");
            });
            let _ = write!(input, "\n{:x}", 1 + l.inputs.len());
            for buf in std::iter::once(&l.out.1).chain(l.inputs.iter().map(|(_, b)| b)) {
                let _ = write!(input, "\n{:x}", buf.len());
                buf.iter().for_each(|w| {
                    let _ = write!(input, " {w:x}");
                });
            }
            input.push('\n');
        }
        let mut child = Command::new(&self.exe).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // Written from another thread: the child's output would fill its pipe.
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(out.status.success(), "the kernel program failed: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<Vec<u64>> =
            text.lines().map(|l| l.split_whitespace().map(|w| u64::from_str_radix(w, 16).unwrap()).collect()).collect();
        assert_eq!(rows.len(), launches.len());
        rows
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
