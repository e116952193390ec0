//! Direct kernels for the commonest steps of a call that records no
//! history, so that a small call does not pay an eager op's fixed cost
//! (broadcasting, type promotion, layout choice, autograd checks, and the
//! allocations that go with them) for work that needs none of it:
//!
//! - `add`/`sub`/`mul`/`div` and their in-place forms on two f32 or f64
//!   tensors of one shape, both dense row-major;
//! - the plan's copies: a `Cow` of an input's storage, and the epilogue's
//!   write-back of a final version over the caller's storage.
//!
//! Each computes exactly what the eager op computes: the same arithmetic
//! in the same dtype, a contiguous result, one version bump per write.
//! A step that does not qualify returns `None` and runs the eager op, which
//! also reports every error; nothing here fails on user input.

use crate::autograd::is_grad_enabled;
use crate::device::Device;
use crate::dtype::DType;
use crate::layout::Layout;
use crate::storage::{try_vec, CpuStorage, Storage, StorageData};
use crate::tensor::Tensor;
use aot_ir::{Arg as IrArg, Node, OpKind};
use std::sync::RwLockReadGuard;

#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

impl Arith {
    /// The arithmetic of `op`, and whether it writes its receiver.
    fn of(op: OpKind) -> Option<(Arith, bool)> {
        Some(match op {
            OpKind::Add => (Arith::Add, false),
            OpKind::Sub => (Arith::Sub, false),
            OpKind::Mul => (Arith::Mul, false),
            OpKind::Div => (Arith::Div, false),
            OpKind::AddInplace => (Arith::Add, true),
            OpKind::SubInplace => (Arith::Sub, true),
            OpKind::MulInplace => (Arith::Mul, true),
            OpKind::DivInplace => (Arith::Div, true),
            _ => return None,
        })
    }

    fn f<T: Num>(self) -> fn(T, T) -> T {
        match self {
            Arith::Add => |x, y| x + y,
            Arith::Sub => |x, y| x - y,
            Arith::Mul => |x, y| x * y,
            Arith::Div => |x, y| x / y,
        }
    }

    /// `x[i] = x[i] op y[i]`; the slices have one length.
    fn assign<T: Num>(self, x: &mut [T], y: &[T]) {
        let f = self.f::<T>();
        for (x, &y) in x.iter_mut().zip(y) {
            *x = f(*x, y);
        }
    }

    /// `x[i] op y[i]` in a new buffer; `None` if it cannot be allocated
    /// (the eager op then reports the error).
    fn collect<T: Num>(self, x: &[T], y: &[T]) -> Option<Vec<T>> {
        let f = self.f::<T>();
        let mut out = try_vec("binary", x.len()).ok()?;
        out.extend(x.iter().zip(y).map(|(&x, &y)| f(x, y)));
        Some(out)
    }
}

/// The element types with direct kernels.
trait Num:
    Copy + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self> + std::ops::Div<Output = Self>
{
}
impl Num for f32 {}
impl Num for f64 {}

/// The tensor operands of a two-tensor node.
fn operands<'a>(node: &Node, env: &'a [Option<Tensor>]) -> Option<(&'a Tensor, &'a Tensor)> {
    let t = |i: usize| match node.args.get(i)? {
        IrArg::Tensor(v) => env.get(v.index())?.as_ref(),
        _ => None,
    };
    (node.args.len() == 2).then_some(())?;
    Some((t(0)?, t(1)?))
}

/// The element range of a dense row-major layout inside a buffer of `len`.
fn dense_range(l: &Layout, len: usize) -> Option<std::ops::Range<usize>> {
    let n = l.numel();
    let end = l.offset.checked_add(n)?;
    (n > 0 && l.is_contiguous() && end <= len).then_some(l.offset..end)
}

/// The CPU buffer of a storage, read-locked.
fn cpu_data(s: &Storage) -> Option<(RwLockReadGuard<'_, StorageData>, usize)> {
    let g = s.read();
    #[allow(irrefutable_let_patterns)] // refutable with the `cuda` feature
    let StorageData::Cpu(c) = &*g
    else {
        return None;
    };
    let len = c.len();
    Some((g, len))
}

fn as_cpu(g: &StorageData) -> Option<&CpuStorage> {
    #[allow(irrefutable_let_patterns)] // refutable with the `cuda` feature
    let StorageData::Cpu(c) = g
    else {
        return None;
    };
    Some(c)
}

/// Runs `node` directly when it is an out-of-place or in-place
/// add/sub/mul/div of two f32 or f64 tensors of one shape, both dense,
/// and grad mode is off. In-place: the target must not share its
/// storage with the operand. `None`: not such a node; run it eagerly.
pub(crate) fn binary(node: &Node, env: &[Option<Tensor>]) -> Option<Tensor> {
    let (a, b) = operands(node, env)?;
    binary_on(node.op, a, b)
}

/// Whether [`binary_on`] runs `op` on `target` and `operand` (an in-place
/// op): the same checks, without the write.
pub(crate) fn inplace_ready(op: OpKind, target: &Tensor, operand: &Tensor) -> bool {
    let qualifies = matches!(Arith::of(op), Some((_, true)))
        && !is_grad_enabled()
        && target.dtype() == operand.dtype()
        && matches!(target.dtype(), DType::F32 | DType::F64)
        && target.device() == Device::Cpu
        && operand.device() == Device::Cpu
        && !target.shares_storage_with(operand);
    if !qualifies {
        return false;
    }
    let (st, so) = (target.state(), operand.state());
    st.layout.shape == so.layout.shape
        && dense_range(&st.layout, target.storage_len()).is_some()
        && dense_range(&so.layout, operand.storage_len()).is_some()
}

/// [`binary`] of an op and its two operands.
pub(crate) fn binary_on(op: OpKind, a: &Tensor, b: &Tensor) -> Option<Tensor> {
    let (arith, inplace) = Arith::of(op)?;
    if is_grad_enabled() {
        return None;
    }
    if a.dtype() != b.dtype() || inplace && a.shares_storage_with(b) {
        return None;
    }
    let (sa, sb) = (a.state(), (!a.same_tensor(b)).then(|| b.state()));
    let (la, lb) = (&sa.layout, sb.as_ref().map_or(&sa.layout, |s| &s.layout));
    if la.shape != lb.shape {
        return None;
    }
    if inplace {
        let (gb, len_b) = cpu_data(b.storage())?;
        let rb = dense_range(lb, len_b)?;
        let mut ga = a.storage().write();
        #[allow(irrefutable_let_patterns)] // refutable with the `cuda` feature
        let StorageData::Cpu(ca) = &mut *ga
        else {
            return None;
        };
        let ra = dense_range(la, ca.len())?;
        match (ca, as_cpu(&gb)?) {
            (CpuStorage::F32(x), CpuStorage::F32(y)) => arith.assign(&mut x[ra], &y[rb]),
            (CpuStorage::F64(x), CpuStorage::F64(y)) => arith.assign(&mut x[ra], &y[rb]),
            _ => return None,
        }
        drop(ga);
        a.storage().bump_version();
        return Some(a.clone());
    }
    let (ga, len_a) = cpu_data(a.storage())?;
    let ra = dense_range(la, len_a)?;
    // The same storage (a tensor with itself): one lock.
    let gb = if a.shares_storage_with(b) { None } else { Some(cpu_data(b.storage())?) };
    let (cb, rb) = match &gb {
        Some((g, len)) => (as_cpu(g)?, dense_range(lb, *len)?),
        None => (as_cpu(&ga)?, dense_range(lb, len_a)?),
    };
    let data = match (as_cpu(&ga)?, cb) {
        (CpuStorage::F32(x), CpuStorage::F32(y)) => CpuStorage::F32(arith.collect(&x[ra], &y[rb])?),
        (CpuStorage::F64(x), CpuStorage::F64(y)) => CpuStorage::F64(arith.collect(&x[ra], &y[rb])?),
        _ => return None,
    };
    let layout = Layout::contiguous(&la.shape);
    Some(Tensor::from_cpu_layout(data, layout))
}

/// Runs `$body` with `$x`, `$y` bound to the typed vectors of two
/// `CpuStorage`s of one dtype; `None` when their dtypes differ.
macro_rules! same_dtype {
    ($a:expr, $b:expr, $x:ident, $y:ident => $body:expr) => {
        match ($a, $b) {
            (CpuStorage::F32($x), CpuStorage::F32($y)) => Some($body),
            (CpuStorage::F64($x), CpuStorage::F64($y)) => Some($body),
            (CpuStorage::F16($x), CpuStorage::F16($y)) => Some($body),
            (CpuStorage::BF16($x), CpuStorage::BF16($y)) => Some($body),
            (CpuStorage::I64($x), CpuStorage::I64($y)) => Some($body),
            (CpuStorage::Bool($x), CpuStorage::Bool($y)) => Some($body),
            _ => None,
        }
    };
}

/// A `Cow`: a copy of `t`'s whole storage, viewed with `t`'s layout and
/// without history, as `t.storage_as_1d().copy()` aliased with
/// `t.layout()` is. `None`: not a CPU storage, or no memory for the copy.
pub(crate) fn cow(t: &Tensor) -> Option<Tensor> {
    let data = {
        let g = t.storage().read();
        let c = as_cpu(&g)?;
        crate::storage::dispatch_cpu!(c, v => {
            let mut out = try_vec("copy", v.len()).ok()?;
            out.extend_from_slice(v);
            crate::storage::CpuElem::into_storage(out)
        })
    };
    Some(Tensor::from_cpu_layout(data, t.layout()))
}

/// The epilogue's write-back: `src`'s whole storage over `dst`'s, which
/// have one dtype and length, with one version bump, as
/// `dst.storage_as_1d().copy_(&src.storage_as_1d())` under `no_grad` does.
/// `false`: not two distinct CPU storages of one dtype and length; nothing
/// was written.
pub(crate) fn copy_storage(dst: &Tensor, src: &Tensor) -> bool {
    if dst.shares_storage_with(src) {
        return false;
    }
    let gs = src.storage().read();
    let mut gd = dst.storage().write();
    #[allow(irrefutable_let_patterns)] // refutable with the `cuda` feature
    let (Some(cs), StorageData::Cpu(cd)) = (as_cpu(&gs), &mut *gd) else {
        return false;
    };
    if cd.len() != cs.len() || same_dtype!(cd, cs, d, s => d.copy_from_slice(s)).is_none() {
        return false;
    }
    drop(gd);
    dst.storage().bump_version();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::NoGradGuard;
    use crate::compiled::interp::{exec, Ctx};
    use aot_ir::{SpanId, ValueId};

    fn node(op: OpKind) -> Node {
        Node {
            op,
            args: vec![IrArg::Tensor(ValueId(0)), IrArg::Tensor(ValueId(1))],
            out: Some(ValueId(2)),
            no_grad: false,
            span: SpanId(0),
        }
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
        let n = node(op);
        let dup = |t: &Tensor| t.storage_as_1d().copy().unwrap().alias_with_layout(t.layout());
        let (a2, b2) = (dup(a), dup(b));
        let direct = binary(&n, &[Some(a.clone()), Some(b.clone())]).expect("qualifies");
        let eager = exec(&Ctx { node: &n, env: &[Some(a2.clone()), Some(b2.clone())], scalars: &[] }).unwrap();
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
            assert!(binary(&node(op), &env).is_none(), "{what}");
        }
        drop(_no_grad);
        // With grad mode on the eager op records history.
        assert!(binary(&node(OpKind::Add), &env(a.clone())).is_none(), "grad mode on");
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
