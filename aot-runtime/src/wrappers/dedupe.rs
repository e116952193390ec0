//! `AOTDedupeWrapper`: the same tensor passed twice.
//!
//! Strategy 1: if no duplicate is mutated (data or metadata), the graph,
//! which assumes distinct inputs, is still right; nothing to do. Strategy 2:
//! specialise on the duplication: drop the repeats (`keep_arg_mask`), call
//! with the rest, and map positions back (`add_dupe_map`); the metadata
//! follows (`remove_dupe_metadata`).
//!
//! The decision is made once per guard key, from the key's alias pattern
//! (which arguments are the same tensor) and the mutation facts, and is
//! what `explain` reports. The graph itself always takes one object per
//! distinct tensor (the input groups' `object_of`, from the same pattern),
//! so both strategies run alike; at run time the wrapper removes the
//! repeats from the arguments the synthetic-base step sees
//! ([`AOTDedupeWrapper::remove_dupe_args`]).

use super::{AliasPattern, Mutations};
use crate::arg::Arg;
use aot_ir::analysis::input_output::remove_dupe_metadata;
use aot_ir::{DedupeInfo, ViewAndMutationMeta};

/// The duplicate specialisation of one guard key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dedupe {
    pub(crate) keep_arg_mask: Vec<bool>,
    pub(crate) add_dupe_map: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AOTDedupeWrapper {
    /// `None`: strategy 1 (no mutated duplicate).
    pub(crate) plan: Option<Dedupe>,
}

impl AOTDedupeWrapper {
    /// Pre-compile: strategy 2 when a repeated tensor is mutated.
    pub(crate) fn pre_compile(pattern: &AliasPattern, mutations: &Mutations) -> AOTDedupeWrapper {
        let mutated = |i: usize| mutations.data.get(i).copied().unwrap_or(false) || mutations.metadata.get(i).copied().unwrap_or(false);
        if !(0..pattern.len()).any(|i| pattern.is_repeat(i) && mutated(i)) {
            return AOTDedupeWrapper { plan: None };
        }
        let mut keep_arg_mask = Vec::with_capacity(pattern.len());
        let mut add_dupe_map: Vec<usize> = Vec::with_capacity(pattern.len());
        let mut j = 0;
        for i in 0..pattern.len() {
            if pattern.is_repeat(i) {
                // The first occurrence came earlier, so it is mapped already.
                let first = pattern.0[i].same_as;
                keep_arg_mask.push(false);
                add_dupe_map.push(add_dupe_map[first]);
            } else {
                keep_arg_mask.push(true);
                add_dupe_map.push(j);
                j += 1;
            }
        }
        AOTDedupeWrapper { plan: Some(Dedupe { keep_arg_mask, add_dupe_map }) }
    }

    /// Whether argument `i` stays in the deduplicated calling convention.
    pub(crate) fn keeps(&self, i: usize) -> bool {
        self.plan.as_ref().is_none_or(|d| d.keep_arg_mask.get(i).copied().unwrap_or(true))
    }

    /// The decision as `explain` reports it, with the call's metadata.
    pub(crate) fn report(&self, meta: &ViewAndMutationMeta) -> Option<DedupeInfo> {
        let d = self.plan.as_ref()?;
        let meta = remove_dupe_metadata(meta, &d.keep_arg_mask, &d.add_dupe_map);
        Some(DedupeInfo { keep_arg_mask: d.keep_arg_mask.clone(), add_dupe_map: d.add_dupe_map.clone(), meta })
    }

    /// Run time: the arguments with the repeats removed.
    pub(crate) fn remove_dupe_args<'a>(&self, args: &[Arg<'a>]) -> Vec<Arg<'a>> {
        args.iter().enumerate().filter(|(i, _)| self.keeps(*i)).map(|(_, a)| *a).collect()
    }
}
