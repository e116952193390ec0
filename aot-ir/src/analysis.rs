//! Static analyses over the graph as written (views and in-place ops intact).
//!
//! - [`alias`]: storage classes, autograd bases and layout paths.
//! - [`meta_template`]: the per-input / per-output template of PyTorch's
//!   `ViewAndMutationMeta`, the call's facts, and what a run observed.
//! - [`collect_metadata`]: computes the template, and completes it with a
//!   call's facts.
//! - [`observed`]: what a run on copies of a call's arguments shows, where
//!   the template depends on their shapes, layouts or dtypes.
//! - [`input_output`]: dedupe and synthetic-base refinements of the metadata.
//! - [`refusals`]: what can never run, reported at compile time.

pub mod alias;
pub mod collect_metadata;
pub mod input_output;
pub mod meta_template;
pub mod observed;
pub mod refusals;

pub use meta_template::{
    ArgFacts, CallFacts, InputTemplate, Observation, ObservedAlias, ObservedOutput, OutputAlias, OutputTemplate, StaticMeta,
};
pub use observed::{matmul_foldable, MatmulShape};
pub use refusals::Diagnostic;
