//! A kernel body as C statements: [`KVal`] implements
//! [`elementwise::Compute`] by recording each operation as one statement
//! over the compute type (`float` or `double`), so each op's C comes from
//! its one definition in [`elementwise::with_op`].

use super::super::c_math::{self, CVal};
use super::super::elementwise::{self, comparison_c_op, BoolOp, Compute, IntOp, OpVisitor};
use super::super::math;
use super::{DType, KernelTypes, RenderError, ScalarSlots};
use crate::graph::Op;
use crate::kernel::Kernel;
use crate::op::OpKind;
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
    Log1p,
    Expm1,
    Tanh,
    Sigmoid,
    Silu,
    Gelu,
    Sin,
    Cos,
    /// `double` to `long long` as Rust's `as` (eager's cast): truncation,
    /// saturating, NaN to 0 (C leaves the out-of-range cases undefined).
    F64ToI64,
    /// `double` to `float` rounded to odd: a float that then rounds to a
    /// half type (fewer than 23 bits) gives the double's single rounding.
    F64ToF32Odd,
    /// PyTorch's integer `pow` ([`elementwise::INT_POW_C`]).
    IntPow,
}

impl Helper {
    pub(super) fn name(self) -> &'static str {
        match self {
            Helper::Exp => "aot_exp",
            Helper::Log => "aot_log",
            Helper::Log1p => "aot_log1p",
            Helper::Expm1 => "aot_expm1",
            Helper::Tanh => "aot_tanh",
            Helper::Sigmoid => "aot_sigmoid",
            Helper::Silu => "aot_silu",
            Helper::Gelu => "aot_gelu",
            Helper::Sin => "aot_sin",
            Helper::Cos => "aot_cos",
            Helper::F64ToI64 => "aot_f64_to_i64",
            Helper::F64ToF32Odd => "aot_f64_to_f32_odd",
            Helper::IntPow => "aot_int_pow",
        }
    }

    /// The C function, from the one definition in [`math`] (the
    /// conversions are written here).
    pub(super) fn render(self) -> String {
        let f: fn(CVal) -> CVal = match self {
            Helper::IntPow => return elementwise::INT_POW_C.into(),
            Helper::F64ToI64 => {
                return "static __device__ __forceinline__ long long aot_f64_to_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0) return 0x7fffffffffffffffLL;
    if (x < -9223372036854775808.0) return -0x7fffffffffffffffLL - 1;
    return (long long)x;
}
"
                .into()
            }
            Helper::F64ToF32Odd => {
                return "static __device__ __forceinline__ float aot_f64_to_f32_odd(double x) {
    float f = (float)x;
    if ((double)f != x && x == x) {
        unsigned u = __float_as_uint(f);
        /* Rounded away from zero: step back; then make the last bit odd. */
        if (fabs((double)f) > fabs(x)) u -= 1u;
        f = __uint_as_float(u | 1u);
    }
    return f;
}
"
                .into()
            }
            Helper::Exp => math::exp,
            Helper::Log => math::log,
            Helper::Log1p => math::log1p,
            Helper::Expm1 => math::expm1,
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

/// Appends `const <ty> cN = <expr>;`.
fn typed(ty: &str, expr: String) -> KVal {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        let n = c.next;
        c.next += 1;
        c.lines.push(format!("    const {ty} c{n} = {expr};"));
        KVal(n)
    })
}

/// Sets the float type the recorded float ops compute in.
fn set_double(double: bool) {
    CTX.with(|c| c.borrow_mut().double = double);
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
pub(super) fn literal64(v: f64) -> String {
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
    fn log1p(self) -> KVal {
        self.libm("log1p", Helper::Log1p)
    }
    fn expm1(self) -> KVal {
        self.libm("expm1", Helper::Expm1)
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
    /// The variables of the kernel's further stored values
    /// ([`Kernel::extra_outs`]).
    pub extra: Vec<u32>,
    pub helpers: Vec<Helper>,
}

/// Records `k`'s body for its values' `types`; scalar arguments are
/// literals or `p.scalars[slot]`.
pub(super) fn render_body(k: &Kernel, types: &KernelTypes, slots: &ScalarSlots) -> Result<Body, RenderError> {
    let outs: Vec<ValueId> = k.outs().collect();
    render_outs(k, types, slots, &|_| true, None, &outs)
}

/// Records the body nodes `include` selects (the loads are always the
/// variables `c0 ..`), storing `out`. `preset`: a value defined outside
/// the part (a reduction's result), which is the variable `c{inputs}`.
pub(super) fn render_part(
    k: &Kernel,
    types: &KernelTypes,
    slots: &ScalarSlots,
    include: &dyn Fn(usize) -> bool,
    preset: Option<ValueId>,
    out: ValueId,
) -> Result<Body, RenderError> {
    render_outs(k, types, slots, include, preset, &[out])
}

/// [`render_part`] storing `outs` (the first is [`Body::out`]).
fn render_outs(
    k: &Kernel,
    types: &KernelTypes,
    slots: &ScalarSlots,
    include: &dyn Fn(usize) -> bool,
    preset: Option<ValueId>,
    outs: &[ValueId],
) -> Result<Body, RenderError> {
    let inputs = k.num_inputs() as u32;
    let next = inputs + u32::from(preset.is_some());
    CTX.with(|c| *c.borrow_mut() = Ctx { lines: vec![], next, double: false, helpers: vec![] });
    let result = record(k, types, slots, include, preset.map(|v| (v, KVal(inputs))), outs);
    let ctx = CTX.with(|c| std::mem::take(&mut *c.borrow_mut()));
    let vals = result?;
    let out = vals.first().map_or(0, |v| v.0);
    Ok(Body { lines: ctx.lines, out, extra: vals.iter().skip(1).map(|v| v.0).collect(), helpers: ctx.helpers })
}

/// `static __device__ __forceinline__ <to> <name>(const <from> c0)`: `c0`
/// (a value of dtype `from`, in its compute type) cast as eager casts to
/// `to` (in `to`'s compute type); the helpers it calls.
pub(super) fn convert_fn(name: &str, from: DType, to: DType) -> (String, Vec<Helper>) {
    CTX.with(|c| *c.borrow_mut() = Ctx { lines: vec![], next: 1, double: false, helpers: vec![] });
    let v = convert(KVal(0), from, to);
    let ctx = CTX.with(|c| std::mem::take(&mut *c.borrow_mut()));
    let mut s = format!("static __device__ __forceinline__ {} {name}(const {} c0) {{\n", to.compute(), from.compute());
    for l in &ctx.lines {
        s.push_str(l);
        s.push('\n');
    }
    s.push_str(&format!("    return c{};\n}}\n", v.0));
    (s, ctx.helpers)
}

fn record(
    k: &Kernel,
    types: &KernelTypes,
    slots: &ScalarSlots,
    include: &dyn Fn(usize) -> bool,
    preset: Option<(ValueId, KVal)>,
    stored: &[ValueId],
) -> Result<Vec<KVal>, RenderError> {
    let fail = |node: usize, msg: String| RenderError::Body { kernel: k.name.clone(), node, msg };
    let mut vals: Vec<Option<KVal>> = vec![None; k.num_values];
    if let Some((v, x)) = preset {
        *vals.get_mut(v.index()).ok_or_else(|| fail(0, format!("{v} is beyond the body's values")))? = Some(x);
    }
    let num_inputs = k.num_inputs();
    for (i, n) in k.body.iter().enumerate() {
        if !matches!(n.op, Op::Load(_)) && !include(i) {
            continue;
        }
        let out = n.out.ok_or_else(|| fail(i, "no result".into()))?;
        let c = *types.compute.get(out.index()).ok_or_else(|| fail(i, format!("{out} is beyond the body's values")))?;
        // A tensor argument converted to the compute dtype, as eager casts it.
        let tensor = |v: ValueId| -> Result<KVal, RenderError> {
            let x = vals.get(v.index()).copied().flatten().ok_or_else(|| fail(i, format!("{v} is not defined")))?;
            Ok(convert(x, types.values[v.index()], c))
        };
        let value = match &n.op {
            Op::Load(j) if *j < num_inputs => KVal(*j as u32),
            Op::Prim(p) if crate::kernel::is_elementwise_prim(p) => tensor(arg_tensor(n, 0).ok_or_else(|| fail(i, "no operand".into()))?)?,
            Op::Dsl { op, check_alias: None } if crate::kernel::is_elementwise(*op) => {
                let name = op.name();
                let mut args = Vec::with_capacity(3);
                for (j, a) in n.args.iter().enumerate() {
                    args.push(match a {
                        // `where_`'s condition stays bool.
                        Arg::Tensor(v) if *op == OpKind::Where && j == 1 => {
                            Operand::Value(vals.get(v.index()).copied().flatten().ok_or_else(|| fail(i, format!("{v} is not defined")))?)
                        }
                        Arg::Tensor(v) => Operand::Value(tensor(*v)?),
                        Arg::Scalar(e) => Operand::Scalar {
                            literal: e.as_const().map(super::scalar_f64),
                            expr: scalar64(e, slots).ok_or_else(|| fail(i, format!("`{name}`: scalar {e:?} has no value or slot")))?,
                        },
                        Arg::DType(_) if *op == OpKind::ToDtype => continue,
                        other => return Err(fail(i, format!("`{name}`: unexpected argument {other:?}"))),
                    });
                }
                typed_op(*op, &args, c).map_err(|m| fail(i, format!("`{name}`: {m}")))?
            }
            other => return Err(fail(i, format!("`{}` in a kernel body", other.name()))),
        };
        *vals.get_mut(out.index()).ok_or_else(|| fail(i, format!("{out} is beyond the body's values")))? = Some(value);
    }
    let get =
        |v: &ValueId| vals.get(v.index()).copied().flatten().ok_or_else(|| fail(k.body.len(), format!("the stored {v} is not defined")));
    stored.iter().map(get).collect()
}

fn arg_tensor(n: &crate::graph::Node, i: usize) -> Option<ValueId> {
    n.args.get(i).and_then(Arg::as_tensor)
}

/// An operand of a body op: a value (already in the compute dtype), or a
/// scalar: its value if a literal, and a `double` C expression.
#[derive(Clone)]
enum Operand {
    Value(KVal),
    Scalar { literal: Option<f64>, expr: String },
}

/// One op in the compute dtype `c`, from its one definition.
fn typed_op(op: OpKind, args: &[Operand], c: DType) -> Result<KVal, String> {
    // A scalar as eager's comparisons, `where` and integer ops take it:
    // converted to the compute dtype itself.
    let exact = |o: &Operand| match o {
        Operand::Value(v) => *v,
        Operand::Scalar { expr, .. } => convert(typed("double", expr.clone()), DType::F64, c),
    };
    let operand = |k: usize| args.get(k).ok_or_else(|| format!("{} operands", args.len()));
    if op == OpKind::ToDtype {
        return Ok(exact(operand(0)?));
    }
    if op == OpKind::Where {
        let (x, cond, y) = (exact(operand(0)?), exact_bool(operand(1)?)?, exact(operand(2)?));
        return Ok(typed(c.compute(), format!("c{} ? c{} : c{}", cond.0, x.0, y.0)));
    }
    if let Some(c_op) = comparison_c_op(op) {
        let (a, b) = (exact(operand(0)?), exact(operand(1)?));
        return Ok(typed("bool", format!("c{} {} c{}", a.0, c_op, b.0)));
    }
    let b = args.get(1).unwrap_or(operand(0)?);
    match c {
        DType::I64 => {
            let k = IntOp::of(op).ok_or("not an integer op")?;
            if k == IntOp::Pow {
                need(Helper::IntPow);
            }
            let (a, b) = (exact(operand(0)?), exact(b));
            Ok(typed("long long", k.c_expr(&format!("c{}", a.0), &format!("c{}", b.0))))
        }
        DType::Bool => {
            let k = BoolOp::of(op).ok_or("not a bool op")?;
            let (a, b) = (exact(operand(0)?), exact(b));
            Ok(typed("bool", k.c_expr(&format!("c{}", a.0), &format!("c{}", b.0))))
        }
        _ => {
            set_double(c == DType::F64);
            // Float arithmetic takes a scalar in the compute type
            // (`Compute::of`): a literal inline, a slot converted.
            let float = |o: &Operand| match o {
                Operand::Value(v) => *v,
                Operand::Scalar { literal: Some(x), .. } => KVal::of(*x),
                Operand::Scalar { expr, .. } if c == DType::F64 => typed("double", expr.clone()),
                Operand::Scalar { expr, .. } => typed("float", format!("(float){expr}")),
            };
            let r = elementwise::with_op(op, Apply(float(operand(0)?), float(b))).ok_or("not elementwise")?;
            Ok(round(r, c))
        }
    }
}

fn exact_bool(o: &Operand) -> Result<KVal, String> {
    match o {
        Operand::Value(v) => Ok(*v),
        Operand::Scalar { .. } => Err("a scalar condition".into()),
    }
}

/// A scalar operand as a `double` expression: a literal, or its slot.
pub(super) fn scalar64(e: &crate::types::ScalarExpr, slots: &ScalarSlots) -> Option<String> {
    if let Some(v) = e.as_const() {
        return Some(literal64(super::scalar_f64(v)));
    }
    Some(format!("p.scalars[{}]", slots.slot(e)?))
}

/// `x` (a value of dtype `from`, in its compute type) cast to `to` as eager
/// casts, in `to`'s compute type: f16/bf16 round from a float directly and
/// from a double (or an integer, through double as eager) with a single
/// rounding (through float rounded to odd); to i64 truncates and
/// saturates; to bool is `!= 0`; from bool is 0 or 1.
fn convert(x: KVal, from: DType, to: DType) -> KVal {
    use DType as D;
    let float_repr = |d: D| matches!(d, D::F32 | D::F16 | D::BF16);
    if from == to || (to == D::F32 && float_repr(from)) {
        return x;
    }
    let v = format!("c{}", x.0);
    let expr = match (from, to) {
        (D::Bool, D::F64) => format!("{v} ? 1.0 : 0.0"),
        (D::Bool, D::I64) => format!("{v} ? 1LL : 0LL"),
        (D::Bool, _) => format!("{v} ? 1.0f : 0.0f"),
        (_, D::Bool) => format!("{v} != 0"),
        (_, D::F32) => format!("(float){v}"),
        (_, D::F64) => format!("(double){v}"),
        (_, D::I64) => {
            need(Helper::F64ToI64);
            format!("aot_f64_to_i64((double){v})")
        }
        (f, D::F16 | D::BF16) => {
            let from_float = if float_repr(f) {
                v
            } else {
                need(Helper::F64ToF32Odd);
                format!("aot_f64_to_f32_odd((double){v})")
            };
            return round(typed("float", from_float), to);
        }
    };
    typed(to.compute(), expr)
}

/// f16/bf16 round every op's result to the half type, as eager does.
fn round(v: KVal, dtype: DType) -> KVal {
    match dtype {
        DType::F16 => typed("float", format!("__half2float(__float2half_rn(c{}))", v.0)),
        DType::BF16 => typed("float", format!("__bfloat162float(__float2bfloat16_rn(c{}))", v.0)),
        _ => v,
    }
}
