//! Passes that rewrite a graph into another form (PyTorch's
//! `traced_function_transforms.py`).
//!
//! - [`functionalize`](mod@functionalize): views and in-place ops become immutable values,
//!   scatters and view replay; mutated inputs become outputs.
//! - [`joint`]: the joint forward+backward graph over the functional graph
//!   (PyTorch's `create_joint`), with its tangent mask.
//! - [`grad_rules`]: the one table of symbolic gradient rules the joint
//!   graph is built from, and the backward-only primitives they use.
//! - [`partition`]: the joint graph split into a forward and a backward
//!   graph (min-cut over saved bytes, recomputing cheap values).

pub mod functionalize;

pub use functionalize::{functionalize, ChainStep, FNode, FOutput, FunctionalGraph, InputGroups};
pub mod grad_rules;
pub mod joint;
pub mod partition;
