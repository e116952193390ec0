//! Renders the math functions of [`super::math`] as C functions.
//!
//! [`CVal`] implements [`Lanes`] by recording each operation as one C
//! statement, so the rendered function performs exactly the operations the
//! CPU backend performs, in the same order. Compiled without floating-point
//! contraction (`-ffp-contract=off`, NVRTC `--fmad=false`) it gives the same
//! bits. The output uses CUDA's bit-cast builtins (`__float_as_uint`,
//! `__uint_as_float`) and `__device__`/`__forceinline__`; a host compiler
//! gets them from [`HOST_PRELUDE`].

use super::math::Lanes;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A float variable of the function being rendered (`vN`).
#[derive(Clone, Copy, Debug)]
pub struct CVal(u32);

/// A bool variable of the function being rendered (`bN`).
#[derive(Clone, Copy, Debug)]
pub struct CMask(u32);

/// The statements rendered so far; one renderer per thread at a time.
#[derive(Default)]
struct Body {
    lines: Vec<String>,
    next: u32,
}

thread_local! {
    static BODY: RefCell<Body> = RefCell::default();
}

/// Appends `const <ty> <prefix>N = <expr>;` and returns `N`.
fn emit(ty: &str, prefix: char, expr: String) -> u32 {
    BODY.with(|b| {
        let mut b = b.borrow_mut();
        let n = b.next;
        b.next += 1;
        b.lines.push(format!("    const {ty} {prefix}{n} = {expr};"));
        n
    })
}

fn val(expr: String) -> CVal {
    CVal(emit("float", 'v', expr))
}

/// A float literal that C parses back to the same value.
pub(crate) fn literal(v: f32) -> String {
    if v.is_finite() {
        // Debug prints the shortest decimal that round-trips, with a point.
        format!("{v:?}f")
    } else {
        format!("__uint_as_float(0x{:08x}u)", v.to_bits())
    }
}

macro_rules! binary {
    ($tr:ident, $f:ident, $sym:literal) => {
        impl $tr for CVal {
            type Output = CVal;
            fn $f(self, o: CVal) -> CVal {
                val(format!(concat!("v{} ", $sym, " v{}"), self.0, o.0))
            }
        }
    };
}
binary!(Add, add, "+");
binary!(Sub, sub, "-");
binary!(Mul, mul, "*");
binary!(Div, div, "/");

impl Neg for CVal {
    type Output = CVal;
    fn neg(self) -> CVal {
        val(format!("-v{}", self.0))
    }
}

impl Lanes for CVal {
    type Mask = CMask;
    fn lit(v: f32) -> CVal {
        val(literal(v))
    }
    fn abs(self) -> CVal {
        val(format!("__uint_as_float(__float_as_uint(v{}) & 0x7fffffffu)", self.0))
    }
    fn lt(self, o: CVal) -> CMask {
        CMask(emit("bool", 'b', format!("v{} < v{}", self.0, o.0)))
    }
    fn is_nan(self) -> CMask {
        CMask(emit("bool", 'b', format!("v{0} != v{0}", self.0)))
    }
    fn select(m: CMask, a: CVal, b: CVal) -> CVal {
        val(format!("b{} ? v{} : v{}", m.0, a.0, b.0))
    }
    fn exp2i(self) -> CVal {
        val(format!("__uint_as_float(__float_as_uint(v{} + {}) << 23)", self.0, literal(super::math::EXP2I_MAGIC)))
    }
    fn frexp(self) -> (CVal, CVal) {
        let bits = format!("__float_as_uint(v{})", self.0);
        let m = val(format!("__uint_as_float(({bits} & 0x807fffffu) | (126u << 23))"));
        let e = val(format!("(float)((int)(({bits} >> 23) & 0xffu) - 126)"));
        (m, e)
    }
    fn copysign(self, sign: CVal) -> CVal {
        val(format!("__uint_as_float((__float_as_uint(v{}) & 0x7fffffffu) | (__float_as_uint(v{}) & 0x80000000u))", self.0, sign.0))
    }
}

/// Definitions a host C compiler needs for rendered code (CUDA has them built in).
pub const HOST_PRELUDE: &str = "\
#include <stdbool.h>
#include <string.h>
#define __device__
#define __forceinline__ inline
static inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
";

/// `f` rendered as `static __device__ __forceinline__ float NAME(float v0)`.
pub fn render_unary(name: &str, f: impl FnOnce(CVal) -> CVal) -> String {
    BODY.with(|b| *b.borrow_mut() = Body { lines: vec![], next: 1 });
    let out = f(CVal(0));
    let body = BODY.with(|b| std::mem::take(&mut *b.borrow_mut()));
    let mut s = format!("static __device__ __forceinline__ float {name}(float v0) {{\n");
    for l in &body.lines {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(s, "    return v{};\n}}", out.0);
    s
}

#[cfg(test)]
mod tests;
