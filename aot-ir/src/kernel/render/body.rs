//! A kernel body as C statements: [`KVal`] implements
//! [`elementwise::Compute`] by recording each operation as one statement
//! over the compute type (`float` or `double`), so each op's C comes from
//! its one definition in [`elementwise::with_op`].

use super::super::c_math::{self, CVal};
use super::super::elementwise::{self, Compute, OpVisitor};
use super::super::math;
use super::{KernelDType, RenderError, ScalarSlots};
use crate::kernel::Kernel;
use crate::node::Op;
use crate::types::{Arg, ValueId};
use std::cell::RefCell;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A compute-typed variable of the body being rendered (`cN`).
#[derive(Clone, Copy, Debug)]
pub(super) struct KVal(u32);

/// The f32 math functions a body may call, each rendered once per
/// translation unit by [`c_math::render_unary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Helper {
    Exp,
    Log,
    Tanh,
    Sigmoid,
    Silu,
    Gelu,
    Sin,
    Cos,
}

impl Helper {
    pub(super) fn name(self) -> &'static str {
        match self {
            Helper::Exp => "aot_exp",
            Helper::Log => "aot_log",
            Helper::Tanh => "aot_tanh",
            Helper::Sigmoid => "aot_sigmoid",
            Helper::Silu => "aot_silu",
            Helper::Gelu => "aot_gelu",
            Helper::Sin => "aot_sin",
            Helper::Cos => "aot_cos",
        }
    }

    /// The C function, from the one definition in [`math`].
    pub(super) fn render(self) -> String {
        let f: fn(CVal) -> CVal = match self {
            Helper::Exp => math::exp,
            Helper::Log => math::log,
            Helper::Tanh => math::tanh,
            Helper::Sigmoid => math::sigmoid,
            Helper::Silu => math::silu,
            Helper::Gelu => math::gelu,
            Helper::Sin => math::sin,
            Helper::Cos => math::cos,
        };
        c_math::render_unary(self.name(), f)
    }
}

/// The statements recorded so far; one body per thread at a time.
#[derive(Default)]
struct Ctx {
    lines: Vec<String>,
    next: u32,
    double: bool,
    helpers: Vec<Helper>,
}

thread_local! {
    static CTX: RefCell<Ctx> = RefCell::default();
}

fn is_double() -> bool {
    CTX.with(|c| c.borrow().double)
}

/// Appends `const <compute type> cN = <expr>;`.
fn val(expr: String) -> KVal {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        let n = c.next;
        c.next += 1;
        let ty = if c.double { "double" } else { "float" };
        c.lines.push(format!("    const {ty} c{n} = {expr};"));
        KVal(n)
    })
}

/// Notes that the unit needs the f32 math helper `h`.
fn need(h: Helper) {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if !c.helpers.contains(&h) {
            c.helpers.push(h);
        }
    });
}

/// `name(cA)` for an f32 math helper.
fn call(h: Helper, a: KVal) -> KVal {
    need(h);
    val(format!("{}(c{})", h.name(), a.0))
}

/// A double literal that C parses back to the same value.
fn literal64(v: f64) -> String {
    if v.is_finite() {
        // Debug prints the shortest decimal that round-trips.
        format!("{v:?}")
    } else {
        format!("__longlong_as_double(0x{:016x}LL)", v.to_bits())
    }
}

/// `|x|` by clearing the sign bit (as `f32::abs`/`f64::abs`, NaN too).
fn abs_expr(a: KVal) -> String {
    if is_double() {
        format!("__longlong_as_double(__double_as_longlong(c{}) & 0x7fffffffffffffffLL)", a.0)
    } else {
        format!("__uint_as_float(__float_as_uint(c{}) & 0x7fffffffu)", a.0)
    }
}

macro_rules! binary {
    ($tr:ident, $f:ident, $sym:literal) => {
        impl $tr for KVal {
            type Output = KVal;
            fn $f(self, o: KVal) -> KVal {
                val(format!(concat!("c{} ", $sym, " c{}"), self.0, o.0))
            }
        }
    };
}
binary!(Add, add, "+");
binary!(Sub, sub, "-");
binary!(Mul, mul, "*");
binary!(Div, div, "/");

impl Neg for KVal {
    type Output = KVal;
    fn neg(self) -> KVal {
        val(format!("-c{}", self.0))
    }
}

impl KVal {
    /// `f(self)` in double, or the f32 helper `h`.
    fn libm(self, double: &str, h: Helper) -> KVal {
        if is_double() {
            val(format!("{double}(c{})", self.0))
        } else {
            call(h, self)
        }
    }

    /// f32 `sin`/`cos` as `Compute for f32` has them: beyond
    /// [`math::SIN_COS_LIMIT`] through double.
    fn sin_cos(self, double: &str, h: Helper) -> KVal {
        if is_double() {
            return val(format!("{double}(c{})", self.0));
        }
        let big = format!("{} > {}", abs_expr(self), c_math::literal(math::SIN_COS_LIMIT));
        need(h);
        val(format!("({big}) ? (float){double}((double)c{0}) : {1}(c{0})", self.0, h.name()))
    }
}

impl Compute for KVal {
    fn of(v: f64) -> KVal {
        if is_double() {
            val(literal64(v))
        } else {
            val(c_math::literal(v as f32))
        }
    }
    fn sqrt(self) -> KVal {
        val(format!("{}(c{})", if is_double() { "sqrt" } else { "sqrtf" }, self.0))
    }
    fn abs(self) -> KVal {
        val(abs_expr(self))
    }
    fn pow(self, e: KVal) -> KVal {
        val(format!("{}(c{}, c{})", if is_double() { "pow" } else { "powf" }, self.0, e.0))
    }
    fn exp(self) -> KVal {
        self.libm("exp", Helper::Exp)
    }
    fn log(self) -> KVal {
        self.libm("log", Helper::Log)
    }
    fn sin(self) -> KVal {
        self.sin_cos("sin", Helper::Sin)
    }
    fn cos(self) -> KVal {
        self.sin_cos("cos", Helper::Cos)
    }
    fn tanh(self) -> KVal {
        self.libm("tanh", Helper::Tanh)
    }
    fn sigmoid(self) -> KVal {
        if is_double() {
            // As `Compute for f64`: 1 / (1 + e^-x).
            let one = KVal::of(1.0);
            one / (KVal::of(1.0) + (-self).exp())
        } else {
            call(Helper::Sigmoid, self)
        }
    }
    fn silu(self) -> KVal {
        if is_double() {
            // As `Compute for f64`: x / (1 + e^-x).
            self / (KVal::of(1.0) + (-self).exp())
        } else {
            call(Helper::Silu, self)
        }
    }
    fn gelu(self) -> KVal {
        if !is_double() {
            return call(Helper::Gelu, self);
        }
        // As `Compute for f64`: 0.5 x (1 + erf(x k)) for x >= 0, else
        // 0.5 x erfc(-x k); both sides are computed, then selected.
        let k = KVal::of(std::f64::consts::FRAC_1_SQRT_2);
        let half = KVal::of(0.5);
        let erf = val(format!("erf(c{})", (self * k).0));
        let pos = half * self * (KVal::of(1.0) + erf);
        let erfc = val(format!("erfc(c{})", ((-self) * k).0));
        let neg = half * self * erfc;
        val(format!("c{0} >= 0.0 ? c{1} : c{2}", self.0, pos.0, neg.0))
    }
    fn max_nan(self, o: KVal) -> KVal {
        val(format!("(c{0} != c{0} || c{0} >= c{1}) ? c{0} : c{1}", self.0, o.0))
    }
    fn min_nan(self, o: KVal) -> KVal {
        val(format!("(c{0} != c{0} || c{0} <= c{1}) ? c{0} : c{1}", self.0, o.0))
    }
    fn relu(self) -> KVal {
        let zero = if is_double() { "0.0" } else { "0.0f" };
        val(format!("c{0} <= {zero} ? {zero} : c{0}", self.0))
    }
}

/// Applies the op it is handed to two recorded values.
struct Apply(KVal, KVal);

impl OpVisitor<KVal> for Apply {
    type Out = KVal;
    fn visit<F: Fn(KVal, KVal) -> KVal + Copy + Send + Sync>(self, f: F) -> KVal {
        f(self.0, self.1)
    }
}

/// A rendered body: its statements (loads excluded: the loaded inputs are
/// the variables `c0 .. c{inputs - 1}`), the variable it stores, and the
/// helpers it calls.
pub(super) struct Body {
    pub lines: Vec<String>,
    pub out: u32,
    pub helpers: Vec<Helper>,
}

/// Records `k`'s body for `dtype`; scalar arguments are literals or
/// `p.scalars[slot]`.
pub(super) fn render_body(k: &Kernel, dtype: KernelDType, slots: &ScalarSlots) -> Result<Body, RenderError> {
    let inputs = k.num_inputs();
    let double = dtype == KernelDType::F64;
    CTX.with(|c| *c.borrow_mut() = Ctx { lines: vec![], next: inputs as u32, double, helpers: vec![] });
    let result = record(k, dtype, slots);
    let ctx = CTX.with(|c| std::mem::take(&mut *c.borrow_mut()));
    let out = result?;
    Ok(Body { lines: ctx.lines, out: out.0, helpers: ctx.helpers })
}

fn record(k: &Kernel, dtype: KernelDType, slots: &ScalarSlots) -> Result<KVal, RenderError> {
    let fail = |node: usize, msg: String| RenderError::Body { kernel: k.name.clone(), node, msg };
    let mut vals: Vec<Option<KVal>> = vec![None; k.num_values];
    let num_inputs = k.num_inputs();
    for (i, n) in k.body.iter().enumerate() {
        let slot = |v: ValueId| vals.get(v.index()).copied().flatten().ok_or_else(|| fail(i, format!("{v} is not defined")));
        let value = match &n.op {
            Op::Load(j) if *j < num_inputs => KVal(*j as u32),
            Op::Dsl { op, check_alias: None } if crate::kernel::is_elementwise(*op) => {
                let mut args = Vec::with_capacity(2);
                for a in &n.args {
                    args.push(match a {
                        Arg::Tensor(v) => slot(*v)?,
                        Arg::Scalar(e) => {
                            scalar(e, slots).ok_or_else(|| fail(i, format!("`{}`: scalar {e:?} has no value or slot", op.name())))?
                        }
                        other => return Err(fail(i, format!("`{}`: unexpected argument {other:?}", op.name()))),
                    });
                }
                let (a, b) = match args[..] {
                    [a] => (a, a),
                    [a, b] => (a, b),
                    _ => return Err(fail(i, format!("`{}` with {} arguments", op.name(), args.len()))),
                };
                let r = elementwise::with_op(*op, Apply(a, b)).ok_or_else(|| fail(i, format!("`{}` is not elementwise", op.name())))?;
                round(r, dtype)
            }
            other => return Err(fail(i, format!("`{}` in a kernel body", other.name()))),
        };
        let out = n.out.ok_or_else(|| fail(i, "no result".into()))?;
        *vals.get_mut(out.index()).ok_or_else(|| fail(i, format!("{out} is beyond the body's values")))? = Some(value);
    }
    vals.get(k.out.index()).copied().flatten().ok_or_else(|| fail(k.body.len(), format!("the stored {} is not defined", k.out)))
}

/// A scalar operand: a literal rounded to the compute type (`C::of`), or
/// its parameter slot converted to it.
fn scalar(e: &crate::types::ScalarExpr, slots: &ScalarSlots) -> Option<KVal> {
    if let Some(v) = e.as_const() {
        return Some(KVal::of(super::scalar_f64(v)));
    }
    let s = slots.slot(e)?;
    Some(if is_double() { val(format!("p.scalars[{s}]")) } else { val(format!("(float)p.scalars[{s}]")) })
}

/// f16/bf16 round every op's result to the half type, as eager does.
fn round(v: KVal, dtype: KernelDType) -> KVal {
    match dtype {
        KernelDType::F16 => val(format!("__half2float(__float2half_rn(c{}))", v.0)),
        KernelDType::BF16 => val(format!("__bfloat162float(__float2bfloat16_rn(c{}))", v.0)),
        KernelDType::F32 | KernelDType::F64 => v,
    }
}
