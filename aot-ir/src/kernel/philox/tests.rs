//! Philox4x32-10 against the known-answer vectors of its authors' Random123
//! library, and the C version against the Rust one (host compiler).

use super::{block, blocks, philox4x32_10, PHILOX_C};
use std::fmt::Write as _;
use std::process::Command;

#[test]
fn known_answers() {
    assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
    assert_eq!(philox4x32_10([u32::MAX; 4], [u32::MAX; 2]), [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
    assert_eq!(
        philox4x32_10([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344], [0xa409_3822, 0x299f_31d0]),
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
    );
}

#[test]
fn blocks_agree_with_block() {
    for (seed, first) in [(0, 0), (u64::MAX, u64::MAX - 5), (0x1234_5678_9abc_def0, 1 << 32), (7, (1 << 32) - 3)] {
        let batch = blocks::<16>(seed, first);
        for (j, w) in batch.iter().enumerate() {
            assert_eq!(*w, block(seed, first.wrapping_add(j as u64)), "seed {seed} block {first} + {j}");
        }
    }
}

#[test]
fn the_c_version_agrees() {
    let dir = std::env::temp_dir().join(format!("aot-philox-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    };
    for _ in 0..64 {
        cases.push(([next(), next(), next(), next()], [next(), next()]));
    }
    let mut src = format!("#include <stdio.h>\n#define __device__\n{PHILOX_C}{PHILOX_C}int main(void) {{\n    unsigned o[4];\n");
    for (c, k) in &cases {
        let _ = writeln!(
            src,
            "    aot_philox4x32_10({}u, {}u, {}u, {}u, {}u, {}u, o); printf(\"%u %u %u %u\\n\", o[0], o[1], o[2], o[3]);",
            c[0], c[1], c[2], c[3], k[0], k[1]
        );
    }
    src.push_str("    return 0;\n}\n");
    let (file, exe) = (dir.join("philox.c"), dir.join("philox"));
    std::fs::write(&file, src).unwrap();
    let Ok(built) = Command::new("cc").args(["-O2", "-o"]).arg(&exe).arg(&file).output() else {
        eprintln!("skipped: no host C compiler");
        return;
    };
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let want: String = cases.iter().map(|(c, k)| philox4x32_10(*c, *k)).map(|o| format!("{} {} {} {}\n", o[0], o[1], o[2], o[3])).collect();
    assert_eq!(text, want);
    let _ = std::fs::remove_dir_all(&dir);
}
