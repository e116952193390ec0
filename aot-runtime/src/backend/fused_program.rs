//! The programs of the kernel stage's kernels as every backend runs them:
//! a fused elementwise kernel ([`Program`] of [`Step`]s) and a reduction
//! with its fused prologue and epilogue ([`ReduceProgram`]). The executor
//! builds them from a kernel (`aot_ir::kernel::Kernel`) and the operands'
//! dtypes; the CPU evaluates them natively (`cpu/fused_elementwise.rs`,
//! `cpu/fused_reduce.rs`) and CUDA renders them.

use crate::dtype::DType;
use aot_ir::OpKind;

/// The second operand of a body op.
#[derive(Clone, Copy, Debug)]
pub enum Rhs {
    None,
    Value(usize),
    Scalar(f64),
}

/// One body op over kernel values: `values[out] = op(values[a], rhs)`,
/// computed in the dtype `compute` (each operand of another dtype is cast
/// to it first, as eager promotes). Comparisons give a bool value; a cast
/// (`op` is `to_dtype`) converts `a` to `compute`; `where_` is
/// `where(values[cond], values[a], rhs)`.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub op: OpKind,
    pub a: usize,
    pub rhs: Rhs,
    pub out: usize,
    pub compute: DType,
    /// `where_`'s condition (a bool value).
    pub cond: Option<usize>,
}

impl Step {
    /// `op(a, rhs)` computed in `compute`.
    pub fn new(op: OpKind, a: usize, rhs: Rhs, out: usize, compute: DType) -> Step {
        Step { op, a, rhs, out, compute, cond: None }
    }
}

/// A kernel ready to run: the values `0..inputs` are the loads, `steps`
/// compute the others, `stored` is the result.
pub struct Program<'a> {
    pub steps: &'a [Step],
    pub num_values: usize,
    pub stored: usize,
    /// Per value, its dtype (a load's is its input's).
    pub dtypes: &'a [DType],
    /// Per input, whether the body reads its elements (an input only a
    /// cast reads the dtype of is not loaded, and its layout is ignored).
    pub read: &'a [bool],
}

/// What the reduction computes per row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowOp {
    Sum,
    Mean,
    Amax,
    /// Dividing by `max(0, N - correction)`.
    Var {
        correction: i64,
    },
    /// Softmax (log-softmax if `log`) of the row.
    Softmax {
        log: bool,
    },
}

/// A reduction kernel ready to run. Values `0..inputs` are the loads.
pub struct ReduceProgram<'a> {
    /// The ops the reduced operand is computed from, over `S`.
    pub prologue: &'a [Step],
    pub op: RowOp,
    /// The reduction's operand and result (kernel values).
    pub arg: usize,
    pub result: usize,
    /// The ops after the reduction.
    pub epilogue: &'a [Step],
    pub num_values: usize,
    pub stored: usize,
    /// Per input: whether the prologue reads it, and whether the epilogue does.
    pub load_pro: &'a [bool],
    pub load_epi: &'a [bool],
    /// Per dim of `S`: whether it is reduced.
    pub reduced: &'a [bool],
    /// Whether the output has `S`'s shape (else one value per row).
    pub rows_out: bool,
}
