//! The evaluation layer: evaluation of IR ops on tensors, below both eager
//! backward (`autograd`) and the graph executors (`executor`), which run
//! their ops through it.
//!
//! - [`dispatch`]: the one place an `OpKind` meets its eager op, and the
//!   replay of view chains with it;
//! - [`prims`]: the backward-only primitives of `aot_ir`'s gradient rules
//!   that reshape, cast or reduce a gradient;
//! - [`view_prims`]: the rules' view primitives, which move a gradient
//!   between a view region and its root.

pub(crate) mod dispatch;
pub(crate) mod prims;
pub(crate) mod view_prims;
