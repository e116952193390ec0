//! The one node type of every stage (in the spirit of jaxpr's equations and
//! tinygrad's `UOp`): the source graph, the functional graph, the joint
//! graph and its forward/backward partitions all hold [`Node`]s, and differ
//! only in which primitives ([`Op`]) they admit (`verify::Stage` says
//! which) and in the data their containers carry.
//!
//! - [`Op::Dsl`]: an op of the DSL, as written (`OpKind`). In the source
//!   it may be in place (then the node defines no value); past
//!   functionalization it only computes or views.
//! - [`Op::Primal`]: the base of an input group (PyTorch's primals).
//! - [`Op::Tangent`]: the gradient of a forward output (joint only).
//! - [`Op::Cow`], [`Op::Regen`], [`Op::Mutate`]: what functionalization
//!   introduces: the copy of an input before its first write, a view chain
//!   replayed on a root version, and a write as a new root version
//!   (PyTorch's `*_scatter`).
//! - [`Op::Prim`]: the backward-only primitives of the gradient rules.
//! - [`Op::Kernel`], [`Op::Load`]: the kernel stage: a group of
//!   elementwise nodes computed by one generated kernel, whose body reads
//!   its inputs with `Load` ([`Kernel`]; the `kernel` module builds and
//!   runs them).
//! - [`Op::Call`]: a call of another `#[aot_fn]` function ([`CallSite`]),
//!   in the source as traced only: the runtime inlines the callee's graph
//!   in its place before anything analyses the graph (`transform::inline`).
//!
//! The data a node embeds lives beside it in this module's parent
//! ([`Prim`], [`Kernel`], [`CallSite`]), so the stages that make such
//! nodes build on the node type rather than the reverse.

use super::call::CallSite;
use super::kernel::Kernel;
use super::prim::Prim;
use crate::op::{AliasEffect, OpClass, OpKind};
use crate::types::{Arg, ScalarExpr, SpanId, ValueId};
use serde::{Deserialize, Serialize};

/// One op application: `out = op(args..)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// What the node computes.
    pub op: Op,
    /// Receiver first, then the op's arguments (see [`Op`] for the
    /// primitives' arguments).
    pub args: Vec<Arg>,
    /// The defined value; `None` only for a source in-place op, whose
    /// result is its target ([`Node::target`]) with its identity unchanged.
    pub out: Option<ValueId>,
    /// Inside a `no_grad! { .. }` region (past functionalization also: a
    /// write through a `detach()` alias, invisible to autograd).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_grad: bool,
    /// Where in the user's source the node comes from, for diagnostics.
    pub span: SpanId,
}

/// What a node computes. Arguments are in [`Node::args`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A DSL op, arguments as in the source. `check_alias` (past the
    /// source, for a `reshape`/`contiguous` whose aliasing matters): whether
    /// the plan assumed the result aliases its receiver; the executor
    /// checks it.
    Dsl {
        /// The DSL op applied.
        op: OpKind,
        /// Whether the plan assumed the result aliases its receiver; `None` in
        /// the source and where the aliasing does not matter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check_alias: Option<bool>,
    },
    /// `[]`: the base of input group `.0`, as the runtime provides it.
    Primal(usize),
    /// `[]`: tangent `.0` (the gradient of a forward output).
    Tangent(usize),
    /// `[src]`: a copy of `src`'s whole storage with `src`'s geometry: the
    /// first version of an input group that the graph may write.
    Cow,
    /// `[root]`: the chain replayed on root version `root` (a view).
    Regen(Vec<ChainStep>),
    /// `[root, view, args..]`: the next version of `root`: the in-place
    /// `op` applied to `view` (the region `chain` selects of `root`) with
    /// `args`.
    Mutate {
        /// The in-place DSL op.
        op: OpKind,
        /// The view chain from `root` to the written region.
        chain: Vec<ChainStep>,
    },
    /// A backward-only primitive.
    Prim(Prim),
    /// `[]`, in a kernel body only: the kernel's input `.0`.
    Load(usize),
    /// `[inputs..]`: a generated kernel (the kernel stage; see
    /// [`Kernel`]), computing its body on its inputs.
    Kernel(Box<Kernel>),
    /// `[args..]` (the call's arguments that are not structs, in order):
    /// a call of another `#[aot_fn]` function, which defines the values
    /// [`CallSite::results`] names. Only in a traced source graph; the
    /// runtime inlines it (`transform::inline`).
    Call(Box<CallSite>),
}

impl From<OpKind> for Op {
    fn from(op: OpKind) -> Op {
        Op::Dsl { op, check_alias: None }
    }
}

impl Op {
    /// The name in listings.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Dsl { op, .. } => op.name(),
            Op::Primal(_) => "primal",
            Op::Tangent(_) => "tangent",
            Op::Cow => "copy_storage",
            Op::Regen(_) => "regen",
            Op::Mutate { .. } => "scatter",
            Op::Prim(p) => p.name(),
            Op::Load(_) => "load",
            Op::Kernel(_) => "kernel",
            Op::Call(_) => "call",
        }
    }
}

impl Node {
    /// A node computing `op` on `args` into `out`.
    pub fn new(op: impl Into<Op>, args: Vec<Arg>, out: Option<ValueId>) -> Node {
        Node { op: op.into(), args, out, no_grad: false, span: SpanId(0) }
    }

    /// The DSL op, for [`Op::Dsl`] nodes (every node of the source).
    pub fn kind(&self) -> Option<OpKind> {
        match self.op {
            Op::Dsl { op, .. } => Some(op),
            _ => None,
        }
    }

    /// Whether this is a DSL node computing `op`.
    pub fn is(&self, op: OpKind) -> bool {
        self.kind() == Some(op)
    }

    /// The value the node defines. Past the source every node defines one
    /// (the verifier checks); a source in-place op answers an id that
    /// names no value.
    pub fn value(&self) -> ValueId {
        self.out.unwrap_or(ValueId(u32::MAX))
    }

    /// The receiver (the first argument), when it is a tensor.
    pub fn receiver(&self) -> Option<ValueId> {
        self.args.first().and_then(Arg::as_tensor)
    }

    /// The tensor a source in-place op writes; `None` for other nodes.
    pub fn target(&self) -> Option<ValueId> {
        if self.kind().is_some_and(OpKind::is_inplace) {
            self.receiver()
        } else {
            None
        }
    }

    /// The value this node's expression evaluates to: its output, or for an
    /// in-place op its target.
    pub fn result(&self) -> Option<ValueId> {
        self.out.or_else(|| self.target())
    }

    /// Every tensor the node reads, receiver included.
    pub fn tensor_args(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().filter_map(Arg::as_tensor)
    }

    /// Every scalar expression the node reads (scalars and list elements).
    pub fn scalar_args(&self) -> impl Iterator<Item = &ScalarExpr> + '_ {
        self.args.iter().flat_map(|a| match a {
            Arg::Scalar(s) => std::slice::from_ref(s).iter(),
            Arg::Ints(v) => v.iter(),
            _ => [].iter(),
        })
    }

    /// Whether gradients can flow through this DSL node at all.
    pub fn is_differentiable(&self) -> bool {
        let Some(op) = self.kind() else { return false };
        if self.no_grad || !op.is_differentiable() {
            return false;
        }
        match (op, self.args.get(1)) {
            (OpKind::ToDtype, Some(Arg::DType(d))) => d.is_float(),
            _ => true,
        }
    }

    /// The class of a DSL node; a primitive counts as what it does to
    /// storage (`regen` views, `scatter` writes a new version, the others
    /// compute).
    pub fn class(&self) -> OpClass {
        match &self.op {
            Op::Dsl { op, .. } => op.class(),
            Op::Regen(_) => OpClass::View,
            Op::Mutate { .. } => OpClass::DataMutation,
            _ => OpClass::Compute,
        }
    }

    /// How the result relates to the receiver's storage: the DSL op's
    /// effect; `regen` views, the other primitives make new values.
    pub fn alias_effect(&self) -> AliasEffect {
        match &self.op {
            Op::Dsl { op, .. } => op.alias_effect(),
            Op::Regen(_) => AliasEffect::View,
            _ => AliasEffect::Fresh,
        }
    }

    /// Whether argument `i` is read for its shape and dtype only.
    pub fn is_meta_arg(&self, i: usize) -> bool {
        match &self.op {
            Op::Prim(p) => p.is_meta_arg(i),
            // a factory's receiver gives the result's device only
            Op::Dsl { op: OpKind::ZerosLike | OpKind::OnesLike | OpKind::FullLike | OpKind::Arange, .. } => i == 0,
            Op::Dsl { op: OpKind::ViewAs, .. } => i == 1,
            _ => false,
        }
    }

    /// The tensors whose data the node reads.
    pub fn data_uses(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().enumerate().filter(|(i, _)| !self.is_meta_arg(*i)).filter_map(|(_, a)| a.as_tensor())
    }

    /// Elementwise or view-like: cheap to recompute rather than save.
    pub fn is_cheap(&self) -> bool {
        match &self.op {
            Op::Primal(_) | Op::Tangent(_) | Op::Cow | Op::Mutate { .. } | Op::Call(_) => false,
            Op::Regen(_) | Op::Kernel(_) => true,
            Op::Load(_) => false,
            Op::Prim(p) => p.is_cheap(),
            Op::Dsl { op, .. } => {
                !op.is_random()
                    && !matches!(op, OpKind::Matmul | OpKind::Mm | OpKind::Bmm | OpKind::Softmax | OpKind::LogSoftmax | OpKind::VarDim)
                    // scans over a dim and the losses: not worth recomputing
                    && !matches!(
                        op,
                        OpKind::Cumsum | OpKind::MaxDim | OpKind::MinDim | OpKind::Argmax | OpKind::Argmin | OpKind::CrossEntropy | OpKind::NllLoss
                    )
            }
        }
    }
}

/// One step from a root to a value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ChainStep {
    /// `as_strided` to the geometry the argument at this parameter position
    /// has at call time: regenerates an aliased input from its group's base.
    ArgGeometry(usize),
    /// A view op with its arguments after the receiver.
    View {
        /// The view op.
        op: OpKind,
        /// Its arguments after the receiver.
        args: Vec<Arg>,
    },
}
