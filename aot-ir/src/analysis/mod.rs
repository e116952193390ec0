//! Static analyses over the graph as written (views and in-place ops intact).
//!
//! - [`alias`]: storage classes, autograd bases and layout paths.
//! - [`collect_metadata`]: the per-input / per-output template of PyTorch's
//!   `ViewAndMutationMeta`, and its completion with a call's facts.
//! - [`observed`]: what a run on copies of a call's arguments shows, where
//!   the template depends on their shapes, layouts or dtypes.
//! - [`input_output`]: dedupe and synthetic-base refinements of the metadata.
//! - [`refusals`]: what can never run, reported at compile time.

pub mod alias;
pub mod collect_metadata;
pub mod input_output;
pub mod observed;
pub mod refusals;

pub use collect_metadata::{ArgFacts, CallFacts, InputTemplate, OutputAlias, OutputTemplate, StaticMeta};
pub use observed::{Observation, ObservedAlias, ObservedOutput};
pub use refusals::Diagnostic;
