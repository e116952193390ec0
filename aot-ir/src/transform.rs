//! Passes that rewrite a graph into another form (PyTorch's
//! `traced_function_transforms.py`). Every form holds the one node type
//! ([`crate::graph::Node`]) with the primitives its stage admits
//! (`verify::Stage`); each pass's result is verified after it, and every
//! form prints through the one node printer of `print` (the containers'
//! heads and tails in `listing`).
//!
//! - [`functionalize`](mod@functionalize): views and in-place ops become immutable values,
//!   scatters and view replay; mutated inputs become outputs.
//! - [`joint`]: the joint forward+backward graph over the functional graph
//!   (PyTorch's `create_joint`), with its tangent mask.
//! - [`grad_rules`]: the one table of gradient rules, generic over a
//!   builder: the joint graph is built from them, and eager backward
//!   evaluates them on tensors. Also the backward-only primitives they use.
//! - [`emit`]: the builder that emits a rule's values as joint nodes;
//!   `cse` the structural key under which it emits identical pure nodes
//!   once (common-subexpression elimination).
//! - [`inline`]: the calls of a traced source graph (`graph::call`)
//!   replaced by the callees' graphs, before any other pass sees it.
//! - [`unroll`]: a loop whose bounds are known only at call time, unrolled
//!   for one call's trip count.
//! - [`partition`]: the joint graph split into a forward and a backward
//!   graph (min-cut over saved bytes, recomputing cheap values).
//! - `checks` and `listing`: each result's checker (after the one
//!   verifier's per-stage node checks, `verify::Stage`) and listing
//!   (around the one node printer, `print::write_nodes`).

pub mod functionalize;

pub use functionalize::{functionalize, ChainStep, FOutput, FunctionalGraph, InputGroups};
mod checks;
mod cse;
pub mod emit;
pub mod grad_rules;
pub mod inline;
pub mod joint;
mod listing;
pub mod partition;
pub mod unroll;
