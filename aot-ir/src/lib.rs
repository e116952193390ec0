//! aot-ir: the IR of `#[aot_fn]` functions, the metadata schemas of
//! AOTAutograd, and the static analyses shared by the macro (which runs them
//! at compile time) and the runtime (which completes their results per call).
//!
//! Modules, bottom to top; each uses only modules of the layers below it
//! (docs/architecture.md draws the same, and a test checks it):
//! 1. [`dtype`]: the element types, shared with the runtime
//! 2. [`types`], [`op`] (the op table and the op classes), [`schema`]
//! 3. [`graph`]: the IR's data: graphs, nodes, primitives, and what nodes
//!    embed (kernels, calls and loops)
//! 4. [`mod@print`] (the listing), [`mod@verify`] (per-stage node checks),
//!    [`analysis`]
//! 5. [`transform`]: the passes, with their results' checks and listings
//! 6. [`kernel`]: the kernel stage: scheduling, reinplacing, rendering
//!
//! No `syn`, no tensors: the crate is plain data and algorithms, so the proc
//! macro can depend on it cheaply and the runtime can deserialise what the
//! macro embedded.
//!
//! One IR runs through every stage: the source [`Graph`], the functional
//! graph, the joint graph and its forward/backward partitions all hold the
//! one [`Node`] type ([`graph::node`]), with stage-specific primitives
//! ([`Op`]). One printer ([`mod@print`]) lists every stage, one verifier
//! ([`mod@verify`], per [`Stage`]) checks every stage after the pass that
//! made it.
//!
//! ```
//! use aot_ir::{graph::args::*, GraphBuilder, OpKind, ReturnKind};
//! let mut b = GraphBuilder::new("f");
//! let a = b.tensor("a", true);
//! b.call(OpKind::MulInplace, a, vec![f(2.0)]);
//! let out = b.call(OpKind::Mul, a, vec![f(3.0)]);
//! let g = b.finish(vec![out], ReturnKind::Single);
//! aot_ir::verify(&g).unwrap();
//! assert!(g.to_string().contains("mul_(%0, 2.0)"));
//! let meta = aot_ir::StaticMeta::compute(&g);
//! assert!(meta.inputs[0].mutates_data());
//! ```

#![warn(missing_docs)]

pub mod analysis;
pub mod dtype;
pub mod graph;
pub mod kernel;
pub mod op;
pub mod print;
pub mod schema;
pub mod transform;
pub mod types;
pub mod verify;

pub use analysis::{ArgFacts, CallFacts, Diagnostic, OutputAlias, StaticMeta};
pub use dtype::DType;
pub use graph::{ChainStep, Graph, GraphBuilder, Node, Op, Param, Prim, ReturnKind, ValueDef, ValueInfo, ValueSizeRead};
pub use op::{OpClass, OpKind, OpSig, ParamKind, OP_TABLE};
pub use schema::{
    DedupeInfo, InputAliasInfo, MutationType, OutputAliasInfo, OutputType, SyntheticBaseEntry, SyntheticBaseInfo, TangentMeta,
    ViewAndMutationMeta,
};
pub use types::{Arg, ParamType, ScalarBinOp, ScalarError, ScalarExpr, ScalarFn, ScalarTy, ScalarValue, SpanId, ValueId};
pub use verify::{checked, verify, Stage, VerifyError};
