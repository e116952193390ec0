//! [`OpKernels`]: a storage primitive that does device work, as the
//! storage notes it for `kernels_for` (`kernel_record::note_op`), with the
//! facts each device's listing needs: the CUDA backend turns it into the
//! sources of the kernels it launches for it (`cuda::op_kernel_sources`),
//! the CPU into the listing of its native kernel ([`OpKernels::cpu_listing`]).
//!
//! Transfers (uploads, downloads, the allocator's zeroing) are no kernels
//! and are not noted.

use super::one_op::{kernel, row_kernel, EagerRow, OneOp};
use super::KernelSource;
use crate::dtype::DType;
use crate::layout::Layout;
use aot_ir::kernel::Kernel;
use aot_ir::print::Names;
use aot_ir::OpKind;

/// A primitive that does device work (see the module doc). `rank` is the
/// rank of the layout a kernel of it runs over (its result's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OpKernels {
    /// [`Backend::unary`](super::Backend::unary) of a buffer of `dtype`.
    Unary {
        op: OpKind,
        dtype: DType,
        rank: usize,
    },
    /// [`Backend::clamp`](super::Backend::clamp), with the bounds given.
    Clamp {
        dtype: DType,
        min: bool,
        max: bool,
        rank: usize,
    },
    /// [`Backend::binary`](super::Backend::binary), or in place
    /// (`binary_assign`) if `assign`.
    Binary {
        op: OpKind,
        lhs: DType,
        rhs: DType,
        rank: usize,
        assign: bool,
    },
    /// [`Backend::binary_scalar`](super::Backend::binary_scalar).
    BinaryScalar {
        op: OpKind,
        dtype: DType,
        scalar_first: bool,
        rank: usize,
    },
    /// [`Backend::where_cond`](super::Backend::where_cond).
    Where {
        cond: DType,
        a: DType,
        b: DType,
        rank: usize,
    },
    /// [`Backend::cast`](super::Backend::cast) and
    /// [`Backend::copy_strided`](super::Backend::copy_strided): the
    /// elements of a buffer of `from` converted to `to` (a copy if equal).
    Cast {
        from: DType,
        to: DType,
        rank: usize,
    },
    /// [`Backend::scatter_add`](super::Backend::scatter_add); `direct`:
    /// one shape, one float dtype, a destination that does not overlap
    /// itself (one in-place add).
    ScatterAdd {
        src: DType,
        dst: DType,
        direct: bool,
        rank: usize,
    },
    /// An eager reduction (`reduce`, `var`, `softmax`) of `layout` over
    /// `dims`.
    Reduce {
        row: EagerRow,
        dtype: DType,
        layout: Layout,
        dims: Vec<usize>,
    },
    /// [`Backend::matmul`](super::Backend::matmul) of 3-D layouts.
    Matmul {
        lhs: DType,
        rhs: DType,
        la: Layout,
        lb: Layout,
    },
    /// [`Backend::gather`](super::Backend::gather) of a buffer of `dtype`.
    Gather {
        dtype: DType,
    },
    /// [`Backend::scatter`](super::Backend::scatter) into a buffer of `dtype`.
    Scatter {
        dtype: DType,
        accumulate: bool,
    },
    Cumsum {
        dtype: DType,
    },
    /// [`Backend::arange`](super::Backend::arange) into a buffer of `dtype`.
    Arange {
        dtype: DType,
    },
    Extreme {
        dtype: DType,
        max: bool,
    },
    NllLoss {
        dtype: DType,
    },
    /// `grad`: the output gradient's dtype; `dtype`: the result's.
    NllLossBackward {
        grad: DType,
        dtype: DType,
    },
}

impl OpKernels {
    /// The one-op kernel of an elementwise primitive (the CUDA backend's
    /// kernel for it, when it has one): the op, its operands' dtypes and
    /// its result's.
    pub(crate) fn one_op(&self) -> Option<(OneOp<'static>, Vec<DType>, DType)> {
        let out_of = |op: OpKind, d: DType| if op.is_comparison() { DType::Bool } else { d };
        Some(match *self {
            OpKernels::Unary { op, dtype, .. } => (OneOp::unary(op, dtype), vec![dtype], dtype),
            OpKernels::Binary { op, lhs, rhs, .. } => (OneOp::binary(op, lhs), vec![lhs, rhs], out_of(op, lhs)),
            OpKernels::BinaryScalar { op, dtype, scalar_first, .. } => {
                (OneOp::with_scalar(op, scalar_first, dtype), vec![dtype], out_of(op, dtype))
            }
            OpKernels::Where { cond, a, b, .. } => (OneOp::where_cond(a), vec![a, cond, b], a),
            OpKernels::Cast { from, to, .. } => (OneOp::cast(to), vec![from], to),
            _ => return None,
        })
    }

    /// The name of the CPU backend's routine, and what it ran on.
    fn cpu_routine(&self) -> (&'static str, String) {
        let d = |d: &DType| d.name();
        match self {
            OpKernels::Unary { op, dtype, rank } => ("unary", format!("{} of {}, rank {rank}", op.name(), d(dtype))),
            OpKernels::Clamp { dtype, min, max, rank } => ("clamp", format!("{}, min {min}, max {max}, rank {rank}", d(dtype))),
            OpKernels::Binary { op, lhs, rhs, rank, assign } => {
                let routine = if *assign { "binary_assign" } else { "binary" };
                (routine, format!("{} of {} and {}, rank {rank}", op.name(), d(lhs), d(rhs)))
            }
            OpKernels::BinaryScalar { op, dtype, rank, .. } => ("binary_scalar", format!("{} of {}, rank {rank}", op.name(), d(dtype))),
            OpKernels::Where { cond, a, b, rank } => ("where_cond", format!("{} ? {} : {}, rank {rank}", d(cond), d(a), d(b))),
            OpKernels::Cast { from, to, rank } => ("copy_strided", format!("{} into {}, rank {rank}", d(from), d(to))),
            OpKernels::ScatterAdd { src, dst, rank, .. } => ("scatter_add", format!("{} into {}, rank {rank}", d(src), d(dst))),
            OpKernels::Reduce { row, dtype, layout, dims } => {
                ("reduce", format!("{row:?} of {} {:?} over {dims:?}", d(dtype), layout.shape))
            }
            OpKernels::Matmul { lhs, la, lb, .. } => ("matmul", format!("gemm of {} {:?} by {:?}", d(lhs), la.shape, lb.shape)),
            OpKernels::Gather { dtype } => ("gather", d(dtype).to_string()),
            OpKernels::Scatter { dtype, accumulate } => ("scatter", format!("{}, accumulate {accumulate}", d(dtype))),
            OpKernels::Cumsum { dtype } => ("cumsum", d(dtype).to_string()),
            OpKernels::Arange { dtype } => ("arange", d(dtype).to_string()),
            OpKernels::Extreme { dtype, max } => ("extreme", format!("{}, max {max}", d(dtype))),
            OpKernels::NllLoss { dtype } => ("nll_loss", d(dtype).to_string()),
            OpKernels::NllLossBackward { grad, dtype } => ("nll_loss_backward", format!("{} into {}", d(grad), d(dtype))),
        }
    }

    /// The CPU's kernel of this primitive: a native routine of the CPU
    /// backend, listed as the one-op kernel it computes where there is one
    /// (named as CUDA names that kernel), else by the routine's name.
    pub(crate) fn cpu_listing(&self) -> KernelSource {
        let (routine, what) = self.cpu_routine();
        let header = format!("// the CPU backend's `{routine}` (native Rust): {what}\n");
        let one: Option<Kernel> = match self {
            OpKernels::Reduce { row, dtype, .. } => row_kernel(*row, *dtype).map(|(k, _, _)| k),
            _ => self.one_op().map(|(one, inputs, out)| kernel(&one, &inputs, out).0),
        };
        match one {
            Some(k) => KernelSource { name: k.name.clone(), source: header + &k.listing(Names::params(&[])) },
            None => KernelSource { name: format!("cpu_{routine}"), source: header },
        }
    }
}
