//! The ops kernels compute exactly, defined once for the CPU evaluator and
//! the C renderer: comparisons, integer (i64) arithmetic and bool
//! arithmetic, each with its Rust evaluation and its C expression.

use crate::op::OpKind;

/// `a <op> b` for a comparison op ([`OpKind::is_comparison`]): IEEE
/// semantics on floats (NaN is unequal to everything, and neither less nor
/// greater), `false < true` on bools. `None` for any other op.
#[inline(always)]
pub fn compare<T: PartialOrd>(op: OpKind, a: T, b: T) -> Option<bool> {
    Some(match op {
        OpKind::Eq => a == b,
        OpKind::Ne => a != b,
        OpKind::Lt => a < b,
        OpKind::Le => a <= b,
        OpKind::Gt => a > b,
        OpKind::Ge => a >= b,
        _ => return None,
    })
}

/// The C operator of a comparison op (the same semantics on `float`,
/// `double`, `long long` and `bool`); `None` for any other op.
pub fn comparison_c_op(op: OpKind) -> Option<&'static str> {
    Some(match op {
        OpKind::Eq => "==",
        OpKind::Ne => "!=",
        OpKind::Lt => "<",
        OpKind::Le => "<=",
        OpKind::Gt => ">",
        OpKind::Ge => ">=",
        _ => return None,
    })
}

/// Integer (i64) arithmetic a kernel computes exactly: eager's integer
/// kernels, wrapping on overflow. (Integer `div` and the float functions
/// promote to f32, as eager does.) `Pow` is PyTorch's integer power; eager
/// refuses a negative scalar exponent before any kernel runs, so kernels
/// of compiled calls take only tensor exponents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// The larger of `a` and `b`.
    Maximum,
    /// The smaller of `a` and `b`.
    Minimum,
    /// `-a`.
    Neg,
    /// `|a|`.
    Abs,
    /// `a * a`.
    Square,
    /// `a` where positive, else 0.
    Relu,
    /// `a` to the power `b` (see [`int_pow`]).
    Pow,
}

impl IntOp {
    /// The integer op `op` computes on i64 operands, if it keeps them i64.
    pub fn of(op: OpKind) -> Option<IntOp> {
        Some(match op {
            OpKind::Add => IntOp::Add,
            OpKind::Sub => IntOp::Sub,
            OpKind::Mul => IntOp::Mul,
            OpKind::Maximum => IntOp::Maximum,
            OpKind::Minimum => IntOp::Minimum,
            OpKind::Neg => IntOp::Neg,
            OpKind::Abs => IntOp::Abs,
            OpKind::Square => IntOp::Square,
            OpKind::Relu => IntOp::Relu,
            OpKind::Pow => IntOp::Pow,
            _ => return None,
        })
    }

    /// Whether the op reads a second operand.
    pub fn is_binary(self) -> bool {
        matches!(self, IntOp::Add | IntOp::Sub | IntOp::Mul | IntOp::Maximum | IntOp::Minimum | IntOp::Pow)
    }

    /// The op at one position (`b` ignored by unary ops).
    #[inline(always)]
    pub fn eval(self, a: i64, b: i64) -> i64 {
        match self {
            IntOp::Add => a.wrapping_add(b),
            IntOp::Sub => a.wrapping_sub(b),
            IntOp::Mul => a.wrapping_mul(b),
            IntOp::Maximum => a.max(b),
            IntOp::Minimum => a.min(b),
            IntOp::Neg => a.wrapping_neg(),
            IntOp::Abs => a.wrapping_abs(),
            IntOp::Square => a.wrapping_mul(a),
            IntOp::Relu => a.max(0),
            IntOp::Pow => int_pow(a, b),
        }
    }

    /// The op as a C expression of the `long long` expressions `a` and
    /// `b`. Wrapping arithmetic goes through `unsigned long long`, where
    /// C defines it (signed overflow is undefined).
    pub fn c_expr(self, a: &str, b: &str) -> String {
        let u = |x: &str| format!("(unsigned long long)({x})");
        match self {
            IntOp::Add => format!("(long long)({} + {})", u(a), u(b)),
            IntOp::Sub => format!("(long long)({} - {})", u(a), u(b)),
            IntOp::Mul => format!("(long long)({} * {})", u(a), u(b)),
            IntOp::Maximum => format!("({a} >= {b} ? {a} : {b})"),
            IntOp::Minimum => format!("({a} <= {b} ? {a} : {b})"),
            IntOp::Neg => format!("(long long)(0ULL - {})", u(a)),
            IntOp::Abs => format!("({a} < 0 ? (long long)(0ULL - {}) : {a})", u(a)),
            IntOp::Square => format!("(long long)({} * {})", u(a), u(a)),
            IntOp::Relu => format!("({a} > 0 ? {a} : 0LL)"),
            // a loop: the renderer adds the function (`INT_POW_C`)
            IntOp::Pow => format!("aot_int_pow({a}, {b})"),
        }
    }
}

/// PyTorch's integer `pow`: a negative exponent gives `1` for base 1, `+-1`
/// for base -1 and 0 otherwise (base 0 included); an overflowing power
/// wraps (square-and-multiply, as [`INT_POW_C`]).
#[inline(always)]
pub fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 if exp % 2 != 0 => -1,
            -1 => 1,
            _ => 0,
        };
    }
    let (mut acc, mut b, mut e) = (1i64, base, exp);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    acc
}

/// [`int_pow`] in C, wrapping through `unsigned long long`.
pub const INT_POW_C: &str = "static __device__ __forceinline__ long long aot_int_pow(long long base, long long exp) {
    if (exp < 0) return base == 1 ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
    unsigned long long acc = 1ULL, b = (unsigned long long)base;
    while (exp > 0) {
        if (exp & 1) acc *= b;
        b *= b;
        exp >>= 1;
    }
    return (long long)acc;
}
";

/// Bool arithmetic: eager computes `add`/`maximum` of bools as or and
/// `mul`/`minimum` as and (the rest of arithmetic is an error on bools).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    /// `a | b` (`add`, `maximum`).
    Or,
    /// `a & b` (`mul`, `minimum`).
    And,
}

impl BoolOp {
    /// The bool op `op` computes on bool operands, if it is one.
    pub fn of(op: OpKind) -> Option<BoolOp> {
        match op {
            OpKind::Add | OpKind::Maximum => Some(BoolOp::Or),
            OpKind::Mul | OpKind::Minimum => Some(BoolOp::And),
            _ => None,
        }
    }

    /// The op on two bools.
    #[inline(always)]
    pub fn eval(self, a: bool, b: bool) -> bool {
        match self {
            BoolOp::Or => a | b,
            BoolOp::And => a & b,
        }
    }

    /// The op as a C expression of the `bool` expressions `a` and `b`.
    pub fn c_expr(self, a: &str, b: &str) -> String {
        match self {
            BoolOp::Or => format!("({a} || {b})"),
            BoolOp::And => format!("({a} && {b})"),
        }
    }
}
