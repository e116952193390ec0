//! The constants of `f64` and `f32` a body may name (`f64::consts::PI`,
//! `f32::EPSILON`), as `f64` values.

/// A constant of `f64`/`f32` (`f64::consts::PI`, `std::f64::consts::E`,
/// `f64::EPSILON`), as an `f64`.
pub(super) fn float_const(path: &syn::Path) -> Option<f64> {
    use std::f64::consts as c;
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let names: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (ty, rest) = match names[..] {
        ["std" | "core", ty, ref rest @ ..] | [ty, ref rest @ ..] if ty == "f64" || ty == "f32" => (ty, rest),
        _ => return None,
    };
    let v = match rest {
        ["consts", name] => match *name {
            "PI" => c::PI,
            "E" => c::E,
            "TAU" => c::TAU,
            "SQRT_2" => c::SQRT_2,
            "LN_2" => c::LN_2,
            "LN_10" => c::LN_10,
            "LOG2_E" => c::LOG2_E,
            "LOG10_E" => c::LOG10_E,
            "FRAC_1_SQRT_2" => c::FRAC_1_SQRT_2,
            "FRAC_2_SQRT_PI" => c::FRAC_2_SQRT_PI,
            "FRAC_1_PI" => c::FRAC_1_PI,
            "FRAC_2_PI" => c::FRAC_2_PI,
            "FRAC_PI_2" => c::FRAC_PI_2,
            "FRAC_PI_3" => c::FRAC_PI_3,
            "FRAC_PI_4" => c::FRAC_PI_4,
            "FRAC_PI_6" => c::FRAC_PI_6,
            "FRAC_PI_8" => c::FRAC_PI_8,
            _ => return None,
        },
        [name] if ty == "f64" => match *name {
            "EPSILON" => f64::EPSILON,
            "INFINITY" => f64::INFINITY,
            "NEG_INFINITY" => f64::NEG_INFINITY,
            "MAX" => f64::MAX,
            "MIN" => f64::MIN,
            "MIN_POSITIVE" => f64::MIN_POSITIVE,
            _ => return None,
        },
        [name] => f64::from(match *name {
            "EPSILON" => f32::EPSILON,
            "INFINITY" => f32::INFINITY,
            "NEG_INFINITY" => f32::NEG_INFINITY,
            "MAX" => f32::MAX,
            "MIN" => f32::MIN,
            "MIN_POSITIVE" => f32::MIN_POSITIVE,
            _ => return None,
        }),
        _ => return None,
    };
    // `f32::consts::PI` is the f32 constant, widened.
    Some(if ty == "f32" { f64::from(v as f32) } else { v })
}
