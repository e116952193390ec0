//! The typed values of the fused evaluator: one block buffer per body
//! value, in the representation its dtype computes in (f32 for
//! f32/f16/bf16, f64, i64, bool), and one step of the body over them.
//!
//! A step converts each operand whose dtype is not the step's compute
//! dtype (eager's promotion) with eager's cast ([`Elem::cast`]), so an
//! f16 operand of an f32 op is widened exactly, an i64 operand of a float
//! op rounds once, a bool is 0 or 1. Float arithmetic runs the op's one
//! definition (`with_op`) and rounds to f16/bf16 after the op when the
//! compute dtype is one of those; comparisons give bools; `where` selects;
//! a cast is the conversion itself.

use super::{simd, Binary, Rhs, Step, Unary, WithScalar};
use crate::backend::{CpuElem, CpuStorage};
use crate::cpu::elem::Elem;
use crate::dtype::DType;
use aot_ir::kernel::elementwise::{with_op, BoolOp, Compute, IntOp, OpVisitor};
use aot_ir::OpKind;
use half::{bf16, f16};
use std::mem::MaybeUninit;

/// The block of one body value.
#[derive(Debug)]
pub(crate) enum Block {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl Default for Block {
    fn default() -> Block {
        Block::Bool(Vec::new())
    }
}

/// The representation a dtype computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repr {
    F32,
    F64,
    I64,
    Bool,
}

fn repr(d: DType) -> Repr {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => Repr::F32,
        DType::F64 => Repr::F64,
        DType::I64 => Repr::I64,
        DType::Bool => Repr::Bool,
    }
}

/// Bytes per element of `d`'s representation.
pub(super) fn repr_bytes(d: DType) -> usize {
    match repr(d) {
        Repr::F32 => 4,
        Repr::F64 | Repr::I64 => 8,
        Repr::Bool => 1,
    }
}

/// Whether `a` and `b` compute in one representation (share a buffer).
pub(super) fn same_repr(a: DType, b: DType) -> bool {
    repr(a) == repr(b)
}

impl Block {
    /// `n` zeros in `d`'s representation.
    pub(crate) fn new(d: DType, n: usize) -> Block {
        match repr(d) {
            Repr::F32 => Block::F32(vec![0.0; n]),
            Repr::F64 => Block::F64(vec![0.0; n]),
            Repr::I64 => Block::I64(vec![0; n]),
            Repr::Bool => Block::Bool(vec![false; n]),
        }
    }

    fn repr(&self) -> Repr {
        match self {
            Block::F32(_) => Repr::F32,
            Block::F64(_) => Repr::F64,
            Block::I64(_) => Repr::I64,
            Block::Bool(_) => Repr::Bool,
        }
    }

    fn len(&self) -> usize {
        match self {
            Block::F32(v) => v.len(),
            Block::F64(v) => v.len(),
            Block::I64(v) => v.len(),
            Block::Bool(v) => v.len(),
        }
    }

    /// The first `len` elements (`None`: the block is shorter).
    fn view(&self, len: usize) -> Option<Slice<'_>> {
        Some(match self {
            Block::F32(v) => Slice::F32(v.get(..len)?),
            Block::F64(v) => Slice::F64(v.get(..len)?),
            Block::I64(v) => Slice::I64(v.get(..len)?),
            Block::Bool(v) => Slice::Bool(v.get(..len)?),
        })
    }
}

/// A block's first elements.
#[derive(Clone, Copy)]
enum Slice<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I64(&'a [i64]),
    Bool(&'a [bool]),
}

/// `dst[i] = f(buf[off + i * stride])`.
#[inline]
fn gather<T: Copy, R: Copy>(buf: &[T], off: usize, stride: usize, dst: &mut [R], f: impl Fn(T) -> R) {
    match stride {
        0 => dst.fill(f(buf[off])),
        1 => {
            let n = dst.len();
            for (d, &x) in dst.iter_mut().zip(&buf[off..off + n]) {
                *d = f(x);
            }
        }
        _ => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = f(buf[off + i * stride]);
            }
        }
    }
}

/// Loads `len` elements of `s` (from `off`, every `stride`) into `dst`, the
/// block of `s`'s dtype. `false`: `dst` is not of that representation.
pub(super) fn load(s: &CpuStorage, off: usize, stride: usize, dst: &mut Block, len: usize) -> bool {
    match (s, dst) {
        (CpuStorage::F32(v), Block::F32(d)) => gather(v, off, stride, &mut d[..len], |x| x),
        (CpuStorage::F16(v), Block::F32(d)) => gather(v, off, stride, &mut d[..len], f16::to_f32),
        (CpuStorage::BF16(v), Block::F32(d)) => gather(v, off, stride, &mut d[..len], bf16::to_f32),
        (CpuStorage::F64(v), Block::F64(d)) => gather(v, off, stride, &mut d[..len], |x| x),
        (CpuStorage::I64(v), Block::I64(d)) => gather(v, off, stride, &mut d[..len], |x| x),
        (CpuStorage::Bool(v), Block::Bool(d)) => gather(v, off, stride, &mut d[..len], |x| x),
        _ => return false,
    }
    true
}

/// An output element, written from the block of its dtype.
pub(crate) trait Stored: CpuElem + Send {
    /// Writes the first `o.len()` elements of `b` (of this dtype) to `o`;
    /// `false`: `b` is not of this dtype's representation.
    fn store(b: &Block, o: &mut [MaybeUninit<Self>]) -> bool;
    /// Loads `src` into `dst` (this dtype's representation); `false`:
    /// `dst` is not of it.
    ///
    /// # Safety
    /// Every element of `src` is initialised.
    unsafe fn load_own(src: &[MaybeUninit<Self>], dst: &mut Block) -> bool;
    /// As [`store`](Self::store), with stores that bypass the caches where
    /// this dtype and target have them ([`STREAM_MIN_BYTES`]); a task that
    /// uses it holds a [`StreamFence`].
    fn store_streaming(b: &Block, o: &mut [MaybeUninit<Self>]) -> bool {
        Self::store(b, o)
    }
}

/// Outputs of at least this many bytes are written with non-temporal
/// stores: they cannot stay in cache for a consumer anyway, and a normal
/// store first reads each line it writes (W2's 64 MiB output: 10% of the
/// kernel's time on 2 AVX-512 cores).
pub(crate) const STREAM_MIN_BYTES: usize = 32 << 20;

/// Held by a task that stores with [`Stored::store_streaming`]: when it
/// drops (on every exit) it orders the task's non-temporal stores before
/// its later stores (x86 keeps them out of its usual store order), so
/// whoever sees the task done sees them.
pub(super) struct StreamFence;

impl Drop for StreamFence {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `sfence` has no operands and SSE is part of x86_64.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
    }
}

/// `v` into `o` with non-temporal stores of four lanes where `o` is
/// 16-byte aligned (a plain copy for its unaligned head and its tail).
pub(super) fn stream_f32(v: &[f32], o: &mut [MaybeUninit<f32>]) {
    let n = o.len().min(v.len());
    let head = o.as_ptr().align_offset(16).min(n);
    for (o, &x) in o[..head].iter_mut().zip(v) {
        o.write(x);
    }
    let body = (n - head) / 4 * 4;
    #[cfg(target_arch = "x86_64")]
    for (o, x) in o[head..head + body].chunks_exact_mut(4).zip(v[head..].chunks_exact(4)) {
        // SAFETY: `o` is 4 writable floats starting 16-byte aligned (`head`
        // aligned it and every chunk is 16 bytes), `x` 4 readable ones;
        // SSE is part of x86_64. The task's `StreamFence` orders the store.
        unsafe { std::arch::x86_64::_mm_stream_ps(o.as_mut_ptr().cast::<f32>(), std::arch::x86_64::_mm_loadu_ps(x.as_ptr())) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (o, &x) in o[head..head + body].iter_mut().zip(&v[head..]) {
        o.write(x);
    }
    for (o, &x) in o[head + body..n].iter_mut().zip(&v[head + body..]) {
        o.write(x);
    }
}

macro_rules! stored {
    ($t:ty, $variant:ident, $conv:expr, $back:expr) => {
        stored!($t, $variant, $conv, $back, {});
    };
    ($t:ty, $variant:ident, $conv:expr, $back:expr, { $($extra:item)* }) => {
        impl Stored for $t {
            $($extra)*
            unsafe fn load_own(src: &[MaybeUninit<$t>], dst: &mut Block) -> bool {
                let Block::$variant(d) = dst else { return false };
                for (d, x) in d.iter_mut().zip(src) {
                    // SAFETY: the caller's guarantee.
                    *d = $back(unsafe { x.assume_init_read() });
                }
                d.len() >= src.len()
            }
            fn store(b: &Block, o: &mut [MaybeUninit<$t>]) -> bool {
                let Block::$variant(v) = b else { return false };
                for (o, &x) in o.iter_mut().zip(v) {
                    o.write($conv(x));
                }
                v.len() >= o.len()
            }
        }
    };
}
stored!(f32, F32, |x: f32| x, |x: f32| x, {
    fn store_streaming(b: &Block, o: &mut [MaybeUninit<f32>]) -> bool {
        let Block::F32(v) = b else { return false };
        stream_f32(v, o);
        v.len() >= o.len()
    }
});
// Exact: every f16/bf16 value was rounded to its type when computed.
stored!(f16, F32, f16::from_f32, f16::to_f32);
stored!(bf16, F32, bf16::from_f32, bf16::to_f32);
stored!(f64, F64, |x: f64| x, |x: f64| x);
stored!(i64, I64, |x: i64| x, |x: i64| x);
stored!(bool, Bool, |x: bool| x, |x: bool| x);

/// `src` cast to `to` as eager casts, into `dst` (of `to`'s representation).
fn convert(src: Slice<'_>, to: DType, dst: &mut Block) -> bool {
    match src {
        Slice::F32(v) => cast_all(v, to, dst),
        Slice::F64(v) => cast_all(v, to, dst),
        Slice::I64(v) => cast_all(v, to, dst),
        Slice::Bool(v) => cast_all(v, to, dst),
    }
}

/// An f32-represented value holds an f32, f16 or bf16 exactly, and casts
/// from any of them as from that f32 (eager casts all three through f32).
fn cast_all<S: Elem>(src: &[S], to: DType, dst: &mut Block) -> bool {
    fn map<S: Copy, D>(s: &[S], d: &mut [D], f: impl Fn(S) -> D) -> bool {
        if d.len() < s.len() {
            return false;
        }
        for (d, &x) in d.iter_mut().zip(s) {
            *d = f(x);
        }
        true
    }
    match (to, dst) {
        (DType::F32, Block::F32(d)) => map(src, d, |x| x.cast::<f32>()),
        (DType::F16, Block::F32(d)) => map(src, d, |x| x.cast::<f16>().to_f32()),
        (DType::BF16, Block::F32(d)) => map(src, d, |x| x.cast::<bf16>().to_f32()),
        (DType::F64, Block::F64(d)) => map(src, d, |x| x.cast::<f64>()),
        (DType::I64, Block::I64(d)) => map(src, d, |x| x.cast::<i64>()),
        (DType::Bool, Block::Bool(d)) => map(src, d, |x| x.cast::<bool>()),
        _ => false,
    }
}

/// A value's block `b` (of dtype `d`) as `to`: itself where that is exact
/// (same dtype, or an f16/bf16 value read as f32), else converted into
/// `scratch`.
fn operand<'a>(b: &'a Block, d: DType, to: DType, scratch: &'a mut Block, len: usize) -> Option<Slice<'a>> {
    let src = b.view(len)?;
    if d == to || (to == DType::F32 && repr(d) == Repr::F32) {
        return Some(src);
    }
    if scratch.repr() != repr(to) || scratch.len() < len {
        *scratch = Block::new(to, len);
    }
    convert(src, to, scratch).then_some(())?;
    scratch.view(len)
}

/// The second operand of a step, in the compute representation.
#[derive(Clone, Copy)]
enum Second<'a> {
    None,
    Slice(Slice<'a>),
    Scalar(f64),
}

/// One step over the first `len` elements of each value's block, value
/// `v` living in buffer `slot[v]` of `values` (the step's result never in
/// a buffer it reads: `slots::plan`). `None`: a step the evaluator does
/// not compute (the caller checked the program with [`supported`] first,
/// so this is a bug it reports).
pub(super) fn eval_step(
    s: &Step,
    dtypes: &[DType],
    slot: &[usize],
    values: &mut [Block],
    scratch: &mut [Block; 2],
    len: usize,
) -> Option<()> {
    let o = *slot.get(s.out)?;
    let mut out = std::mem::take(values.get_mut(o)?);
    let r = step_into(s, dtypes, slot, values, scratch, len, &mut out);
    values[o] = out;
    r
}

fn step_into(
    s: &Step,
    dtypes: &[DType],
    slot: &[usize],
    values: &[Block],
    scratch: &mut [Block; 2],
    len: usize,
    out: &mut Block,
) -> Option<()> {
    let c = s.compute;
    let at = |v: usize| slot.get(v).and_then(|&b| values.get(b));
    if is_cast(s.op) {
        return convert(at(s.a)?.view(len)?, c, out).then_some(());
    }
    let [s0, s1] = scratch;
    let a = operand(at(s.a)?, *dtypes.get(s.a)?, c, s0, len)?;
    let b = match s.rhs {
        Rhs::None => Second::None,
        Rhs::Value(v) => Second::Slice(operand(at(v)?, *dtypes.get(v)?, c, s1, len)?),
        Rhs::Scalar(x) => Second::Scalar(x),
    };
    if s.op == OpKind::Where {
        let Some(Slice::Bool(cond)) = at(s.cond?)?.view(len) else { return None };
        return select(cond, a, b, c, out);
    }
    if s.op.is_comparison() {
        return compare(s.op, a, b, c, out);
    }
    arith(s.op, a, b, c, out)
}

/// Whether the step is a cast (`to_dtype`; the executor plans `cast_like`
/// as one).
fn is_cast(op: OpKind) -> bool {
    op == OpKind::ToDtype
}

/// A scalar as eager's comparisons and `where` take it: rounded to the
/// compute dtype itself (not just to its compute type).
fn round_scalar(x: f64, c: DType) -> f64 {
    match c {
        DType::F32 => x as f32 as f64,
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::BF16 => bf16::from_f64(x).to_f64(),
        DType::F64 => x,
        DType::I64 => x as i64 as f64,
        DType::Bool => f64::from(u8::from(x != 0.0)),
    }
}

fn compare(k: OpKind, a: Slice<'_>, b: Second<'_>, c: DType, out: &mut Block) -> Option<()> {
    let Block::Bool(o) = out else { return None };
    let o = o.get_mut(..slice_len(a))?;
    let x = match b {
        Second::Scalar(x) => Some(x),
        _ => None,
    };
    match (a, b) {
        (Slice::F32(a), Second::Slice(Slice::F32(b))) => cmp_loop(k, a, Ok(b), o),
        (Slice::F32(a), Second::Scalar(_)) => cmp_loop(k, a, Err(round_scalar(x?, c) as f32), o),
        (Slice::F64(a), Second::Slice(Slice::F64(b))) => cmp_loop(k, a, Ok(b), o),
        (Slice::F64(a), Second::Scalar(_)) => cmp_loop(k, a, Err(x?), o),
        (Slice::I64(a), Second::Slice(Slice::I64(b))) => cmp_loop(k, a, Ok(b), o),
        (Slice::I64(a), Second::Scalar(_)) => cmp_loop(k, a, Err(x? as i64), o),
        (Slice::Bool(a), Second::Slice(Slice::Bool(b))) => cmp_loop(k, a, Ok(b), o),
        (Slice::Bool(a), Second::Scalar(_)) => cmp_loop(k, a, Err(x? != 0.0), o),
        _ => None,
    }
}

fn slice_len(s: Slice<'_>) -> usize {
    match s {
        Slice::F32(v) => v.len(),
        Slice::F64(v) => v.len(),
        Slice::I64(v) => v.len(),
        Slice::Bool(v) => v.len(),
    }
}

/// `o = a <k> b` with `b` a block (`Ok`) or a scalar (`Err`); one loop per
/// comparison, so each vectorises. `None` when `k` is not a comparison.
fn cmp_loop<T: PartialOrd + Copy>(k: OpKind, a: &[T], b: Result<&[T], T>, o: &mut [bool]) -> Option<()> {
    macro_rules! go {
        ($cmp:tt) => {
            simd(
                #[inline(always)]
                || match b {
                    Ok(b) => {
                        for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                            *o = x $cmp y;
                        }
                    }
                    Err(y) => {
                        for (o, &x) in o.iter_mut().zip(a) {
                            *o = x $cmp y;
                        }
                    }
                },
            )
        };
    }
    match k {
        OpKind::Eq => go!(==),
        OpKind::Ne => go!(!=),
        OpKind::Lt => go!(<),
        OpKind::Le => go!(<=),
        OpKind::Gt => go!(>),
        OpKind::Ge => go!(>=),
        _ => return None,
    }
    Some(())
}

/// `where(cond, a, b)` in the compute dtype (a scalar `b` rounded to it,
/// as eager's 0-dim tensor of it is).
fn select(cond: &[bool], a: Slice<'_>, b: Second<'_>, c: DType, out: &mut Block) -> Option<()> {
    fn go<T: Copy>(cond: &[bool], a: &[T], b: Result<&[T], T>, o: &mut [T]) {
        match b {
            Ok(b) => {
                for (((o, &k), &x), &y) in o.iter_mut().zip(cond).zip(a).zip(b) {
                    *o = if k { x } else { y };
                }
            }
            Err(y) => {
                for ((o, &k), &x) in o.iter_mut().zip(cond).zip(a) {
                    *o = if k { x } else { y };
                }
            }
        }
    }
    let n = slice_len(a);
    let x = match b {
        Second::Scalar(x) => round_scalar(x, c),
        _ => 0.0,
    };
    match (a, b, out) {
        (Slice::F32(a), Second::Slice(Slice::F32(b)), Block::F32(o)) => go(cond, a, Ok(b), o.get_mut(..n)?),
        (Slice::F32(a), Second::Scalar(_), Block::F32(o)) => go(cond, a, Err(x as f32), o.get_mut(..n)?),
        (Slice::F64(a), Second::Slice(Slice::F64(b)), Block::F64(o)) => go(cond, a, Ok(b), o.get_mut(..n)?),
        (Slice::F64(a), Second::Scalar(_), Block::F64(o)) => go(cond, a, Err(x), o.get_mut(..n)?),
        (Slice::I64(a), Second::Slice(Slice::I64(b)), Block::I64(o)) => go(cond, a, Ok(b), o.get_mut(..n)?),
        (Slice::I64(a), Second::Scalar(_), Block::I64(o)) => go(cond, a, Err(x as i64), o.get_mut(..n)?),
        (Slice::Bool(a), Second::Slice(Slice::Bool(b)), Block::Bool(o)) => go(cond, a, Ok(b), o.get_mut(..n)?),
        (Slice::Bool(a), Second::Scalar(_), Block::Bool(o)) => go(cond, a, Err(x != 0.0), o.get_mut(..n)?),
        _ => return None,
    }
    Some(())
}

/// Arithmetic in the compute dtype `c`.
fn arith(op: OpKind, a: Slice<'_>, b: Second<'_>, c: DType, out: &mut Block) -> Option<()> {
    let n = slice_len(a);
    match (a, out) {
        (Slice::F32(a), Block::F32(o)) => {
            let o = o.get_mut(..n)?;
            float_op(op, a, b, o)?;
            // Eager rounds every op's result to the storage type.
            match c {
                DType::F16 => o.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32()),
                DType::BF16 => o.iter_mut().for_each(|x| *x = bf16::from_f32(*x).to_f32()),
                _ => {}
            }
            Some(())
        }
        (Slice::F64(a), Block::F64(o)) => float_op(op, a, b, o.get_mut(..n)?),
        (Slice::I64(a), Block::I64(o)) => {
            let k = IntOp::of(op)?;
            let o = o.get_mut(..n)?;
            match b {
                Second::None if !k.is_binary() => o.iter_mut().zip(a).for_each(|(o, &x)| *o = k.eval(x, x)),
                Second::Scalar(y) if k.is_binary() && k != IntOp::Pow => o.iter_mut().zip(a).for_each(|(o, &x)| *o = k.eval(x, y as i64)),
                Second::Slice(Slice::I64(b)) if k.is_binary() => {
                    o.iter_mut().zip(a).zip(b).for_each(|((o, &x), &y)| *o = k.eval(x, y));
                }
                _ => return None,
            }
            Some(())
        }
        (Slice::Bool(a), Block::Bool(o)) => {
            let k = BoolOp::of(op)?;
            let o = o.get_mut(..n)?;
            match b {
                Second::Scalar(y) => o.iter_mut().zip(a).for_each(|(o, &x)| *o = k.eval(x, y != 0.0)),
                Second::Slice(Slice::Bool(b)) => o.iter_mut().zip(a).zip(b).for_each(|((o, &x), &y)| *o = k.eval(x, y)),
                _ => return None,
            }
            Some(())
        }
        _ => None,
    }
}

/// Float arithmetic from the op's one definition.
fn float_op<C: Compute + FloatSlice>(op: OpKind, a: &[C], b: Second<'_>, o: &mut [C]) -> Option<()> {
    match b {
        Second::None => with_op(op, Unary { a, o }),
        Second::Scalar(x) => with_op(op, WithScalar { a, b: C::of(x), o }),
        Second::Slice(s) => with_op(op, Binary { a, b: C::of_slice(s)?, o }),
    }
}

/// The float compute types' blocks.
trait FloatSlice: Sized {
    fn of_slice(s: Slice<'_>) -> Option<&[Self]>;
}

impl FloatSlice for f32 {
    fn of_slice(s: Slice<'_>) -> Option<&[f32]> {
        match s {
            Slice::F32(v) => Some(v),
            _ => None,
        }
    }
}

impl FloatSlice for f64 {
    fn of_slice(s: Slice<'_>) -> Option<&[f64]> {
        match s {
            Slice::F64(v) => Some(v),
            _ => None,
        }
    }
}

/// Whether [`eval_step`] computes `s` in a program whose values have
/// `dtypes`, the first `inputs` of them loads: indices in range, the
/// operands' and result's dtypes as the op gives them, and the op defined
/// for its compute dtype.
pub(super) fn supported(s: &Step, dtypes: &[DType], inputs: usize) -> bool {
    let n = dtypes.len();
    let rhs_ok = match s.rhs {
        Rhs::Value(v) => v < n,
        _ => true,
    };
    if s.a >= n || s.out >= n || s.out < inputs || !rhs_ok {
        return false;
    }
    let has_rhs = !matches!(s.rhs, Rhs::None);
    let c = s.compute;
    let (result, op_ok) = if is_cast(s.op) {
        (c, true)
    } else if s.op == OpKind::Where {
        (c, has_rhs && s.cond.is_some_and(|k| dtypes.get(k) == Some(&DType::Bool)))
    } else if s.op.is_comparison() {
        (DType::Bool, has_rhs)
    } else {
        let ok = match repr(c) {
            Repr::F32 | Repr::F64 => with_op::<f32, _>(s.op, Probe).is_some(),
            // A scalar exponent is eager's to check (negative: an error).
            Repr::I64 => IntOp::of(s.op).is_some_and(|k| k.is_binary() == has_rhs && !(k == IntOp::Pow && matches!(s.rhs, Rhs::Scalar(_)))),
            Repr::Bool => BoolOp::of(s.op).is_some() && has_rhs,
        };
        (c, ok)
    };
    op_ok && dtypes[s.out] == result
}

/// Tells whether `with_op` defines an op.
struct Probe;

impl<C: Compute> OpVisitor<C> for Probe {
    type Out = ();
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, _: F) {}
}
