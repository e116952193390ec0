//! `AOTDedupeWrapper`: the same tensor passed twice.
//!
//! Strategy 1: if no duplicate is mutated (data or metadata), the graph,
//! which assumes distinct inputs, is still right; nothing to do. Strategy 2:
//! specialise on the duplication: drop the repeats (`keep_arg_mask`), call
//! with the rest, and map positions back (`add_dupe_map`); the metadata
//! follows (`remove_dupe_metadata`).

use crate::arg::Arg;
use aot_ir::analysis::input_output::remove_dupe_metadata;
use aot_ir::{DedupeInfo, ViewAndMutationMeta};

/// The duplicate specialisation for these arguments, or `None` (strategy 1).
pub fn dedupe_plan(args: &[Arg], meta: &ViewAndMutationMeta) -> Option<DedupeInfo> {
    let mut needs = false;
    for (i, a) in args.iter().enumerate() {
        let Some(t) = a.tensor() else { continue };
        let seen = args[..i].iter().any(|b| b.tensor().is_some_and(|u| u.same_tensor(t)));
        if seen {
            let info = meta.input_info.get(i)?;
            if info.mutates_data || info.mutates_metadata {
                needs = true;
                break;
            }
        }
    }
    if !needs {
        return None;
    }
    let mut keep_arg_mask = Vec::with_capacity(args.len());
    let mut add_dupe_map = Vec::with_capacity(args.len());
    let mut firsts: Vec<(usize, usize)> = vec![]; // (arg index, deduped index)
    let mut j = 0;
    for (i, a) in args.iter().enumerate() {
        if let Some(t) = a.tensor() {
            if let Some(&(_, k)) = firsts.iter().find(|(p, _)| args[*p].tensor().is_some_and(|u| u.same_tensor(t))) {
                keep_arg_mask.push(false);
                add_dupe_map.push(k);
                continue;
            }
            firsts.push((i, j));
        }
        keep_arg_mask.push(true);
        add_dupe_map.push(j);
        j += 1;
    }
    let meta = remove_dupe_metadata(meta, &keep_arg_mask, &add_dupe_map);
    Some(DedupeInfo { keep_arg_mask, add_dupe_map, meta })
}

/// The arguments with the repeats removed.
pub fn remove_dupe_args<'a>(args: &[Arg<'a>], keep_arg_mask: &[bool]) -> Vec<Arg<'a>> {
    args.iter().zip(keep_arg_mask).filter(|(_, &k)| k).map(|(a, _)| *a).collect()
}
