//! The kernel stage's unit: a [`Kernel`], a group of elementwise nodes that
//! one generated loop computes, reading each input once and writing its
//! result once.
//!
//! A kernel is a node of the one IR: an [`Op::Kernel`] node whose
//! arguments are the kernel's tensor inputs and whose value is its result.
//! Its body is again [`Node`]s, over the kernel's own values: first one
//! [`Op::Load`] per input, then DSL elementwise ops, whose scalar
//! arguments are as in the graph (literals and scalar parameters), and
//! `cast_like` primitives ([`is_elementwise_prim`]). The
//! result is the body value [`Kernel::out`]. The CPU backend evaluates a
//! body block by block; the C renderer emits one statement per body node.
//!
//! Shapes, strides and dtypes are not part of a kernel: they are read from
//! the inputs at run time (the guard key holds neither shapes nor, for
//! every stage, dtypes), so one kernel serves every call of its
//! specialisation.
//!
//! ```text
//! kernel fused_mul_add_tanh_0(%0) {
//!     %0 = load(0)
//!     %1 = mul(%0, 1.5)
//!     %2 = add(%1, 0.5)
//!     %3 = tanh(%2)
//!     store %3
//! }
//! ```

use crate::node::{Node, Op, Prim};
use crate::op::OpKind;
use crate::print::Names;
use crate::types::ValueId;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One generated kernel (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// Unique in its stage; the entry point of its generated source.
    pub name: String,
    /// `load`s first, then elementwise DSL ops.
    pub body: Vec<Node>,
    /// How many values the body defines (`%0 .. %{num_values - 1}`).
    pub num_values: usize,
    /// The body value the kernel stores.
    pub out: ValueId,
    /// Per body value, the value of the stage it stands for (an input, or
    /// a fused node's result), so that an error inside the kernel names
    /// what the stage's node would have named.
    pub stage_values: Vec<ValueId>,
}

impl Kernel {
    /// How many tensor inputs the kernel loads.
    pub fn num_inputs(&self) -> usize {
        self.body.iter().filter(|n| matches!(n.op, Op::Load(_))).count()
    }

    /// The DSL ops of the body, in order.
    pub fn ops(&self) -> impl Iterator<Item = OpKind> + '_ {
        self.body.iter().filter_map(Node::kind)
    }

    /// The kernel's listing (its source on the CPU, where the backend
    /// evaluates the body itself). `names` names the scalar parameters.
    pub fn listing(&self, names: Names<'_>) -> String {
        let loads: Vec<String> = (0..self.num_inputs()).map(|i| format!("in{i}")).collect();
        let mut s = format!("kernel {}({}) {{\n", self.name, loads.join(", "));
        for n in &self.body {
            let _ = writeln!(s, "    {}", names.node_line(n));
        }
        let _ = writeln!(s, "    store {}\n}}", self.out);
        s
    }
}

/// Whether a kernel body may compute `op`: elementwise ops whose result at
/// each position depends only on their operands at that position, and
/// which draw no random numbers. Comparisons give bool values, `where_`
/// selects, `to_dtype` casts; operands of different dtypes promote as in
/// eager (the runtime decides per call which dtypes it fuses).
pub fn is_elementwise(op: OpKind) -> bool {
    use OpKind::*;
    matches!(
        op,
        Add | Sub
            | Eq
            | Ne
            | Lt
            | Le
            | Gt
            | Ge
            | Where
            | ToDtype
            | Mul
            | Div
            | Pow
            | Maximum
            | Minimum
            | Neg
            | Exp
            | Log
            | Sqrt
            | Rsqrt
            | Abs
            | Sin
            | Cos
            | Tanh
            | Sigmoid
            | Relu
            | Gelu
            | Silu
            | Reciprocal
            | Square
    )
}

/// Whether a kernel body may compute the backward primitive `p`: only
/// `cast_like` (a cast to another value's dtype, which reads nothing of
/// that value but its dtype).
pub fn is_elementwise_prim(p: &Prim) -> bool {
    matches!(p, Prim::CastLike)
}
