//! The graph: parameters, SSA values, nodes in program order, outputs.
//!
//! The graph is the program exactly as written: views stay views and in-place
//! ops stay in place, with the receiver as their target. That is the form the
//! static analyses reason about (PyTorch's AOTAutograd collects its metadata
//! from the same, unfunctionalized program) and the eager reference executes.
//! Its nodes are the one [`Node`] type of every stage, here all DSL ops
//! (`verify::Stage::Source`); functionalization is a later pass that
//! produces a new graph of the same nodes.
//!
//! The module holds the IR's data, which is recursive (a loop node holds
//! its body's graph):
//! - [`node`]: the one node type of every stage ([`Node`], [`Op`]);
//! - [`prim`]: the backward-only primitives ([`Prim`]);
//! - [`kernel`]: the kernel stage's [`Kernel`], which a node embeds;
//! - [`call`]: the calls and loops of a traced source ([`CallSite`],
//!   [`LoopBody`]).

pub mod call;
pub mod kernel;
pub mod node;
pub mod prim;

use crate::dtype::DType;
use crate::op::OpKind;
use crate::types::{Arg, ParamType, ScalarExpr, SpanId, ValueId};
pub use call::{CallArg, CallSite, LoopBody, TreeArg};
pub use kernel::Kernel;
pub use node::{ChainStep, Node, Op};
pub use prim::{is_elementwise_prim, needs_geometry, Prim};
use serde::{Deserialize, Serialize};

/// A traced `#[aot_fn]` function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// The function's name, for messages.
    pub name: String,
    /// The parameters in signature order, scalars included.
    pub params: Vec<Param>,
    /// Every tensor value, indexed by [`ValueId`].
    pub values: Vec<ValueInfo>,
    /// The nodes in program order.
    pub nodes: Vec<Node>,
    /// The returned values, in order. A value may appear twice, and a
    /// parameter's value is returned as that very tensor.
    pub outputs: Vec<ValueId>,
    /// The declared return type.
    pub ret: ReturnKind,
    /// The sizes the body reads (`x.size(d)`, `x.shape()[d]`): per entry
    /// the tensor parameter and the dim (negative from the end). A call's
    /// scalar values hold entry `k` at position `params.len() + k`, where
    /// [`ScalarExpr::Size`] reads it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<(usize, i64)>,
    /// The sizes the body reads of tensors it computes (`h.size(-1)`), in
    /// [`ScalarExpr::ValueSize`] order. A call's scalar values hold entry
    /// `k` at `params.len() + sizes.len() + k`; shape propagation computes
    /// them from the arguments' shapes (aot-runtime's `arg/shape_prop.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value_sizes: Vec<ValueSizeRead>,
}

/// One size of a computed tensor that the body reads: `value`'s size at
/// `dim` as it is after the graph's first `at` nodes (an in-place
/// metadata change later in the body does not move it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueSizeRead {
    /// The tensor whose size is read.
    pub value: ValueId,
    /// The dim read (negative counts from the end).
    pub dim: i64,
    /// How many of the graph's nodes run before the read.
    pub at: usize,
}

/// The declared return type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReturnKind {
    /// No return type: `Result<()>`.
    Unit,
    /// `-> Tensor`.
    Single,
    /// `-> (Tensor, ..)` with this many elements.
    Tuple(usize),
}

impl ReturnKind {
    /// How many values the function returns.
    pub fn arity(self) -> usize {
        match self {
            ReturnKind::Unit => 0,
            ReturnKind::Single => 1,
            ReturnKind::Tuple(n) => n,
        }
    }
}

/// One parameter of the signature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// The name as written, for messages and the listing.
    pub name: String,
    /// The declared type.
    pub ty: ParamType,
    /// The tensor value standing for this parameter; `None` for scalars,
    /// which are referenced by position through [`ScalarExpr::Param`].
    pub value: Option<ValueId>,
    /// Where it is declared, for diagnostics.
    pub span: SpanId,
}

/// What the IR knows about one value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueInfo {
    /// The `let` name it was bound to, for the listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The parameter or node that defines it.
    pub def: ValueDef,
}

/// Where a value is defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueDef {
    /// The parameter at this position.
    Param(usize),
    /// The node at this index.
    Node(usize),
}

impl Graph {
    /// The parameter a value stands for, if it is a parameter's value.
    pub fn param_of(&self, v: ValueId) -> Option<usize> {
        match self.values.get(v.index())?.def {
            ValueDef::Param(i) => Some(i),
            ValueDef::Node(_) => None,
        }
    }

    /// The node defining a value, if any.
    pub fn def_node(&self, v: ValueId) -> Option<&Node> {
        match self.values.get(v.index())?.def {
            ValueDef::Node(n) => self.nodes.get(n),
            ValueDef::Param(_) => None,
        }
    }

    /// The parameter types in signature order.
    pub fn param_types(&self) -> Vec<ParamType> {
        self.params.iter().map(|p| p.ty).collect()
    }

    /// A readable name for a value: its `let` name or parameter name, else `%N`.
    pub fn value_name(&self, v: ValueId) -> String {
        match self.values.get(v.index()) {
            Some(ValueInfo { name: Some(n), .. }) => n.clone(),
            Some(ValueInfo { def: ValueDef::Param(i), .. }) => self.params[*i].name.clone(),
            _ => v.to_string(),
        }
    }

    /// Whether any node mutates anything (data or metadata).
    pub fn has_inplace_ops(&self) -> bool {
        self.nodes.iter().any(|n| n.kind().is_some_and(OpKind::is_inplace))
    }
}

/// Builds graphs: used by the macro's lowering, by tests and by passes that
/// rebuild a graph. It assigns value ids and keeps the value table in step.
#[derive(Debug)]
pub struct GraphBuilder {
    graph: Graph,
    no_grad: bool,
}

impl GraphBuilder {
    /// An empty graph named `name`, returning nothing until [`finish`](Self::finish).
    pub fn new(name: impl Into<String>) -> Self {
        GraphBuilder {
            graph: Graph {
                name: name.into(),
                params: Vec::new(),
                values: Vec::new(),
                nodes: Vec::new(),
                outputs: Vec::new(),
                ret: ReturnKind::Unit,
                sizes: Vec::new(),
                value_sizes: Vec::new(),
            },
            no_grad: false,
        }
    }

    /// Adds a parameter. Returns its tensor value for tensor parameters.
    pub fn param(&mut self, name: impl Into<String>, ty: ParamType, span: SpanId) -> Option<ValueId> {
        let index = self.graph.params.len();
        let value = ty.is_tensor().then(|| self.new_value(ValueDef::Param(index), None));
        self.graph.params.push(Param { name: name.into(), ty, value, span });
        value
    }

    /// Adds a tensor parameter (test convenience).
    pub fn tensor(&mut self, name: &str, mutable: bool) -> ValueId {
        let ty = if mutable { ParamType::TensorMut } else { ParamType::Tensor };
        let span = SpanId(self.graph.params.len() as u32);
        self.param(name, ty, span).unwrap_or(ValueId(u32::MAX))
    }

    /// Adds a scalar parameter and returns the expression reading it.
    pub fn scalar(&mut self, name: &str, ty: ParamType) -> ScalarExpr {
        let span = SpanId(self.graph.params.len() as u32);
        self.param(name, ty, span);
        ScalarExpr::Param(self.graph.params.len() - 1)
    }

    /// The expression reading `param`'s size at `dim` at call time (one
    /// entry of [`Graph::sizes`] per distinct pair).
    pub fn size(&mut self, param: usize, dim: i64) -> ScalarExpr {
        let k = match self.graph.sizes.iter().position(|&s| s == (param, dim)) {
            Some(k) => k,
            None => {
                self.graph.sizes.push((param, dim));
                self.graph.sizes.len() - 1
            }
        };
        // `slot` is `k` until `finish` knows the number of parameters
        // (fields of struct parameters are added as the body uses them).
        ScalarExpr::Size { param, dim, slot: k }
    }

    /// The expression reading `value`'s size at `dim` as it is now, after
    /// the nodes appended so far, at call time (one entry of
    /// [`Graph::value_sizes`] per distinct read).
    pub fn value_size(&mut self, value: ValueId, dim: i64) -> ScalarExpr {
        self.value_size_at(value, dim, self.graph.nodes.len())
    }

    /// As [`GraphBuilder::value_size`], as the size is after the first
    /// `at` nodes.
    pub fn value_size_at(&mut self, value: ValueId, dim: i64, at: usize) -> ScalarExpr {
        let read = ValueSizeRead { value, dim, at };
        let k = match self.graph.value_sizes.iter().position(|&r| r == read) {
            Some(k) => k,
            None => {
                self.graph.value_sizes.push(read);
                self.graph.value_sizes.len() - 1
            }
        };
        // `slot` is set by `finish`, which knows how many parameters and
        // parameter sizes come first.
        ScalarExpr::ValueSize { read: k, slot: k }
    }

    /// Sets whether the following nodes are inside a `no_grad` region; returns the previous setting.
    pub fn set_no_grad(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.no_grad, on)
    }

    /// Appends a node. Returns the value the expression evaluates to: the new
    /// output, or the target for in-place ops (`None` only when an in-place
    /// op has no tensor receiver, which the verifier rejects).
    pub fn op(&mut self, op: OpKind, args: Vec<Arg>, span: SpanId) -> Option<ValueId> {
        let index = self.graph.nodes.len();
        let out = (!op.is_inplace()).then(|| self.new_value(ValueDef::Node(index), None));
        self.graph.nodes.push(Node { op: op.into(), args, out, no_grad: self.no_grad, span });
        self.graph.nodes[index].result()
    }

    /// Appends a call of another `#[aot_fn]` function ([`CallSite`]; its
    /// `results` are made here): `results` values, or `None` when the
    /// call's value is unused. Returns the results.
    pub fn call_fn(&mut self, mut site: CallSite, args: Vec<Arg>, results: Option<usize>, span: SpanId) -> Vec<ValueId> {
        let index = self.graph.nodes.len();
        let made: Option<Vec<ValueId>> = results.map(|n| (0..n).map(|_| self.new_value(ValueDef::Node(index), None)).collect());
        site.results = made.clone();
        self.graph.nodes.push(Node { op: Op::Call(Box::new(site)), args, out: None, no_grad: self.no_grad, span });
        made.unwrap_or_default()
    }

    /// Shorthand for a node whose arguments are the receiver plus `rest`.
    pub fn call(&mut self, op: OpKind, recv: ValueId, rest: Vec<Arg>) -> ValueId {
        let mut args = vec![Arg::Tensor(recv)];
        args.extend(rest);
        let span = SpanId(1000 + self.graph.nodes.len() as u32);
        self.op(op, args, span).unwrap_or(recv)
    }

    /// Records the `let` name of a value, for the listing.
    pub fn name_value(&mut self, v: ValueId, name: &str) {
        if let Some(info) = self.graph.values.get_mut(v.index()) {
            if info.name.is_none() && !matches!(info.def, ValueDef::Param(_)) {
                info.name = Some(name.to_string());
            }
        }
    }

    /// The graph so far (for lookups during lowering).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Sets the outputs and the return type, moves the size slots of
    /// [`ScalarExpr::Size`] and [`ScalarExpr::ValueSize`] behind the
    /// parameters, and returns the graph.
    pub fn finish(mut self, outputs: Vec<ValueId>, ret: ReturnKind) -> Graph {
        self.graph.outputs = outputs;
        self.graph.ret = ret;
        if !self.graph.sizes.is_empty() || !self.graph.value_sizes.is_empty() {
            let n = self.graph.params.len();
            let m = n + self.graph.sizes.len();
            for node in &mut self.graph.nodes {
                for arg in &mut node.args {
                    match arg {
                        Arg::Scalar(e) => offset_size_slots(e, n, m),
                        Arg::Ints(items) => items.iter_mut().for_each(|e| offset_size_slots(e, n, m)),
                        Arg::Tensor(_) | Arg::DType(_) => {}
                    }
                }
            }
        }
        self.graph
    }

    fn new_value(&mut self, def: ValueDef, name: Option<String>) -> ValueId {
        let id = ValueId(self.graph.values.len() as u32);
        self.graph.values.push(ValueInfo { name, def });
        id
    }
}

/// Moves the size slots of `e` behind the `n` parameters, and those of
/// computed tensors behind the `m` parameters and parameter sizes.
fn offset_size_slots(e: &mut ScalarExpr, n: usize, m: usize) {
    match e {
        ScalarExpr::Size { slot, .. } => *slot += n,
        ScalarExpr::ValueSize { read, slot } => *slot = m + *read,
        ScalarExpr::Neg(x) | ScalarExpr::Cast(_, x) => offset_size_slots(x, n, m),
        ScalarExpr::Bin(_, a, b) => {
            offset_size_slots(a, n, m);
            offset_size_slots(b, n, m);
        }
        ScalarExpr::Fn(_, args) => args.iter_mut().for_each(|a| offset_size_slots(a, n, m)),
        ScalarExpr::F64(_) | ScalarExpr::I64(_) | ScalarExpr::Bool(_) | ScalarExpr::Param(_) => {}
    }
}

/// Shorthands for building arguments in tests and passes.
pub mod args {
    use super::*;

    /// A tensor argument.
    pub fn t(v: ValueId) -> Arg {
        Arg::Tensor(v)
    }
    /// A float literal.
    pub fn f(x: f64) -> Arg {
        Arg::Scalar(ScalarExpr::F64(x))
    }
    /// An integer literal.
    pub fn i(x: i64) -> Arg {
        Arg::Scalar(ScalarExpr::I64(x))
    }
    /// A bool literal.
    pub fn b(x: bool) -> Arg {
        Arg::Scalar(ScalarExpr::Bool(x))
    }
    /// An integer list of literals.
    pub fn ints(xs: &[i64]) -> Arg {
        Arg::Ints(xs.iter().map(|&x| ScalarExpr::I64(x)).collect())
    }
    /// A dtype argument.
    pub fn dtype(d: DType) -> Arg {
        Arg::DType(d)
    }
}
