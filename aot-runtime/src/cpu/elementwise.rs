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
use num_traits::Float as _;

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
    T::slice(s).ok_or_else(|| AotError::dtype(op, format!("expected both operands to have dtype {}, but got {}", T::DTYPE, s.dtype())))
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
        // 0.5 x (1 + erf(x/sqrt 2)); for negative x as 0.5 x erfc(-x/sqrt 2),
        // which avoids the cancellation in 1 + erf.
        UnaryOp::Gelu => {
            go(v, l, |x| if x >= zero { half * x * (one + (x * frac_1_sqrt_2).erf()) } else { half * x * (-x * frac_1_sqrt_2).erfc() })
        }
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
    let out =
        match op.kind() {
            Kind::Cmp(c) => return Ok(compare(c, a, la, rhs, id)),
            Kind::Arith(Arith::Add | Arith::Maximum) => apply(a, la, rhs, id, |x, y| x | y),
            Kind::Arith(Arith::Mul | Arith::Minimum) => apply(a, la, rhs, id, |x, y| x & y),
            Kind::Arith(Arith::Sub) => return Err(AotError::dtype(
                "sub",
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.",
            )),
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
        return Err(AotError::dtype(
            name,
            format!("expected both operands to have the same dtype, but got {} and {}", a.dtype(), b.dtype()),
        ));
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
        return Err(AotError::dtype(
            OP,
            format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", cond.dtype()),
        ));
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
        return Err(AotError::shape(
            OP,
            format!("cannot copy {} elements of shape {:?} into {} elements of shape {:?}", ls.numel(), ls.shape, ld.numel(), ld.shape),
        ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::special::erf;
    use crate::cpu::testutil::{assert_close, layouts, logical, random_values, rounded, storage, tol, values};

    const UNARY: [UnaryOp; 15] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Abs,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Reciprocal,
        UnaryOp::Square,
    ];

    fn unary_ref(op: UnaryOp, x: f64) -> f64 {
        match op {
            UnaryOp::Neg => -x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
            UnaryOp::Silu => x / (1.0 + (-x).exp()),
            UnaryOp::Reciprocal => 1.0 / x,
            UnaryOp::Square => x * x,
        }
    }

    const ARITH: [BinaryOp; 7] =
        [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum];
    const CMP: [BinaryOp; 6] = [BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge];

    fn binary_ref(op: BinaryOp, x: f64, y: f64) -> f64 {
        let b = |c: bool| if c { 1.0 } else { 0.0 };
        match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Pow => x.powf(y),
            BinaryOp::Maximum => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.max(y)
                }
            }
            BinaryOp::Minimum => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.min(y)
                }
            }
            BinaryOp::Eq => b(x == y),
            BinaryOp::Ne => b(x != y),
            BinaryOp::Lt => b(x < y),
            BinaryOp::Le => b(x <= y),
            BinaryOp::Gt => b(x > y),
            BinaryOp::Ge => b(x >= y),
        }
    }

    #[test]
    fn unary_matches_reference_on_all_layouts_and_dtypes() {
        for shape in [vec![3usize, 5], vec![2, 3, 4], vec![300, 120]] {
            for (name, l) in layouts(&shape) {
                let data = random_values(l.storage_extent(), -3.0, 3.0, 7);
                for dtype in DType::FLOATS {
                    let src = storage(dtype, &data);
                    let input = logical(&values(&src), &l);
                    for op in UNARY {
                        let out = unary(op, &src, &l).unwrap();
                        assert_eq!(out.dtype(), dtype);
                        let want: Vec<f64> = input.iter().map(|&x| unary_ref(op, x)).collect();
                        assert_close(&values(&out), &rounded(dtype, &want), tol(dtype), &format!("{op:?} {dtype} {name} {shape:?}"));
                    }
                }
            }
        }
    }

    #[test]
    fn unary_special_values() {
        let l = Layout::contiguous(&[1]);
        let one = storage(DType::F64, &[1.0]);
        assert!((values(&unary(UnaryOp::Gelu, &one, &l).unwrap())[0] - 0.8413447460685429).abs() < 1e-15);
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let g = values(&unary(UnaryOp::Gelu, &storage(dtype, &[1.0]), &l).unwrap())[0];
            assert!((g - 0.8413447460685429).abs() < tol(dtype), "{dtype}: {g}");
        }
        let l3 = Layout::contiguous(&[4]);
        let s = storage(DType::F32, &[f64::NAN, -0.0, f64::NEG_INFINITY, -1000.0]);
        let relu = values(&unary(UnaryOp::Relu, &s, &l3).unwrap());
        assert!(relu[0].is_nan());
        assert_eq!(&relu[1..], &[0.0, 0.0, 0.0]);
        let sig = values(&unary(UnaryOp::Sigmoid, &s, &l3).unwrap());
        assert_eq!(&sig[2..], &[0.0, 0.0]);
        // gelu far in the negative tail keeps its (tiny) value
        let g = values(&unary(UnaryOp::Gelu, &storage(DType::F64, &[-10.0]), &l).unwrap())[0];
        assert!(g < 0.0 && (g - -7.619853024160527e-23).abs() < 1e-35, "{g}");
    }

    #[test]
    fn unary_int_and_bool() {
        let l = Layout::contiguous(&[2, 2]).t("t").unwrap();
        let s = CpuStorage::I64(vec![-3, 4, i64::MIN, 0]);
        assert_eq!(unary(UnaryOp::Neg, &s, &l).unwrap(), CpuStorage::I64(vec![3, i64::MIN, -4, 0]));
        assert_eq!(unary(UnaryOp::Abs, &s, &l).unwrap(), CpuStorage::I64(vec![3, i64::MIN, 4, 0]));
        assert_eq!(unary(UnaryOp::Relu, &s, &l).unwrap(), CpuStorage::I64(vec![0, 0, 4, 0]));
        assert_eq!(unary(UnaryOp::Square, &s, &Layout::contiguous(&[2])).unwrap(), CpuStorage::I64(vec![9, 16]));
        assert!(matches!(unary(UnaryOp::Exp, &s, &l), Err(AotError::DTypeMismatch { op: "exp", .. })));
        assert!(unary(UnaryOp::Neg, &CpuStorage::Bool(vec![true]), &Layout::contiguous(&[1])).is_err());
        assert!(unary(UnaryOp::Neg, &s, &Layout::contiguous(&[5])).is_err(), "layout past the buffer");
    }

    #[test]
    fn binary_matches_reference_on_all_layouts_and_dtypes() {
        for shape in [vec![4usize, 6], vec![2, 3, 5], vec![200, 300]] {
            let ls = layouts(&shape);
            for (i, (na, la)) in ls.iter().enumerate() {
                let (nb, lb) = &ls[(i + 1) % ls.len()];
                let da = random_values(la.storage_extent(), -2.0, 2.0, 1);
                let mut db = random_values(lb.storage_extent(), -2.0, 2.0, 2);
                // some ties for the comparisons
                for (k, v) in db.iter_mut().enumerate().step_by(5) {
                    *v = da[k % da.len()];
                }
                for dtype in DType::FLOATS {
                    let (a, b) = (storage(dtype, &da), storage(dtype, &db));
                    let (xa, xb) = (logical(&values(&a), la), logical(&values(&b), lb));
                    for op in ARITH.iter().chain(&CMP) {
                        let out = binary(*op, &a, la, &b, lb).unwrap();
                        assert_eq!(out.dtype(), if op.is_comparison() { DType::Bool } else { dtype });
                        let want: Vec<f64> = xa.iter().zip(&xb).map(|(&x, &y)| binary_ref(*op, x, y)).collect();
                        let want = if op.is_comparison() { want } else { rounded(dtype, &want) };
                        assert_close(&values(&out), &want, tol(dtype), &format!("{op:?} {dtype} {na}/{nb} {shape:?}"));
                    }
                }
            }
        }
    }

    #[test]
    fn maximum_minimum_propagate_nan() {
        let l = Layout::contiguous(&[3]);
        let a = storage(DType::F32, &[f64::NAN, 1.0, 2.0]);
        let b = storage(DType::F32, &[0.0, f64::NAN, 3.0]);
        for op in [BinaryOp::Maximum, BinaryOp::Minimum] {
            let v = values(&binary(op, &a, &l, &b, &l).unwrap());
            assert!(v[0].is_nan() && v[1].is_nan(), "{op:?}: {v:?}");
        }
        assert_eq!(values(&binary(BinaryOp::Maximum, &a, &l, &b, &l).unwrap())[2], 3.0);
        assert_eq!(values(&binary(BinaryOp::Ne, &a, &l, &a, &l).unwrap()), vec![1.0, 0.0, 0.0]);
    }

    #[test]
    fn binary_int_and_bool() {
        let la = Layout::contiguous(&[2, 3]);
        let lb = Layout::new(vec![2, 3], vec![0, 1], 0);
        let a = CpuStorage::I64(vec![1, 5, -7, i64::MAX, 0, 3]);
        let b = CpuStorage::I64(vec![2, 5, 4]);
        assert_eq!(binary(BinaryOp::Add, &a, &la, &b, &lb).unwrap(), CpuStorage::I64(vec![3, 10, -3, i64::MIN + 1, 5, 7]));
        assert_eq!(binary(BinaryOp::Sub, &a, &la, &b, &lb).unwrap(), CpuStorage::I64(vec![-1, 0, -11, i64::MAX - 2, -5, -1]));
        assert_eq!(binary(BinaryOp::Mul, &a, &la, &b, &lb).unwrap(), CpuStorage::I64(vec![2, 25, -28, -2, 0, 12]));
        assert_eq!(binary(BinaryOp::Maximum, &a, &la, &b, &lb).unwrap(), CpuStorage::I64(vec![2, 5, 4, i64::MAX, 5, 4]));
        assert_eq!(binary(BinaryOp::Minimum, &a, &la, &b, &lb).unwrap(), CpuStorage::I64(vec![1, 5, -7, 2, 0, 3]));
        assert_eq!(binary(BinaryOp::Le, &a, &la, &b, &lb).unwrap(), CpuStorage::Bool(vec![true, true, true, false, true, true]));
        assert!(binary(BinaryOp::Div, &a, &la, &b, &lb).is_err());
        assert!(binary(BinaryOp::Pow, &a, &la, &b, &lb).is_err());

        let l = Layout::contiguous(&[4]);
        let p = CpuStorage::Bool(vec![false, false, true, true]);
        let q = CpuStorage::Bool(vec![false, true, false, true]);
        assert_eq!(binary(BinaryOp::Add, &p, &l, &q, &l).unwrap(), CpuStorage::Bool(vec![false, true, true, true]));
        assert_eq!(binary(BinaryOp::Maximum, &p, &l, &q, &l).unwrap(), CpuStorage::Bool(vec![false, true, true, true]));
        assert_eq!(binary(BinaryOp::Mul, &p, &l, &q, &l).unwrap(), CpuStorage::Bool(vec![false, false, false, true]));
        assert_eq!(binary(BinaryOp::Minimum, &p, &l, &q, &l).unwrap(), CpuStorage::Bool(vec![false, false, false, true]));
        assert_eq!(binary(BinaryOp::Eq, &p, &l, &q, &l).unwrap(), CpuStorage::Bool(vec![true, false, false, true]));
        assert_eq!(binary(BinaryOp::Ne, &p, &l, &q, &l).unwrap(), CpuStorage::Bool(vec![false, true, true, false]));
        assert!(binary(BinaryOp::Sub, &p, &l, &q, &l).is_err());
        assert!(binary(BinaryOp::Div, &p, &l, &q, &l).is_err());
    }

    #[test]
    fn binary_rejects_mismatches() {
        let l = Layout::contiguous(&[2]);
        let a = storage(DType::F32, &[1.0, 2.0]);
        let b = storage(DType::F64, &[1.0, 2.0]);
        assert!(matches!(binary(BinaryOp::Add, &a, &l, &b, &l), Err(AotError::DTypeMismatch { .. })));
        let l3 = Layout::new(vec![3], vec![0], 0);
        assert!(matches!(binary(BinaryOp::Add, &a, &l, &a, &l3), Err(AotError::ShapeMismatch { .. })));
    }

    #[test]
    fn binary_scalar_matches_reference() {
        for (name, l) in layouts(&[3, 4]) {
            let data = random_values(l.storage_extent(), 0.5, 2.0, 3);
            for dtype in DType::FLOATS {
                let a = storage(dtype, &data);
                let xa = logical(&values(&a), &l);
                for op in ARITH.iter().chain(&CMP) {
                    for first in [false, true] {
                        let s = 1.25;
                        let out = binary_scalar(*op, &a, &l, s, first).unwrap();
                        let want: Vec<f64> =
                            xa.iter().map(|&x| if first { binary_ref(*op, s, x) } else { binary_ref(*op, x, s) }).collect();
                        let want = if op.is_comparison() { want } else { rounded(dtype, &want) };
                        assert_close(&values(&out), &want, tol(dtype), &format!("{op:?} first={first} {dtype} {name}"));
                    }
                }
            }
        }
    }

    #[test]
    fn binary_scalar_rounding_follows_torch() {
        let l = Layout::contiguous(&[1]);
        // comparisons cast the scalar to the tensor's dtype ...
        let h = storage(DType::F16, &[0.1]);
        assert_eq!(binary_scalar(BinaryOp::Eq, &h, &l, 0.1, false).unwrap(), CpuStorage::Bool(vec![true]));
        let f = storage(DType::F32, &[0.1]);
        assert_eq!(binary_scalar(BinaryOp::Eq, &f, &l, 0.1, false).unwrap(), CpuStorage::Bool(vec![true]));
        // ... arithmetic on f16 uses it in f32 and rounds once.
        let x = storage(DType::F16, &[1000.0]);
        let got = values(&binary_scalar(BinaryOp::Mul, &x, &l, 0.1, false).unwrap())[0];
        assert_eq!(got, half::f16::from_f32(1000.0 * 0.1f32).to_f64());
        // rsub / rdiv / rpow
        let a = storage(DType::F64, &[2.0]);
        assert_eq!(values(&binary_scalar(BinaryOp::Sub, &a, &l, 10.0, true).unwrap()), vec![8.0]);
        assert_eq!(values(&binary_scalar(BinaryOp::Div, &a, &l, 10.0, true).unwrap()), vec![5.0]);
        assert_eq!(values(&binary_scalar(BinaryOp::Pow, &a, &l, 3.0, true).unwrap()), vec![9.0]);
        let i = CpuStorage::I64(vec![7, -2]);
        let l2 = Layout::contiguous(&[2]);
        assert_eq!(binary_scalar(BinaryOp::Sub, &i, &l2, 1.0, true).unwrap(), CpuStorage::I64(vec![-6, 3]));
        assert_eq!(binary_scalar(BinaryOp::Gt, &i, &l2, 0.0, false).unwrap(), CpuStorage::Bool(vec![true, false]));
        assert!(binary_scalar(BinaryOp::Div, &i, &l2, 2.0, false).is_err());
        let b = CpuStorage::Bool(vec![true, false]);
        assert_eq!(binary_scalar(BinaryOp::Mul, &b, &l2, 1.0, false).unwrap(), CpuStorage::Bool(vec![true, false]));
    }

    #[test]
    fn where_selects_with_broadcast_condition() {
        let cond = CpuStorage::Bool(vec![true, false, true]);
        let lc = Layout::new(vec![2, 3], vec![0, 1], 0);
        let a = storage(DType::F32, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let la = Layout::contiguous(&[3, 2]).t("t").unwrap(); // [[0,2,4],[1,3,5]]
        let b = storage(DType::F32, &[-1.0]);
        let lb = Layout::new(vec![2, 3], vec![0, 0], 0);
        let out = where_cond(&cond, &lc, &a, &la, &b, &lb).unwrap();
        assert_eq!(values(&out), vec![0.0, -1.0, 4.0, 1.0, -1.0, 5.0]);
        // big, all dtypes
        let n = 50_000;
        let c: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        let l = Layout::contiguous(&[n]);
        for dtype in DType::ALL {
            let a = CpuStorage::zeros(dtype, n);
            let b = CpuStorage::full(dtype, n, 1.0);
            let out = where_cond(&CpuStorage::Bool(c.clone()), &l, &a, &l, &b, &l).unwrap();
            assert_eq!(out.dtype(), dtype);
            let want: Vec<f64> = c.iter().map(|&c| if c { 0.0 } else { 1.0 }).collect();
            assert_eq!(values(&out), want);
        }
        assert!(where_cond(&a, &la, &a, &la, &a, &la).is_err(), "condition must be bool");
        let i = CpuStorage::I64(vec![1]);
        assert!(where_cond(&cond, &lc, &a, &la, &i, &lb).is_err(), "dtype mismatch");
    }

    #[test]
    fn clamp_bounds_and_nan() {
        let l = Layout::contiguous(&[5]);
        for dtype in DType::FLOATS {
            let s = storage(dtype, &[-2.0, 0.5, 3.0, f64::NAN, 1.0]);
            let v = values(&clamp(&s, &l, Some(0.0), Some(1.0)).unwrap());
            assert_eq!(&v[..3], &[0.0, 0.5, 1.0]);
            assert!(v[3].is_nan());
            assert_eq!(values(&clamp(&s, &l, Some(0.0), None).unwrap())[..3], [0.0, 0.5, 3.0]);
            assert_eq!(values(&clamp(&s, &l, None, Some(1.0)).unwrap())[..3], [-2.0, 0.5, 1.0]);
            // min > max gives max
            assert_eq!(values(&clamp(&s, &l, Some(2.0), Some(1.0)).unwrap())[..3], [1.0, 1.0, 1.0]);
            let v = values(&clamp(&s, &l, Some(f64::NAN), None).unwrap());
            assert!(v.iter().all(|x| x.is_nan()));
        }
        let lt = Layout::contiguous(&[2, 2]).t("t").unwrap();
        let i = CpuStorage::I64(vec![-5, 2, 7, 0]);
        assert_eq!(clamp(&i, &lt, Some(-1.0), Some(3.0)).unwrap(), CpuStorage::I64(vec![-1, 3, 2, 0]));
        assert!(clamp(&CpuStorage::Bool(vec![true]), &Layout::contiguous(&[1]), None, None).is_err());
    }

    #[test]
    fn cast_between_all_dtypes() {
        let data = [-2.7, -0.0, 0.0, 0.5, 1.0, 3.9, 1e6];
        let l = Layout::contiguous(&[7]);
        for from in DType::ALL {
            let s = storage(from, &data);
            let xs = values(&s);
            for to in DType::ALL {
                let out = cast(&s, &l, to);
                assert_eq!(out.dtype(), to);
                let want: Vec<f64> = xs.iter().map(|&x| values(&storage(to, &[x]))[0]).collect();
                assert_eq!(values(&out), want, "{from} -> {to}");
            }
        }
        let f = storage(DType::F32, &[-2.7, 2.7, 0.0, f64::NAN]);
        let l4 = Layout::contiguous(&[4]);
        assert_eq!(cast(&f, &l4, DType::I64), CpuStorage::I64(vec![-2, 2, 0, 0]));
        assert_eq!(cast(&f, &l4, DType::Bool), CpuStorage::Bool(vec![true, true, false, true]));
        // non-contiguous gather and large i64 stay exact
        let big = CpuStorage::I64(vec![(1 << 60) + 1, 2, 3, 4, 5, 6]);
        let lt = Layout::contiguous(&[2, 3]).t("t").unwrap();
        assert_eq!(cast(&big, &lt, DType::I64), CpuStorage::I64(vec![(1 << 60) + 1, 4, 2, 5, 3, 6]));
        assert_eq!(values(&cast(&big, &lt, DType::F64))[1..], [4.0, 2.0, 5.0, 3.0, 6.0]);
    }

    #[test]
    fn copy_strided_into_views() {
        // into a transposed view, with a cast
        let src = storage(DType::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let ls = Layout::contiguous(&[2, 3]);
        let mut dst = CpuStorage::zeros(DType::F64, 7);
        let ld = Layout::new(vec![2, 3], vec![1, 2], 1);
        copy_strided(&src, &ls, &mut dst, &ld).unwrap();
        assert_eq!(values(&dst), vec![0.0, 1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        // same dtype, contiguous destination slice, strided source
        let mut dst = CpuStorage::zeros(DType::F32, 8);
        copy_strided(&src, &ls.t("t").unwrap(), &mut dst, &Layout::new(vec![3, 2], vec![2, 1], 1)).unwrap();
        assert_eq!(values(&dst), vec![0.0, 1.0, 4.0, 2.0, 5.0, 3.0, 6.0, 0.0]);
        // same numel, other shape: row-major order
        let mut dst = CpuStorage::zeros(DType::I64, 6);
        copy_strided(&src, &ls.t("t").unwrap(), &mut dst, &Layout::contiguous(&[6])).unwrap();
        assert_eq!(dst, CpuStorage::I64(vec![1, 4, 2, 5, 3, 6]));
        // broadcast source
        let mut dst = CpuStorage::zeros(DType::BF16, 6);
        copy_strided(&src, &Layout::new(vec![2, 3], vec![0, 1], 3), &mut dst, &Layout::contiguous(&[3, 2]).t("t").unwrap()).unwrap();
        assert_eq!(values(&dst), vec![4.0, 4.0, 5.0, 5.0, 6.0, 6.0]);
        // errors
        let mut dst = CpuStorage::zeros(DType::F32, 4);
        assert!(copy_strided(&src, &ls, &mut dst, &Layout::contiguous(&[4])).is_err());
        assert!(copy_strided(&src, &ls, &mut dst, &Layout::contiguous(&[2, 3])).is_err());
        // large, parallel path, every dtype pair
        let n = 40_000;
        let data: Vec<f64> = (0..n).map(|i| (i % 7) as f64).collect();
        let lt = Layout::contiguous(&[200, 200]).t("t").unwrap();
        for from in DType::ALL {
            let s = storage(from, &data);
            let want = logical(&values(&s), &lt);
            for to in DType::ALL {
                let mut d = CpuStorage::zeros(to, n);
                copy_strided(&s, &lt, &mut d, &Layout::contiguous(&[200, 200])).unwrap();
                let want: Vec<f64> = want.iter().map(|&x| values(&storage(to, &[x]))[0]).collect();
                assert_eq!(values(&d), want, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn fill_only_touches_the_view() {
        let mut d = CpuStorage::zeros(DType::F32, 12);
        let l = Layout::contiguous(&[3, 4]).slice("s", 1, 1, 4, 2).unwrap(); // columns 1 and 3
        fill(&mut d, &l, 2.5);
        assert_eq!(values(&d), vec![0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5]);
        let mut d = CpuStorage::zeros(DType::I64, 5);
        fill(&mut d, &Layout::new(vec![3], vec![1], 1), 7.0);
        assert_eq!(d, CpuStorage::I64(vec![0, 7, 7, 7, 0]));
        let mut d = CpuStorage::zeros(DType::Bool, 2);
        fill(&mut d, &Layout::new(vec![2, 2], vec![0, 1], 0), 3.0);
        assert_eq!(d, CpuStorage::Bool(vec![true, true]));
        fill(&mut d, &Layout::new(vec![0], vec![1], 10), 3.0);
    }

    #[test]
    fn names() {
        assert_eq!(UnaryOp::Reciprocal.name(), "reciprocal");
        assert_eq!(BinaryOp::Maximum.name(), "maximum");
        assert!(BinaryOp::Ge.is_comparison() && !BinaryOp::Pow.is_comparison());
    }
}
