//! Elementwise kernels: unary and binary math, `where`, `clamp`, casts,
//! strided copies and fills. Every kernel reads its inputs through their
//! layouts and writes a new contiguous buffer (except `copy_strided` and
//! `fill`, which write into an existing one).

use super::elem::{float_or, max_nan, min_nan, torch_type_name, Elem, Float, FloatElem};
use super::strided::{check_layout, check_same_shape, for_each_pair, map1, map1_into, map2, map3, Plan};
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::{CpuElem, CpuStorage};

/// A unary elementwise op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Abs,
    Sin,
    Cos,
    Tanh,
    Sigmoid,
    Relu,
    Gelu,
    Silu,
    Reciprocal,
    Square,
}

impl UnaryOp {
    /// PyTorch's name of the op.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Silu => "silu",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Square => "square",
        }
    }
}

/// A binary elementwise op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The arithmetic half of [`BinaryOp`].
#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
}

/// The comparison half of [`BinaryOp`].
#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

enum Kind {
    Arith(Arith),
    Cmp(Cmp),
}

impl BinaryOp {
    /// PyTorch's name of the op.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }

    /// True for the ops whose result is Bool.
    pub fn is_comparison(self) -> bool {
        matches!(self.kind(), Kind::Cmp(_))
    }

    fn kind(self) -> Kind {
        match self {
            BinaryOp::Add => Kind::Arith(Arith::Add),
            BinaryOp::Sub => Kind::Arith(Arith::Sub),
            BinaryOp::Mul => Kind::Arith(Arith::Mul),
            BinaryOp::Div => Kind::Arith(Arith::Div),
            BinaryOp::Pow => Kind::Arith(Arith::Pow),
            BinaryOp::Maximum => Kind::Arith(Arith::Maximum),
            BinaryOp::Minimum => Kind::Arith(Arith::Minimum),
            BinaryOp::Eq => Kind::Cmp(Cmp::Eq),
            BinaryOp::Ne => Kind::Cmp(Cmp::Ne),
            BinaryOp::Lt => Kind::Cmp(Cmp::Lt),
            BinaryOp::Le => Kind::Cmp(Cmp::Le),
            BinaryOp::Gt => Kind::Cmp(Cmp::Gt),
            BinaryOp::Ge => Kind::Cmp(Cmp::Ge),
        }
    }
}

/// PyTorch's error for a kernel that has no implementation for a dtype.
fn not_implemented(op: &'static str, dtype: DType) -> AotError {
    AotError::dtype(op, format!("\"{op}\" not implemented for '{}'", torch_type_name(dtype)))
}

/// The buffer of `s` as a slice of `T`, or a dtype error.
fn typed<'a, T: CpuElem>(op: &'static str, s: &'a CpuStorage) -> Result<&'a [T]> {
    T::slice(s).ok_or_else(|| {
        AotError::dtype(op, format!("expected both operands to have dtype {}, but got {}", T::DTYPE, s.dtype()))
    })
}

// ---------------------------------------------------------------- unary

/// Applies a unary op to the elements of `layout` in `src`; the output is a
/// new contiguous buffer of `layout.shape` with the dtype of `src`.
/// Floating dtypes only, except `Neg`/`Abs`/`Square`/`Relu`, which also take
/// I64. f16/bf16 compute in f32 and round once.
pub fn unary(op: UnaryOp, src: &CpuStorage, layout: &Layout) -> Result<CpuStorage> {
    let name = op.name();
    check_layout(name, layout, src.len())?;
    float_or!(src, v => Ok(unary_float(op, v, layout)), other => match other {
        CpuStorage::I64(v) => unary_i64(op, v, layout),
        _ => Err(not_implemented(name, other.dtype())),
    })
}

fn unary_float<T: FloatElem>(op: UnaryOp, v: &[T], l: &Layout) -> CpuStorage {
    fn go<T: FloatElem>(v: &[T], l: &Layout, f: impl Fn(T::C) -> T::C + Sync) -> CpuStorage {
        T::into_storage(map1(v, l, |x| T::from_c(f(x.to_c()))))
    }
    let zero = T::C::of(0.0);
    let one = T::C::of(1.0);
    let half = T::C::of(0.5);
    let frac_1_sqrt_2 = T::C::of(std::f64::consts::FRAC_1_SQRT_2);
    match op {
        UnaryOp::Neg => go(v, l, |x| -x),
        UnaryOp::Exp => go(v, l, |x| x.exp()),
        UnaryOp::Log => go(v, l, |x| x.ln()),
        UnaryOp::Sqrt => go(v, l, |x| x.sqrt()),
        UnaryOp::Rsqrt => go(v, l, |x| one / x.sqrt()),
        UnaryOp::Abs => go(v, l, |x| x.abs()),
        UnaryOp::Sin => go(v, l, |x| x.sin()),
        UnaryOp::Cos => go(v, l, |x| x.cos()),
        UnaryOp::Tanh => go(v, l, |x| x.tanh()),
        UnaryOp::Sigmoid => go(v, l, |x| one / (one + (-x).exp())),
        // NaN <= 0 is false, so NaN propagates.
        UnaryOp::Relu => go(v, l, |x| if x <= zero { zero } else { x }),
        // 0.5 x (1 + erf(x/sqrt 2)) = 0.5 x erfc(-x/sqrt 2), without the
        // cancellation of 1 + erf for negative x.
        UnaryOp::Gelu => go(v, l, |x| half * x * (-x * frac_1_sqrt_2).erfc()),
        UnaryOp::Silu => go(v, l, |x| x / (one + (-x).exp())),
        UnaryOp::Reciprocal => go(v, l, |x| one / x),
        UnaryOp::Square => go(v, l, |x| x * x),
    }
}

fn unary_i64(op: UnaryOp, v: &[i64], l: &Layout) -> Result<CpuStorage> {
    let out = match op {
        UnaryOp::Neg => map1(v, l, i64::wrapping_neg),
        UnaryOp::Abs => map1(v, l, i64::wrapping_abs),
        UnaryOp::Square => map1(v, l, |x| x.wrapping_mul(x)),
        UnaryOp::Relu => map1(v, l, |x| x.max(0)),
        _ => return Err(not_implemented(op.name(), DType::I64)),
    };
    Ok(CpuStorage::I64(out))
}

// ---------------------------------------------------------------- binary

/// The second operand of a binary kernel: a tensor, or a scalar already in
/// the compute type (`first`: the scalar is the left operand).
#[derive(Clone, Copy)]
enum Rhs<'a, T, S> {
    Tensor(&'a [T], &'a Layout),
    Scalar { s: S, first: bool },
}

/// `f(conv(a), conv(b))` elementwise, with `b` a tensor or a scalar.
fn apply<T, S, U>(a: &[T], la: &Layout, rhs: Rhs<'_, T, S>, conv: impl Fn(T) -> S + Sync, f: impl Fn(S, S) -> U + Sync) -> Vec<U>
where
    T: Copy + Sync,
    S: Copy + Sync,
    U: Copy + Default + Send,
{
    match rhs {
        Rhs::Tensor(b, lb) => map2(a, la, b, lb, |x, y| f(conv(x), conv(y))),
        Rhs::Scalar { s, first: false } => map1(a, la, |x| f(conv(x), s)),
        Rhs::Scalar { s, first: true } => map1(a, la, |x| f(s, conv(x))),
    }
}

/// A comparison of `a` and `rhs` in the compute type `S`.
fn compare<T, S>(c: Cmp, a: &[T], la: &Layout, rhs: Rhs<'_, T, S>, conv: impl Fn(T) -> S + Sync) -> CpuStorage
where
    T: Copy + Sync,
    S: Copy + Sync + PartialOrd,
{
    CpuStorage::Bool(match c {
        Cmp::Eq => apply(a, la, rhs, conv, |x, y| x == y),
        Cmp::Ne => apply(a, la, rhs, conv, |x, y| x != y),
        Cmp::Lt => apply(a, la, rhs, conv, |x, y| x < y),
        Cmp::Le => apply(a, la, rhs, conv, |x, y| x <= y),
        Cmp::Gt => apply(a, la, rhs, conv, |x, y| x > y),
        Cmp::Ge => apply(a, la, rhs, conv, |x, y| x >= y),
    })
}

fn binary_float<T: FloatElem>(op: BinaryOp, a: &[T], la: &Layout, rhs: Rhs<'_, T, T::C>) -> CpuStorage {
    fn ar<T: FloatElem>(a: &[T], la: &Layout, rhs: Rhs<'_, T, T::C>, f: impl Fn(T::C, T::C) -> T::C + Sync) -> CpuStorage {
        T::into_storage(apply(a, la, rhs, T::to_c, |x, y| T::from_c(f(x, y))))
    }
    match op.kind() {
        Kind::Cmp(c) => compare(c, a, la, rhs, T::to_c),
        Kind::Arith(Arith::Add) => ar(a, la, rhs, |x, y| x + y),
        Kind::Arith(Arith::Sub) => ar(a, la, rhs, |x, y| x - y),
        Kind::Arith(Arith::Mul) => ar(a, la, rhs, |x, y| x * y),
        Kind::Arith(Arith::Div) => ar(a, la, rhs, |x, y| x / y),
        Kind::Arith(Arith::Pow) => ar(a, la, rhs, |x, y| x.powf(y)),
        Kind::Arith(Arith::Maximum) => ar(a, la, rhs, max_nan),
        Kind::Arith(Arith::Minimum) => ar(a, la, rhs, min_nan),
    }
}

fn binary_i64(op: BinaryOp, a: &[i64], la: &Layout, rhs: Rhs<'_, i64, i64>) -> Result<CpuStorage> {
    let id = |x: i64| x;
    let out = match op.kind() {
        Kind::Cmp(c) => return Ok(compare(c, a, la, rhs, id)),
        Kind::Arith(Arith::Add) => apply(a, la, rhs, id, i64::wrapping_add),
        Kind::Arith(Arith::Sub) => apply(a, la, rhs, id, i64::wrapping_sub),
        Kind::Arith(Arith::Mul) => apply(a, la, rhs, id, i64::wrapping_mul),
        Kind::Arith(Arith::Maximum) => apply(a, la, rhs, id, i64::max),
        Kind::Arith(Arith::Minimum) => apply(a, la, rhs, id, i64::min),
        Kind::Arith(Arith::Div | Arith::Pow) => {
            return Err(AotError::dtype(
                op.name(),
                format!("\"{}\" of int64 operands must be computed in a floating dtype (promote first)", op.name()),
            ))
        }
    };
    Ok(CpuStorage::I64(out))
}

fn binary_bool(op: BinaryOp, a: &[bool], la: &Layout, rhs: Rhs<'_, bool, bool>) -> Result<CpuStorage> {
    let id = |x: bool| x;
    let out = match op.kind() {
        Kind::Cmp(c) => return Ok(compare(c, a, la, rhs, id)),
        Kind::Arith(Arith::Add | Arith::Maximum) => apply(a, la, rhs, id, |x, y| x | y),
        Kind::Arith(Arith::Mul | Arith::Minimum) => apply(a, la, rhs, id, |x, y| x & y),
        Kind::Arith(Arith::Sub) => {
            return Err(AotError::dtype(
                "sub",
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.",
            ))
        }
        Kind::Arith(Arith::Div | Arith::Pow) => return Err(not_implemented(op.name(), DType::Bool)),
    };
    Ok(CpuStorage::Bool(out))
}

/// `a op b` elementwise. `la` and `lb` have one (broadcast) shape and the
/// storages one dtype. Arithmetic keeps the dtype, comparisons give Bool.
/// I64 has no Div/Pow (promote to float first); Bool has the comparisons,
/// Add/Maximum (or) and Mul/Minimum (and).
pub fn binary(op: BinaryOp, a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
    let name = op.name();
    if a.dtype() != b.dtype() {
        return Err(AotError::dtype(name, format!("expected both operands to have the same dtype, but got {} and {}", a.dtype(), b.dtype())));
    }
    check_same_shape(name, la, lb)?;
    check_layout(name, la, a.len())?;
    check_layout(name, lb, b.len())?;
    float_or!(a, va => Ok(binary_float(op, va, la, Rhs::Tensor(typed(name, b)?, lb))), other => match other {
        CpuStorage::I64(va) => binary_i64(op, va, la, Rhs::Tensor(typed(name, b)?, lb)),
        CpuStorage::Bool(va) => binary_bool(op, va, la, Rhs::Tensor(typed(name, b)?, lb)),
        _ => Err(AotError::internal(name, "unhandled dtype")),
    })
}

/// `a op s` (or `s op a` if `scalar_first`) with a scalar `s` that fits the
/// dtype of `a`. Arithmetic on f16/bf16/f32 uses `s` in f32 (PyTorch's
/// opmath), comparisons compare with `s` cast to the dtype of `a`.
pub fn binary_scalar(op: BinaryOp, a: &CpuStorage, la: &Layout, s: f64, scalar_first: bool) -> Result<CpuStorage> {
    fn float<T: FloatElem>(op: BinaryOp, a: &[T], la: &Layout, s: f64, first: bool) -> CpuStorage {
        let s = if op.is_comparison() { T::from_f64(s).to_c() } else { T::C::of(s) };
        binary_float(op, a, la, Rhs::Scalar { s, first })
    }
    let name = op.name();
    check_layout(name, la, a.len())?;
    float_or!(a, va => Ok(float(op, va, la, s, scalar_first)), other => match other {
        CpuStorage::I64(va) => binary_i64(op, va, la, Rhs::Scalar { s: s as i64, first: scalar_first }),
        CpuStorage::Bool(va) => binary_bool(op, va, la, Rhs::Scalar { s: s != 0.0, first: scalar_first }),
        _ => Err(AotError::internal(name, "unhandled dtype")),
    })
}

// ---------------------------------------------------------------- where, clamp

/// `torch.where(cond, a, b)`: `cond` is Bool, the three layouts share one
/// (broadcast) shape, `a` and `b` share one dtype.
pub fn where_cond(cond: &CpuStorage, lc: &Layout, a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
    const OP: &str = "where";
    let CpuStorage::Bool(c) = cond else {
        return Err(AotError::dtype(OP, format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", cond.dtype())));
    };
    if a.dtype() != b.dtype() {
        return Err(AotError::dtype(OP, format!("expected x and y to have the same dtype, but got {} and {}", a.dtype(), b.dtype())));
    }
    check_same_shape(OP, lc, la)?;
    check_same_shape(OP, lc, lb)?;
    check_layout(OP, lc, cond.len())?;
    check_layout(OP, la, a.len())?;
    check_layout(OP, lb, b.len())?;
    fn go<T: Elem>(c: &[bool], lc: &Layout, a: &[T], la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
        let b = typed::<T>(OP, b)?;
        Ok(T::into_storage(map3(c, lc, a, la, b, lb, |c, x, y| if c { x } else { y })))
    }
    crate::dispatch_cpu!(a, va => go(c, lc, va, la, b, lb))
}

fn clamp_lo<C: Float>(x: C, lo: C) -> C {
    if lo.is_nan() || x < lo {
        lo
    } else {
        x
    }
}

fn clamp_hi<C: Float>(x: C, hi: C) -> C {
    if hi.is_nan() || x > hi {
        hi
    } else {
        x
    }
}

/// `torch.clamp` with optional bounds, same dtype. NaN inputs and NaN
/// bounds give NaN; `min > max` gives `max`, as in PyTorch.
pub fn clamp(src: &CpuStorage, l: &Layout, min: Option<f64>, max: Option<f64>) -> Result<CpuStorage> {
    const OP: &str = "clamp";
    check_layout(OP, l, src.len())?;
    fn float<T: FloatElem>(v: &[T], l: &Layout, min: Option<f64>, max: Option<f64>) -> CpuStorage {
        let out = match (min.map(T::C::of), max.map(T::C::of)) {
            (Some(lo), Some(hi)) => map1(v, l, |x| T::from_c(clamp_hi(clamp_lo(x.to_c(), lo), hi))),
            (Some(lo), None) => map1(v, l, |x| T::from_c(clamp_lo(x.to_c(), lo))),
            (None, Some(hi)) => map1(v, l, |x| T::from_c(clamp_hi(x.to_c(), hi))),
            (None, None) => map1(v, l, |x| x),
        };
        T::into_storage(out)
    }
    float_or!(src, v => Ok(float(v, l, min, max)), other => match other {
        CpuStorage::I64(v) => {
            let lo = min.map_or(i64::MIN, |m| m as i64);
            let hi = max.map_or(i64::MAX, |m| m as i64);
            Ok(CpuStorage::I64(map1(v, l, |x| x.max(lo).min(hi))))
        }
        _ => Err(not_implemented(OP, other.dtype())),
    })
}

// ---------------------------------------------------------------- cast, copy, fill

/// The elements of `l` (row-major) as a new contiguous buffer of `dtype`:
/// float -> I64 truncates toward zero, anything -> Bool is `!= 0`,
/// Bool -> anything is 0/1. Same dtype is a contiguous copy.
pub fn cast(src: &CpuStorage, l: &Layout, dtype: DType) -> CpuStorage {
    fn go<T: Elem>(v: &[T], l: &Layout, dtype: DType) -> CpuStorage {
        if T::DTYPE == dtype {
            return T::into_storage(map1(v, l, |x| x));
        }
        match dtype {
            DType::F32 => CpuStorage::F32(map1(v, l, Elem::cast)),
            DType::F64 => CpuStorage::F64(map1(v, l, Elem::cast)),
            DType::F16 => CpuStorage::F16(map1(v, l, Elem::cast)),
            DType::BF16 => CpuStorage::BF16(map1(v, l, Elem::cast)),
            DType::I64 => CpuStorage::I64(map1(v, l, Elem::cast)),
            DType::Bool => CpuStorage::Bool(map1(v, l, Elem::cast)),
        }
    }
    crate::dispatch_cpu!(src, v => go(v, l, dtype))
}

/// Writes `f` of the elements of `s` (through `ls`) into the positions of
/// `ld` in `d`; both layouts have one shape.
fn copy_with<S: Copy + Sync, D: Copy + Send>(s: &[S], ls: &Layout, d: &mut [D], ld: &Layout, f: impl Fn(S) -> D + Sync) {
    let n = ld.numel();
    if n == 0 {
        return;
    }
    if ld.is_contiguous() {
        map1_into(&mut d[ld.offset..ld.offset + n], s, ls, f);
    } else {
        for_each_pair(&ld.shape, ld, ls, |di, si| d[di] = f(s[si]));
    }
}

/// Writes the elements of `src` (read through `ls`, row-major) into `dst` at
/// the positions of `ld` (row-major), casting if the dtypes differ. The
/// layouts must have the same number of elements; `src` and `dst` are
/// different buffers.
pub fn copy_strided(src: &CpuStorage, ls: &Layout, dst: &mut CpuStorage, ld: &Layout) -> Result<()> {
    const OP: &str = "copy_";
    if ls.numel() != ld.numel() {
        return Err(AotError::shape(OP, format!("cannot copy {} elements of shape {:?} into {} elements of shape {:?}", ls.numel(), ls.shape, ld.numel(), ld.shape)));
    }
    check_layout(OP, ls, src.len())?;
    check_layout(OP, ld, dst.len())?;
    if ls.shape != ld.shape {
        // Same count, other shape: read in row-major order first.
        let tmp = cast(src, ls, dst.dtype());
        return copy_strided(&tmp, &Layout::contiguous(&ld.shape), dst, ld);
    }
    fn same<T: Elem>(src: &CpuStorage, ls: &Layout, d: &mut [T], ld: &Layout) -> Result<()> {
        copy_with(typed::<T>(OP, src)?, ls, d, ld, |x| x);
        Ok(())
    }
    fn other<D: Elem>(src: &CpuStorage, ls: &Layout, d: &mut [D], ld: &Layout) {
        crate::dispatch_cpu!(src, s => copy_with(s, ls, d, ld, Elem::cast::<D>))
    }
    if src.dtype() == dst.dtype() {
        crate::dispatch_cpu!(dst, d => same(src, ls, d, ld))
    } else {
        crate::dispatch_cpu!(dst, d => other(src, ls, d, ld));
        Ok(())
    }
}

/// Sets the positions of `l` in `dst` to `v` converted to the dtype of `dst`.
pub fn fill(dst: &mut CpuStorage, l: &Layout, v: f64) {
    fn go<T: Elem>(d: &mut [T], l: &Layout, x: T) {
        let n = l.numel();
        if n == 0 {
            return;
        }
        if l.is_contiguous() {
            d[l.offset..l.offset + n].fill(x);
        } else {
            let plan = Plan::new(&l.shape, [l]);
            let [st] = plan.inner_stride();
            plan.for_each_run(0, n, |_, [s], len| {
                for j in 0..len {
                    d[s + j * st] = x;
                }
            });
        }
    }
    crate::dispatch_cpu!(dst, d => go(d, l, Elem::cast(v)))
}
