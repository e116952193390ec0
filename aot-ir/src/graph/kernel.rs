//! The kernel stage's unit: a [`Kernel`], a group of nodes that one
//! generated loop nest computes, reading each input once and writing each
//! result once: elementwise nodes, and at most one reduction
//! ([`is_reduction`]).
//!
//! A kernel is a node of the one IR: an [`Op::Kernel`] node whose
//! arguments are the kernel's tensor inputs and whose value is its result.
//! Its body is again [`Node`]s, over the kernel's own values: first one
//! [`Op::Load`] per input, then DSL ops (elementwise ops and at most one
//! reduction), whose scalar arguments are as in the graph (literals and
//! scalar parameters), and `cast_like` primitives ([`is_elementwise_prim`]). The
//! result is the body value [`Kernel::out`]; a multi-output kernel (no
//! reduction) stores further values, [`Kernel::extra_outs`], each to an
//! output of its own at the same index (`store %5, %7`): an optimizer
//! step's new parameter and new momentum from one pass
//! (`kernel::reinplace`). The CPU backend evaluates a
//! body block by block; the C renderer emits one statement per body node.
//!
//! A body with a reduction node (`sum_dim`, `mean_dim`, `amax_dim`,
//! `var_dim`, `sum`, `mean`, `softmax`, `log_softmax`, with its dims as
//! in the graph) splits in two ([`Kernel::prologue`]): the **prologue**,
//! the nodes the reduction's operand is computed from, runs over the
//! reduction's input shape; the **epilogue**, every other op, runs on the
//! reduced value (or, for softmax and a `keepdim` reduction broadcast back
//! against its rows, over the input's rows). The kernel walks the input
//! row by row: a row is the elements one output of the reduction folds
//! (the softmax dim's elements for softmax). The C renderer emits such a
//! kernel as a block (or warp) reduction per row (`render::reduce`).
//!
//! Shapes, strides and dtypes are not part of a kernel: they are read from
//! the inputs at run time (the guard key holds neither shapes nor, for
//! every stage, dtypes), so one kernel serves every call of its
//! specialisation.
//!
//! This module holds the data and which nodes may be fused (`fusible`),
//! since a node embeds a kernel; the `kernel` module schedules and renders
//! kernels, `print` lists them.
//!
//! ```text
//! kernel fused_mul_add_tanh_0(in0) {
//!     %0 = load(in0)
//!     %1 = mul(%0, 1.5)
//!     %2 = add(%1, 0.5)
//!     %3 = tanh(%2)
//!     store %3
//! }
//!
//! kernel fused_mul_sum_dim_neg_1(in0, in1) {
//!     %0 = load(in0)
//!     %1 = load(in1)
//!     %2 = mul(%0, %1)
//!     %3 = sum_dim(%2, [1], false)
//!     %4 = neg(%3)
//!     store %4
//! }
//! ```

use super::node::{Node, Op};
use super::prim::is_elementwise_prim;
use crate::op::{is_elementwise, is_reduction, OpKind};
use crate::types::ValueId;
use serde::{Deserialize, Serialize};

/// One generated kernel (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// Unique in its stage; the entry point of its generated source.
    pub name: String,
    /// `load`s first, then elementwise DSL ops and at most one reduction.
    pub body: Vec<Node>,
    /// How many values the body defines (`%0 .. %{num_values - 1}`).
    pub num_values: usize,
    /// The body value the kernel stores.
    pub out: ValueId,
    /// Further body values it stores, each to an output of its own, after
    /// [`out`](Self::out) (a multi-output kernel: elementwise only, every
    /// output of the one shape the kernel iterates over).
    #[serde(default)]
    pub extra_outs: Vec<ValueId>,
    /// Per body value, the value of the stage it stands for (an input, or
    /// a fused node's result), so that an error inside the kernel names
    /// what the stage's node would have named.
    pub stage_values: Vec<ValueId>,
}

impl Kernel {
    /// Every stored body value: [`out`](Self::out), then
    /// [`extra_outs`](Self::extra_outs).
    pub fn outs(&self) -> impl Iterator<Item = ValueId> + '_ {
        std::iter::once(self.out).chain(self.extra_outs.iter().copied())
    }

    /// How many tensor inputs the kernel loads.
    pub fn num_inputs(&self) -> usize {
        self.body.iter().filter(|n| matches!(n.op, Op::Load(_))).count()
    }

    /// The DSL ops of the body, in order.
    pub fn ops(&self) -> impl Iterator<Item = OpKind> + '_ {
        self.body.iter().filter_map(Node::kind)
    }

    /// The index in [`body`](Self::body) of the kernel's reduction node,
    /// if it has one (the verifier admits at most one).
    pub fn reduction(&self) -> Option<usize> {
        self.body.iter().position(|n| n.kind().is_some_and(is_reduction))
    }

    /// Per body node: whether it belongs to the reduction's prologue (the
    /// reduction's operand or a node it is computed from, loads included).
    /// All `false` without a reduction.
    pub fn prologue(&self) -> Vec<bool> {
        let mut pro = vec![false; self.body.len()];
        let Some(r) = self.reduction() else { return pro };
        // Values the prologue needs, walked backwards from the reduction.
        let mut needed = vec![false; self.num_values];
        for v in self.body[r].tensor_args() {
            if let Some(x) = needed.get_mut(v.index()) {
                *x = true;
            }
        }
        for i in (0..r).rev() {
            let n = &self.body[i];
            if n.out.is_some_and(|o| needed.get(o.index()).copied().unwrap_or(false)) {
                pro[i] = true;
                for v in n.tensor_args() {
                    if let Some(x) = needed.get_mut(v.index()) {
                        *x = true;
                    }
                }
            }
        }
        pro
    }
}

/// Whether the scheduler (`kernel::schedule`) fuses `n` into a kernel (an elementwise op or a
/// reduction with a result).
pub(crate) fn fusible(n: &Node) -> bool {
    let op_ok = match &n.op {
        Op::Dsl { op, check_alias: None } => is_elementwise(*op) || is_reduction(*op),
        Op::Prim(p) => is_elementwise_prim(p),
        _ => false,
    };
    op_ok && n.out.is_some()
}
