//! Direct kernels for the commonest steps of a call that records no
//! history, so that a small call does not pay an eager op's fixed cost
//! (broadcasting, type promotion, layout choice, autograd checks, and the
//! allocations that go with them) for work that needs none of it:
//!
//! - `add`/`sub`/`mul`/`div` and their in-place forms on two f32 or f64
//!   tensors of one shape, both dense row-major, below the size at which
//!   the eager kernels split work across threads;
//! - the plan's copies: a `Cow` of an input's storage, and the epilogue's
//!   write-back of a final version over the caller's storage.
//!
//! The operands are checked once, here (dtype, shape, density, bounds), and
//! the backend's dense primitives (`Backend::binary_dense`,
//! `binary_assign_dense`) take the checked runs as they are. A deferred
//! write (`deferred_writes.rs`) is checked before the plan runs, from the
//! geometry the guard key's pass read ([`Geom`]) where it has one, and
//! written by the epilogue through the runs that check found.
//!
//! Each computes exactly what the eager op computes: the same arithmetic
//! in the same dtype, a contiguous result, one version bump per write.
//! A step that does not qualify returns `None` and runs the eager op, which
//! also reports every error; nothing here fails on user input.

use crate::backend::{kernel_record, OpKernels};
use crate::device::Device;
use crate::dtype::DType;
use crate::layout::Layout;
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use aot_ir::{Arg as IrArg, OpKind};
use std::ops::Range;

/// The arithmetic of `op`, and whether it writes its receiver.
fn arith(op: OpKind) -> Option<(OpKind, bool)> {
    Some(match op {
        OpKind::Add => (OpKind::Add, false),
        OpKind::Sub => (OpKind::Sub, false),
        OpKind::Mul => (OpKind::Mul, false),
        OpKind::Div => (OpKind::Div, false),
        OpKind::AddInplace => (OpKind::Add, true),
        OpKind::SubInplace => (OpKind::Sub, true),
        OpKind::MulInplace => (OpKind::Mul, true),
        OpKind::DivInplace => (OpKind::Div, true),
        _ => return None,
    })
}

/// The tensor operands of a two-tensor op.
fn operands<'a>(args: &[IrArg], env: &'a [Option<Tensor>]) -> Option<(&'a Tensor, &'a Tensor)> {
    let t = |i: usize| match args.get(i)? {
        IrArg::Tensor(v) => env.get(v.index())?.as_ref(),
        _ => None,
    };
    (args.len() == 2).then_some(())?;
    Some((t(0)?, t(1)?))
}

/// The run `l` covers when it is dense row-major inside a buffer of `len`
/// and not empty.
#[inline]
fn dense_run(l: &Layout, len: usize) -> Option<Range<usize>> {
    let n = l.numel();
    let end = l.offset.checked_add(n)?;
    (n > 0 && end <= len && l.is_contiguous()).then_some(l.offset..end)
}

/// Runs `op` on `args` (receiver first) directly when it is an
/// out-of-place or in-place add/sub/mul/div of two f32 or f64 tensors of
/// one shape, both dense, and grad mode is off. In-place: the target must
/// not share its storage with the operand. `None`: not such an op; run it
/// eagerly.
pub(crate) fn binary(op: OpKind, args: &[IrArg], env: &[Option<Tensor>]) -> Option<Tensor> {
    let (a, b) = operands(args, env)?;
    binary_on(op, a, b)
}

/// An in-place step whose operands qualified: the arithmetic and where
/// the dense runs of its target and operand start, and their length (what
/// [`write_checked`] takes). Small on purpose: a call keeps one per
/// deferred write on its stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DenseWrite {
    op: OpKind,
    target: usize,
    operand: usize,
    len: usize,
}

/// The checks of [`binary_on`] for an in-place `op` of `target` and
/// `operand`, without the write: `Some` when it would run directly.
pub(crate) fn inplace_runs(op: OpKind, target: &Tensor, operand: &Tensor) -> Option<DenseWrite> {
    let Some((op, true)) = arith(op) else { return None };
    if target.shares_storage_with(operand) {
        return None;
    }
    let (t, o) = with_layouts(target, operand, |lt, lo| dense_runs(target, lt, operand, lo))?;
    Some(DenseWrite { op, target: t.start, operand: o.start, len: t.len() })
}

/// Runs a write [`inplace_runs`] checked on these very tensors, whose
/// layouts nothing changed since (the layouts are not read again), with
/// one version bump. `false`: nothing was written (the backend refused
/// the runs: they no longer fit).
pub(crate) fn write_checked(w: &DenseWrite, target: &Tensor, operand: &Tensor) -> bool {
    let (t, o) = (target.storage(), operand.storage());
    let (rt, ro) = (w.target..w.target.saturating_add(w.len), w.operand..w.operand.saturating_add(w.len));
    if t.binary_assign_dense(w.op, rt, o, ro).is_err() {
        return false;
    }
    t.bump_version();
    let (dtype, rank) = (t.dtype(), target.rank());
    kernel_record::note_op(|| OpKernels::Binary { op: w.op, lhs: dtype, rhs: dtype, rank, assign: true });
    true
}

/// A dense tensor's run in its storage and its shape (packed exactly: up
/// to 4 dims, each below 2^15), read by the guard key's pass over the
/// arguments (`compiled/specialize.rs`) while it holds the tensor's state,
/// so that the checks of a deferred write need not lock it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geom {
    start: usize,
    len: usize,
    shape: u64,
}

impl Geom {
    /// The geometry of a tensor laid out as `l` over a storage of `len`
    /// elements; `None` unless dense, not empty and of a small shape.
    #[inline]
    pub(crate) fn of(l: &Layout, len: usize) -> Option<Geom> {
        let run = dense_run(l, len)?;
        let dims = l.shape();
        let mut shape = dims.len() as u64;
        if dims.len() > 4 {
            return None;
        }
        for (i, &d) in dims.iter().enumerate() {
            if d >= 1 << 15 {
                return None;
            }
            shape |= (d as u64) << (4 + 15 * i);
        }
        Some(Geom { start: run.start, len: run.len(), shape })
    }
}

/// [`inplace_runs`] of tensors whose geometries the guard key's pass read
/// (`tg` of `target`, `og` of `operand`): the same checks, with the
/// layouts' part already done.
pub(crate) fn inplace_runs_of(op: OpKind, target: &Tensor, tg: Geom, operand: &Tensor, og: Geom) -> Option<DenseWrite> {
    let Some((op, true)) = arith(op) else { return None };
    if target.shares_storage_with(operand) || tg.shape != og.shape || !float_pair(target, operand) || is_grad_enabled() {
        return None;
    }
    Some(DenseWrite { op, target: tg.start, operand: og.start, len: tg.len })
}

/// Two f32 or f64 CPU tensors of one dtype.
#[inline]
fn float_pair(a: &Tensor, b: &Tensor) -> bool {
    let (sa, sb) = (a.storage(), b.storage());
    let dtype = sa.dtype();
    dtype == sb.dtype() && matches!(dtype, DType::F32 | DType::F64) && sa.device() == Device::Cpu && sb.device() == Device::Cpu
}

/// The dense runs of `a` and `b` when they qualify: two f32 or f64 CPU
/// tensors of one dtype and shape, both dense, with grad mode off. These
/// are all the checks a direct step makes; the backend's dense kernels
/// take the runs as they are.
#[inline]
fn dense_runs(a: &Tensor, la: &Layout, b: &Tensor, lb: &Layout) -> Option<(Range<usize>, Range<usize>)> {
    if !float_pair(a, b) {
        return None;
    }
    // Compared element by element: ranks are tiny, a `memcmp` call is not.
    let (x, y) = (la.shape(), lb.shape());
    if x.len() != y.len() || x.iter().zip(y).any(|(m, n)| m != n) || is_grad_enabled() {
        return None;
    }
    Some((dense_run(la, a.storage_len())?, dense_run(lb, b.storage_len())?))
}

/// `f` of the layouts of `a` and `b`, borrowed (a call's fixed cost must
/// not clone them); `b` may be `a` itself.
fn with_layouts<R>(a: &Tensor, b: &Tensor, f: impl FnOnce(&Layout, &Layout) -> R) -> R {
    let (sa, sb) = (a.state(), (!a.same_tensor(b)).then(|| b.state()));
    f(&sa.layout, sb.as_ref().map_or(&sa.layout, |s| &s.layout))
}

/// [`binary`] of an op and its two operands.
pub(crate) fn binary_on(op: OpKind, a: &Tensor, b: &Tensor) -> Option<Tensor> {
    let (bop, inplace) = arith(op)?;
    if inplace && a.shares_storage_with(b) {
        return None;
    }
    with_layouts(a, b, |la, lb| {
        let (ra, rb) = dense_runs(a, la, b, lb)?;
        // A large op runs the eager kernel, which splits it across threads
        // (the dense primitives here run on the calling thread).
        if ra.len() >= crate::backend::PAR_MIN {
            return None;
        }
        let dtype = a.dtype();
        // The eager op's primitive, for `kernels_for` (the devices without
        // this path run that).
        let note = || {
            let rank = la.rank();
            kernel_record::note_op(|| OpKernels::Binary { op: bop, lhs: dtype, rhs: dtype, rank, assign: inplace });
        };
        if inplace {
            a.storage().binary_assign_dense(bop, ra, b.storage(), rb).ok()?;
            a.storage().bump_version();
            note();
            return Some(a.clone());
        }
        let data = a.storage().binary_dense(bop, ra, b.storage(), rb).ok()?;
        note();
        Some(Tensor::from_storage(data, Layout::contiguous(&la.shape)))
    })
}

/// A `Cow`: a copy of `t`'s whole storage, viewed with `t`'s layout and
/// without history, as `t.storage_as_1d().copy()` aliased with
/// `t.layout()` is. `None`: no memory for the copy (the eager op reports it).
pub(crate) fn cow(t: &Tensor) -> Option<Tensor> {
    let flat = Layout::contiguous(&[t.storage_len()]);
    let data = t.storage().cast("copy", &flat, t.dtype(), &flat).ok()?;
    Some(Tensor::from_storage(data, t.layout()))
}

/// The epilogue's write-back: `src`'s whole storage over `dst`'s, which
/// have one dtype and length, with one version bump, as
/// `dst.storage_as_1d().copy_(&src.storage_as_1d())` under `no_grad` does.
/// `false`: not two distinct storages of one dtype, device and length;
/// nothing was written.
pub(crate) fn copy_storage(dst: &Tensor, src: &Tensor) -> bool {
    let (ds, ss) = (dst.storage(), src.storage());
    if dst.shares_storage_with(src) || ds.len() != ss.len() || ds.dtype() != ss.dtype() || ds.device() != ss.device() {
        return false;
    }
    let flat = Layout::contiguous(&[ds.len()]);
    if ss.copy_into("copy_", &flat, ds, &flat).is_err() {
        return false;
    }
    ds.bump_version();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::dispatch::exec_node;
    use crate::tensor::NoGradGuard;
    use aot_ir::ValueId;

    /// The arguments of a binary op on values 0 and 1.
    fn args() -> [IrArg; 2] {
        [IrArg::Tensor(ValueId(0)), IrArg::Tensor(ValueId(1))]
    }

    fn f32s(n: usize, seed: f32) -> Tensor {
        let v: Vec<f32> = (0..n).map(|i| seed + i as f32 * 0.37 - 1.5).collect();
        Tensor::from_vec(v, &[n], &crate::Device::Cpu).unwrap()
    }

    /// Everything a caller can observe of a result.
    fn observed(t: &Tensor) -> (Vec<usize>, Vec<usize>, usize, DType, Vec<f64>, bool, u64) {
        (t.shape(), t.stride(), t.storage_offset(), t.dtype(), t.to_vec::<f64>().unwrap(), t.requires_grad(), t.version())
    }

    /// The direct kernel and the eager op agree on the result, on the
    /// receiver afterwards and on its version counter.
    fn agrees(op: OpKind, a: &Tensor, b: &Tensor) {
        let _no_grad = NoGradGuard::new();
        let dup = |t: &Tensor| t.storage_as_1d().copy().unwrap().alias_with_layout(t.layout());
        let (a2, b2) = (dup(a), dup(b));
        let direct = binary(op, &args(), &[Some(a.clone()), Some(b.clone())]).expect("qualifies");
        let eager = exec_node(op, &args(), &[Some(a2.clone()), Some(b2.clone())][..], &[]).unwrap();
        assert_eq!(observed(&direct), observed(&eager), "{op:?}");
        assert_eq!(observed(a), observed(&a2), "{op:?}: receiver");
    }

    #[test]
    fn direct_kernels_compute_what_eager_computes() {
        let big = f32s(40, 0.5);
        let shapes: [(&[usize], &[usize], usize); 4] =
            [(&[4], &[1], 0), (&[2, 1, 3], &[3, 7, 1], 5), (&[2, 3], &[3, 1], 9), (&[1], &[1], 39)];
        for op in [
            OpKind::Add,
            OpKind::Sub,
            OpKind::Mul,
            OpKind::Div,
            OpKind::AddInplace,
            OpKind::SubInplace,
            OpKind::MulInplace,
            OpKind::DivInplace,
        ] {
            for (shape, stride, offset) in shapes {
                let a = f32s(40, 2.0).as_strided(shape, stride, offset).unwrap();
                let b = big.as_strided(shape, stride, 1).unwrap();
                agrees(op, &a, &b);
                agrees(op, &a.to_dtype(DType::F64).unwrap(), &b.to_dtype(DType::F64).unwrap());
            }
        }
        // Out of place: a tensor with itself, and two views of one storage.
        let a = f32s(8, 1.0);
        agrees(OpKind::Mul, &a, &a);
        agrees(OpKind::Sub, &a.narrow(0, 0, 4).unwrap(), &a.narrow(0, 4, 4).unwrap());
    }

    #[test]
    fn other_nodes_run_eagerly() {
        let a = f32s(6, 0.0).view(&[2, 3]).unwrap();
        let env = |b: Tensor| [Some(a.clone()), Some(b)];
        let _no_grad = NoGradGuard::new();
        let cases = [
            ("broadcast", OpKind::Add, f32s(3, 1.0)),
            ("transposed", OpKind::Add, f32s(6, 1.0).view(&[3, 2]).unwrap().t().unwrap()),
            ("mixed dtypes", OpKind::Mul, f32s(6, 1.0).view(&[2, 3]).unwrap().to_dtype(DType::F64).unwrap()),
            ("integers", OpKind::Add, a.to_dtype(DType::I64).unwrap()),
            ("in place over its own storage", OpKind::AddInplace, a.clone()),
            ("not an arithmetic op", OpKind::Maximum, a.clone()),
        ];
        for (what, op, b) in cases {
            let env = env(b);
            assert!(binary(op, &args(), &env).is_none(), "{what}");
        }
        // A large op runs the eager kernel (which uses every thread).
        let big = f32s(crate::backend::PAR_MIN, 0.0);
        assert!(binary(OpKind::Add, &args(), &[Some(big.clone()), Some(big.clone())]).is_none(), "large");
        let small = big.narrow(0, 0, crate::backend::PAR_MIN as i64 - 1).unwrap();
        assert!(binary(OpKind::Add, &args(), &[Some(small.clone()), Some(small)]).is_some(), "just below");
        drop(_no_grad);
        // With grad mode on the eager op records history.
        assert!(binary(OpKind::Add, &args(), &env(a.clone())).is_none(), "grad mode on");
    }

    /// A deferred write's checks give the same runs from the geometry the
    /// guard key read as from the layouts, refuse the same operands, and
    /// the write they allow computes what `add_` computes.
    #[test]
    fn deferred_write_checks_agree_with_the_layouts() {
        let _no_grad = NoGradGuard::new();
        let geom = |t: &Tensor| Geom::of(&t.layout(), t.storage_len());
        let a = f32s(12, 1.0).narrow(0, 2, 6).unwrap().view(&[2, 3]).unwrap();
        let b = f32s(6, 4.0).view(&[2, 3]).unwrap();
        let (ga, gb) = (geom(&a).unwrap(), geom(&b).unwrap());
        let w = inplace_runs(OpKind::AddInplace, &a, &b).unwrap();
        assert_eq!(inplace_runs_of(OpKind::AddInplace, &a, ga, &b, gb), Some(w));
        let expect: Vec<f32> = a.to_vec::<f32>().unwrap().iter().zip(b.to_vec::<f32>().unwrap()).map(|(x, y)| x + y).collect();
        let v = a.version();
        assert!(write_checked(&w, &a, &b));
        assert_eq!((a.to_vec::<f32>().unwrap(), a.version()), (expect, v + 1));
        // Refused alike: another shape of as many elements, a dtype pair,
        // an out-of-place op, and one storage on both sides.
        let flat = f32s(6, 0.0).view(&[3, 2]).unwrap();
        let wide = b.to_dtype(DType::F64).unwrap();
        let cases = [(OpKind::AddInplace, &flat), (OpKind::MulInplace, &wide), (OpKind::Add, &b), (OpKind::SubInplace, &a)];
        for (op, o) in cases {
            assert!(inplace_runs(op, &a, o).is_none(), "{op:?}");
            assert!(inplace_runs_of(op, &a, ga, o, geom(o).unwrap()).is_none(), "{op:?}");
        }
        // No geometry for what the checks do not take.
        assert!(geom(&a.t().unwrap()).is_none(), "transposed");
        assert!(geom(&f32s(4, 0.0).view(&[1, 1, 1, 1, 4]).unwrap()).is_none(), "5 dims");
        assert!(geom(&Tensor::zeros(&[1 << 15], DType::F32, &crate::Device::Cpu).unwrap()).is_none(), "a dim of 2^15");
        assert!(geom(&Tensor::zeros(&[0], DType::F32, &crate::Device::Cpu).unwrap()).is_none(), "empty");
        // Runs that no longer fit the storage are refused, not written.
        let short = f32s(2, 0.0);
        let v = short.version();
        assert!(!write_checked(&w, &short, &b));
        assert_eq!(short.version(), v);
    }

    #[test]
    fn plan_copies_match_the_eager_copies() {
        let _no_grad = NoGradGuard::new();
        let t = f32s(10, 3.0).narrow(0, 2, 5).unwrap();
        let c = cow(&t).unwrap();
        let eager = t.storage_as_1d().copy().unwrap().alias_with_layout(t.layout());
        assert_eq!(observed(&c), observed(&eager));
        assert!(!c.shares_storage_with(&t));
        assert_eq!(c.storage_len(), t.storage_len());
        // The write-back copies whole storages and bumps the version once.
        let dst = f32s(10, 0.0);
        let before = dst.version();
        c.mul_(2.0).unwrap();
        assert!(copy_storage(&dst, &c));
        assert_eq!(dst.version(), before + 1);
        assert_eq!(dst.to_vec::<f32>().unwrap(), c.storage_as_1d().to_vec::<f32>().unwrap());
        assert!(!copy_storage(&dst, &dst.narrow(0, 1, 2).unwrap()), "one storage");
        assert!(!copy_storage(&dst, &f32s(9, 0.0)), "lengths differ");
        assert!(!copy_storage(&dst, &dst.to_dtype(DType::F64).unwrap()), "dtypes differ");
        assert_eq!(dst.version(), before + 1, "a refused write-back writes nothing");
    }
}
