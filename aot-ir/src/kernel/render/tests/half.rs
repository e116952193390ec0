//! f16 and bf16 in Rust, for the reference (aot-ir has no `half`): values
//! decoded from their fields, and rounding by searching the ordered codes,
//! an algorithm independent of the shim's bit arithmetic.

/// The value of a 16-bit code whose positive codes `0..=top` are ordered.
fn round(x: f64, top: u16, value: fn(u16) -> f64, overflow: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    if x.is_nan() {
        // Signaling (the quiet bit clear): the kernels must quiet it.
        return sign | top | 1;
    }
    let a = x.abs();
    // The largest finite code whose value is at most `a`.
    let (mut lo, mut hi) = (0u16, top);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if value(mid) <= a {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if value(lo) == a {
        return sign | lo;
    }
    let up = if lo + 1 == top { overflow } else { value(lo + 1) };
    // Compared as 2a against lo + up, both exact in f64.
    let mid = value(lo) + up;
    let code = if 2.0 * a < mid || (2.0 * a == mid && lo % 2 == 0) { lo } else { lo + 1 };
    sign | code
}

pub fn f16_value(h: u16) -> f32 {
    let (e, m) = (i32::from((h >> 10) & 0x1f), f64::from(h & 0x3ff));
    let v = match e {
        0x1f if m == 0.0 => f64::INFINITY,
        0x1f => f64::NAN, // quiet, as from `half`
        0 => m * 2f64.powi(-24),
        _ => (1024.0 + m) * 2f64.powi(e - 25),
    };
    (if h & 0x8000 != 0 { -v } else { v }) as f32
}

/// A NaN comes out quiet, as from `half`'s conversion.
pub fn bf16_value(b: u16) -> f32 {
    let nan = b & 0x7fff > 0x7f80;
    f32::from_bits((u32::from(b) | if nan { 0x40 } else { 0 }) << 16)
}

pub fn to_f16(x: f32) -> u16 {
    to_f16_64(f64::from(x))
}

pub fn to_bf16(x: f32) -> u16 {
    to_bf16_64(f64::from(x))
}

/// A double rounded once to f16 (as `half::f16::from_f64`).
pub fn to_f16_64(x: f64) -> u16 {
    round(x, 0x7c00, |h| f64::from(f16_value(h)), 65536.0)
}

/// A double rounded once to bf16.
pub fn to_bf16_64(x: f64) -> u16 {
    round(x, 0x7f80, |b| f64::from(bf16_value(b)), 2f64.powi(128))
}

pub fn round_f16(x: f32) -> f32 {
    f16_value(to_f16(x))
}

pub fn round_bf16(x: f32) -> f32 {
    bf16_value(to_bf16(x))
}

#[test]
fn the_reference_conversions_round_to_nearest_even() {
    for h in (0..0x7c00u16).chain(0x8000..0xfc00) {
        assert_eq!(to_f16(f16_value(h)), h, "{h:#x}");
        assert_eq!(to_bf16(bf16_value(h)), h, "{h:#x}");
    }
    let ulp = 2f32.powi(-10);
    assert_eq!(to_f16(1.0 + ulp / 2.0), 0x3c00); // a tie, to even
    assert_eq!(to_f16(1.0 + 1.5 * ulp), 0x3c02); // a tie, to even
    assert_eq!(to_f16(1.0 + ulp / 2.0 + 2f32.powi(-20)), 0x3c01); // just above
    assert_eq!(to_f16(65519.0), 0x7bff);
    assert_eq!(to_f16(65520.0), 0x7c00);
    assert_eq!(to_f16(-1e9), 0xfc00);
    assert_eq!(to_f16(2f32.powi(-25)), 0); // half the smallest subnormal: to even
    assert_eq!(to_f16(-3.0 * 2f32.powi(-25)), 0x8002);
    assert_eq!(to_f16(f32::INFINITY), 0x7c00);
    assert!(f16_value(to_f16(f32::NAN)).is_nan());
    assert_eq!(to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80); // a tie, to even
    assert_eq!(to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
    assert_eq!(to_bf16(f32::MAX), 0x7f80);
    assert!(bf16_value(to_bf16(-f32::NAN)).is_nan());
}
