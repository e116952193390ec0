//! The rendered C computes the same bits as the Rust instantiation: each
//! function is compiled with the host C compiler and run on a sweep of
//! inputs.

use super::super::math;
use super::*;
use std::io::Write as _;
use std::process::{Command, Stdio};

type F = fn(f32) -> f32;

fn functions() -> Vec<(&'static str, F, String)> {
    vec![
        ("aot_exp", math::exp::<f32> as F, render_unary("aot_exp", math::exp)),
        ("aot_expm1", math::expm1::<f32>, render_unary("aot_expm1", math::expm1)),
        ("aot_log", math::log::<f32>, render_unary("aot_log", math::log)),
        ("aot_log1p", math::log1p::<f32>, render_unary("aot_log1p", math::log1p)),
        ("aot_tanh", math::tanh::<f32>, render_unary("aot_tanh", math::tanh)),
        ("aot_sigmoid", math::sigmoid::<f32>, render_unary("aot_sigmoid", math::sigmoid)),
        ("aot_silu", math::silu::<f32>, render_unary("aot_silu", math::silu)),
        ("aot_gelu", math::gelu::<f32>, render_unary("aot_gelu", math::gelu)),
        ("aot_sin", math::sin::<f32>, render_unary("aot_sin", math::sin)),
        ("aot_cos", math::cos::<f32>, render_unary("aot_cos", math::cos)),
    ]
}

/// The inputs: a sweep of bit patterns of both signs, and the specials.
fn inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (0..0x7f80_0000u32).step_by(65_521).flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]).collect();
    xs.extend([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.0, -1.0, 88.7, -103.9, 8192.0, -8192.0]);
    xs
}

#[test]
fn rendered_c_matches_the_cpu_bit_for_bit() {
    let fs = functions();
    let mut src = String::from(HOST_PRELUDE);
    src.push_str("#include <stdio.h>\n");
    for (_, _, text) in &fs {
        src.push_str(text);
    }
    // Reads hex bit patterns, prints each function's result bits per line.
    src.push_str("int main(void) {\n    unsigned u;\n    while (scanf(\"%x\", &u) == 1) {\n        float x = __uint_as_float(u);\n");
    for (name, _, _) in &fs {
        src.push_str(&format!("        printf(\"%08x \", __float_as_uint({name}(x)));\n"));
    }
    src.push_str("        printf(\"\\n\");\n    }\n    return 0;\n}\n");

    let dir = std::env::temp_dir().join(format!("aot-c-math-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (c_file, exe) = (dir.join("math.c"), dir.join("math"));
    std::fs::write(&c_file, &src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-O2", "-ffp-contract=off", "-o"])
        .arg(&exe)
        .arg(&c_file)
        .status()
        .unwrap_or_else(|e| panic!("the C compiler `{cc}` is needed for this test: {e}"));
    assert!(status.success(), "rendered C failed to compile:\n{src}");

    let xs = inputs();
    let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let input: String = xs.iter().map(|x| format!("{:08x}\n", x.to_bits())).collect();
    // Written from another thread: the child's output would fill its pipe.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), xs.len());
    for (x, row) in xs.iter().zip(rows) {
        for ((name, f, _), got) in fs.iter().zip(row.split_whitespace()) {
            let want = f(*x);
            let got = f32::from_bits(u32::from_str_radix(got, 16).unwrap());
            let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
            assert!(same, "{name}({x:e}): C gives {got:e}, Rust {want:e}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rendered_function_reads_as_c() {
    let text = render_unary("aot_sigmoid", math::sigmoid);
    assert!(text.starts_with("static __device__ __forceinline__ float aot_sigmoid(float v0) {\n"), "{text}");
    assert!(text.contains("const float v1 = "), "{text}");
    assert!(text.trim_end().ends_with('}'), "{text}");
}
