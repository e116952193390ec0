//! What `explain()` reports about a call.

use aot_ir::{DedupeInfo, SyntheticBaseEntry, SyntheticBaseInfo, ViewAndMutationMeta};
use serde::Serialize;

/// What a call with given arguments would do, in PyTorch's terms. Its JSON
/// (`serde_json::to_value`) has exactly the keys of the contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallReport {
    /// The mutation and aliasing metadata of the call.
    pub fw_metadata: ViewAndMutationMeta,
    /// The duplicate-argument specialisation; `None` unless a duplicated
    /// argument is mutated.
    pub dedupe: Option<DedupeInfo>,
    /// How aliased arguments are rebuilt from a synthetic base; `None`
    /// unless aliased arguments need one.
    pub synthetic_base_info: Option<Vec<SyntheticBaseEntry>>,
    /// The synthetic-base specialisation; `None` unless one was needed.
    pub synthetic_base: Option<SyntheticBaseInfo>,
}
