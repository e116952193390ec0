//! The calls of a traced source graph: a call of another `#[aot_fn]`
//! function ([`CallSite`], held by an [`Op::Call`](super::Op::Call) node),
//! and a loop whose bounds are known only at call time ([`LoopBody`], a
//! graph of its own). `transform::inline` replaces the calls by the
//! callees' graphs and `transform::unroll` unrolls the loops; the types
//! live here because a node holds them and a loop body holds a [`Graph`].

use super::Graph;
use crate::types::{Arg, ParamType, ValueId};
use serde::{Deserialize, Serialize};

/// A call of another `#[aot_fn]` function in a traced source graph. The
/// node's arguments are the call's arguments that are not structs, in
/// order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallSite {
    /// The callee as written (`layers::block`), for messages.
    pub callee: String,
    /// The callee's position in the caller's table of callees.
    pub index: usize,
    /// The struct arguments (`&m.blocks[1]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trees: Vec<TreeArg>,
    /// The values the caller binds to the results; `None` for a call
    /// whose value is unused (a statement).
    pub results: Option<Vec<ValueId>>,
    /// Set for a `for` loop whose bounds are known only at call time
    /// (`transform::unroll`): its body, a graph of its own. Such a node's
    /// arguments are the bounds, then one per body parameter after the
    /// loop variable; `callee` names the loop and `index` is unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Box<LoopBody>>,
}

/// A struct argument of a call: a field path of one of the caller's
/// struct parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TreeArg {
    /// Its position among the call's arguments.
    pub pos: usize,
    /// The caller's path to it: `m.blocks.1` (or `m` itself).
    pub path: String,
    /// The type the caller's inputs under that path get.
    pub ty: ParamType,
}

impl CallSite {
    /// The call's arguments in order: the node's argument, or the struct
    /// argument's path. `None` when the positions do not add up.
    pub fn arguments<'a>(&'a self, node_args: &'a [Arg]) -> Option<Vec<CallArg<'a>>> {
        let n = node_args.len() + self.trees.len();
        let mut plain = node_args.iter();
        (0..n)
            .map(|pos| match self.trees.iter().find(|t| t.pos == pos) {
                Some(t) => Some(CallArg::Tree(t)),
                None => plain.next().map(CallArg::Plain),
            })
            .collect()
    }
}

/// One argument of a call.
#[derive(Clone, Copy, Debug)]
pub enum CallArg<'a> {
    /// A tensor or scalar argument, as the node holds it.
    Plain(&'a Arg),
    /// A struct argument: a field path of a caller's struct parameter.
    Tree(&'a TreeArg),
}

/// The body of a loop whose bounds are known only at call time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopBody {
    /// The loop variable's name, for the listing.
    pub var: String,
    /// Its parameters: the loop variable (an `i64`), then one per argument
    /// of the loop node after the bounds. Its outputs: the next values of
    /// the loop-carried parameters, in the order of `carried`.
    pub graph: Graph,
    /// Per output of the body: the body parameter it feeds in the next
    /// iteration (and whose final value is the node's result at the same
    /// position).
    pub carried: Vec<usize>,
}
