//! Accuracy of the math functions against f64 references, over a sweep of
//! f32 bit patterns (every one in the ignored, release-only test) and the
//! special values.

use super::*;

/// `erfc` in f64: the power series of `erf` below 2, the continued
/// fraction above (both converge to well under an f32 ulp of the result).
fn erfc64(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc64(-x);
    }
    if x < 2.0 {
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        return 1.0 - sum * 2.0 / std::f64::consts::PI.sqrt();
    }
    let mut f = x;
    for k in (1..120).rev() {
        f = x + (k as f64 / 2.0) / f;
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / f
}

fn gelu64(x: f64) -> f64 {
    0.5 * x * erfc64(-x / std::f64::consts::SQRT_2)
}

fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The error of `got` against the exact `want`, in units of the last place
/// of `want` rounded to f32 (the subnormal spacing below the normal range).
fn ulps(got: f32, want: f64) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
    }
    let w = want as f32;
    if w.is_infinite() || got.is_infinite() {
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let exp = if w == 0.0 { -149 } else { ((w.abs().to_bits() >> 23) as i32 - 150).max(-149) };
    (f64::from(got) - want).abs() / 2f64.powi(exp)
}

/// A function, its reference, and the domain where its ulp bound holds.
struct Case {
    name: &'static str,
    f: fn(f32) -> f32,
    reference: fn(f64) -> f64,
    max_ulps: f64,
    domain: fn(f32) -> bool,
}

fn all(_: f32) -> bool {
    true
}

fn cases() -> Vec<Case> {
    let sincos = |x: f32| x.abs() <= SIN_COS_LIMIT;
    vec![
        Case { name: "exp", f: exp::<f32>, reference: f64::exp, max_ulps: 1.25, domain: all },
        Case { name: "expm1", f: expm1::<f32>, reference: f64::exp_m1, max_ulps: 2.05, domain: all },
        Case { name: "log", f: log::<f32>, reference: f64::ln, max_ulps: 1.25, domain: all },
        Case { name: "log1p", f: log1p::<f32>, reference: f64::ln_1p, max_ulps: 1.7, domain: all },
        Case { name: "tanh", f: tanh::<f32>, reference: f64::tanh, max_ulps: 2.3, domain: all },
        Case { name: "sigmoid", f: sigmoid::<f32>, reference: sigmoid64, max_ulps: 2.35, domain: all },
        Case { name: "silu", f: silu::<f32>, reference: |x| x * sigmoid64(x), max_ulps: 3.25, domain: all },
        Case { name: "gelu", f: gelu::<f32>, reference: gelu64, max_ulps: 8.0, domain: all },
        Case { name: "sin", f: sin::<f32>, reference: f64::sin, max_ulps: 2.1, domain: sincos },
        Case { name: "cos", f: cos::<f32>, reference: f64::cos, max_ulps: 2.3, domain: sincos },
    ]
}

/// Where the bound is absolute rather than in ulps: results below the
/// normal range (within 2^-126 + 2 ulp of the subnormal spacing), and tiny
/// `sin`/`cos` results near their zeros, which the reduced argument
/// reaches only to about 2^-50.
fn tolerated(name: &str, got: f32, want: f64) -> bool {
    let err = (f64::from(got) - want).abs();
    (want.abs() < f64::from(f32::MIN_POSITIVE) && err <= f64::from(f32::MIN_POSITIVE))
        || (matches!(name, "sin" | "cos") && want.abs() < 1e-6 && err < 2e-13)
}

/// The worst error of each case over the f32s with bit patterns
/// `0, step, 2 step, ..` (both signs), as (name, ulps, at).
fn sweep(step: u32) -> Vec<(&'static str, f64, f32)> {
    let mut worst = vec![];
    for case in cases() {
        let mut w = (0.0, 0.0f32);
        let mut bits = 0u32;
        loop {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                if !(case.domain)(x) {
                    continue;
                }
                let got = (case.f)(x);
                let want = (case.reference)(f64::from(x));
                let e = ulps(got, want);
                if e > w.0 && !tolerated(case.name, got, want) {
                    w = (e, x);
                }
            }
            let Some(next) = bits.checked_add(step) else { break };
            if next >= 0x7f80_0000 {
                break;
            }
            bits = next;
        }
        worst.push((case.name, w.0, w.1));
    }
    worst
}

#[test]
fn errors_stay_within_the_documented_bounds() {
    let bounds: Vec<(&str, f64)> = cases().iter().map(|c| (c.name, c.max_ulps)).collect();
    let over: Vec<String> = sweep(997)
        .into_iter()
        .zip(bounds)
        .filter(|((_, e, _), (_, bound))| e > bound)
        .map(|((name, e, at), (_, bound))| format!("{name}: {e} ulp at {at:e} (bound {bound})"))
        .collect();
    assert!(over.is_empty(), "{}", over.join("\n"));
}

/// Every finite f32, in a release build:
/// `cargo test --release -p aot-ir max_errors_over_every_f32 -- --ignored --nocapture`.
#[test]
#[ignore]
fn max_errors_over_every_f32() {
    let step = std::env::var("AOT_MATH_STEP").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    for (name, e, at) in sweep(step) {
        println!("{name:8} max {e:.3} ulp at {at:e}");
    }
}

#[test]
fn special_values() {
    let inf = f32::INFINITY;
    for case in cases() {
        for x in [0.0f32, -0.0, inf, -inf, f32::NAN, f32::MIN_POSITIVE, 1e-40, -1e-40, f32::MAX, f32::MIN] {
            if !(case.domain)(x) {
                continue;
            }
            let got = (case.f)(x);
            let want = (case.reference)(f64::from(x));
            let ok = ulps(got, want) <= case.max_ulps || tolerated(case.name, got, want);
            assert!(ok, "{}({x:e}) = {got:e}, want {want:e}", case.name);
            if want == 0.0 {
                assert_eq!(got.is_sign_negative(), want.is_sign_negative(), "{}({x:e}): sign of zero", case.name);
            }
        }
    }
    assert!(gelu(f32::NEG_INFINITY).is_nan(), "gelu(-inf) is NaN, as PyTorch's -inf * 0");
}
