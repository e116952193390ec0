//! Passes that rewrite a graph into another form (PyTorch's
//! `traced_function_transforms.py`).
//!
//! - [`functionalize`]: views and in-place ops become immutable values,
//!   scatters and view replay; mutated inputs become outputs.

pub mod functionalize;

pub use functionalize::{functionalize, ChainStep, FNode, FOutput, FunctionalGraph, InputGroups};
pub mod grad_rules;
pub mod joint;
pub mod partition;
