//! One plan per specialisation: `explain` reports the decisions of the
//! plan a call runs (built through the same cache), the plan's execution
//! groups and PyTorch's synthetic-base decision where they differ, and
//! the dedupe decision when a run on copies shows other mutation facts.

use super::{Arg, CompiledFn};
use crate::{Device, Tensor};
use aot_ir::graph::args::{f, i, t};
use aot_ir::{GraphBuilder, OpKind, ReturnKind, SyntheticBaseEntry};

fn seq(n: usize) -> Tensor {
    let v: Vec<f64> = (0..n).map(|v| v as f64 * 0.5 - 1.0).collect();
    Tensor::from_vec(v, &[n], &Device::Cpu).expect("tensor")
}

fn values(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().expect("values")
}

/// `a.mul_(2.0); a * b`.
fn scale_then_mul() -> CompiledFn {
    let mut g = GraphBuilder::new("scale_then_mul");
    let a = g.tensor("a", true);
    let b = g.tensor("b", false);
    g.call(OpKind::MulInplace, a, vec![f(2.0)]);
    let out = g.call(OpKind::Mul, a, vec![t(b)]);
    CompiledFn::new(g.finish(vec![out], ReturnKind::Single)).expect("valid graph")
}

/// Calls `f` compiled on `x`'s narrows (start, length) and eagerly on a
/// copy of `x`; the outputs and `x` itself must agree.
fn agrees_on_narrows(f: &CompiledFn, x: &Tensor, narrows: [(i64, i64); 2]) {
    let y = x.copy().expect("copy");
    let views = |x: &Tensor| narrows.map(|(s, l)| x.narrow(0, s, l).expect("narrow"));
    let (cv, ev) = (views(x), views(&y));
    let co = f.__call(&[Arg::from(&cv[0]), Arg::from(&cv[1])]).expect("compiled call");
    let eo = f.run_eager(&[Arg::from(&ev[0]), Arg::from(&ev[1])]).expect("eager call");
    assert_eq!(values(&co[0]), values(&eo[0]));
    assert_eq!(values(x), values(&y));
}

#[test]
fn explain_builds_the_plan_a_call_then_runs() {
    let f = scale_then_mul();
    let (a, b) = (seq(4), seq(4));
    let args = [Arg::from(&a), Arg::from(&b)];
    assert!(!f.cache_probe(&args));
    let report = f.explain(&args).expect("explain");
    assert!(report.dedupe.is_none() && report.synthetic_base.is_none());
    // The report came from the cached plan: the call finds it.
    assert!(f.cache_probe(&args));
    assert_eq!(f.num_specializations(), 1);
    f.__call(&args).expect("call");
    assert_eq!(f.num_specializations(), 1);
}

#[test]
fn disjoint_views_of_a_written_storage_run_as_one_group_and_report_no_synthetic_base() {
    let f = scale_then_mul();
    let x = seq(8);
    let (a, b) = (x.narrow(0, 0, 4).expect("narrow"), x.narrow(0, 4, 4).expect("narrow"));
    let args = [Arg::from(&a), Arg::from(&b)];
    let report = f.explain(&args).expect("explain");
    // PyTorch keeps tensors that do not overlap apart ...
    assert!(report.synthetic_base_info.is_none() && report.synthetic_base.is_none());
    let spec = f.cache.get(f.graph(), f.static_meta(), &args).expect("specialisation");
    let sb = &spec.plan.synthetic_base;
    assert!(sb.merged.is_empty());
    // ... while execution writes their storage back as one group.
    assert_eq!(sb.groups.group_of, vec![Some(0), Some(0)]);
    assert_eq!(sb.groups.single, vec![false]);
    agrees_on_narrows(&f, &x, [(0, 4), (4, 4)]);
}

#[test]
fn overlapping_views_of_a_written_storage_report_the_plans_synthetic_base() {
    let f = scale_then_mul();
    let x = seq(8);
    let (a, b) = (x.narrow(0, 0, 5).expect("narrow"), x.narrow(0, 3, 5).expect("narrow"));
    let args = [Arg::from(&a), Arg::from(&b)];
    let report = f.explain(&args).expect("explain");
    let spec = f.cache.get(f.graph(), f.static_meta(), &args).expect("specialisation");
    assert_eq!(spec.plan.synthetic_base.merged, vec![vec![0, 1]]);
    let view = |offset| SyntheticBaseEntry::View { base: 0, size: vec![5], stride: vec![1], storage_offset: offset };
    assert_eq!(report.synthetic_base_info, Some(vec![view(0), view(3)]));
    assert!(report.synthetic_base.is_some());
    agrees_on_narrows(&f, &x, [(0, 5), (3, 5)]);
}

#[test]
fn a_mutated_duplicate_is_deduplicated_by_the_plan() {
    let f = scale_then_mul();
    let x = seq(4);
    let args = [Arg::from(&x), Arg::from(&x)];
    let report = f.explain(&args).expect("explain");
    let spec = f.cache.get(f.graph(), f.static_meta(), &args).expect("specialisation");
    let plan = spec.plan.dedupe.plan.as_ref().expect("strategy 2");
    assert_eq!((plan.keep_arg_mask.clone(), plan.add_dupe_map.clone()), (vec![true, false], vec![0, 0]));
    let d = report.dedupe.expect("reported");
    assert_eq!((d.keep_arg_mask, d.add_dupe_map), (vec![true, false], vec![0, 0]));
    // One tensor after deduplication: no synthetic base.
    assert!(report.synthetic_base_info.is_none());
    let y = x.copy().expect("copy");
    let co = f.__call(&args).expect("compiled call");
    let eo = f.run_eager(&[Arg::from(&y), Arg::from(&y)]).expect("eager call");
    assert_eq!((values(&co[0]), values(&x)), (values(&eo[0]), values(&y)));
}

#[test]
fn a_metadata_mutation_that_changes_nothing_is_decided_on_what_the_run_showed() {
    // `a.unsqueeze_(0); a.squeeze_(0); a + b`, called with one tensor twice:
    // the template sees a metadata mutation of a duplicate (the plan
    // specialises on it), the run shows none (PyTorch does not).
    let mut g = GraphBuilder::new("unsqueeze_squeeze");
    let a = g.tensor("a", true);
    let b = g.tensor("b", false);
    g.call(OpKind::UnsqueezeInplace, a, vec![i(0)]);
    g.call(OpKind::SqueezeInplace, a, vec![i(0)]);
    let out = g.call(OpKind::Add, a, vec![t(b)]);
    let f = CompiledFn::new(g.finish(vec![out], ReturnKind::Single)).expect("valid graph");
    let x = seq(3);
    let args = [Arg::from(&x), Arg::from(&x)];
    let report = f.explain(&args).expect("explain");
    assert!(report.dedupe.is_none(), "{report:?}");
    assert!(!report.fw_metadata.input_info[1].mutates_metadata);
    let spec = f.cache.get(f.graph(), f.static_meta(), &args).expect("specialisation");
    assert!(spec.plan.dedupe.plan.is_some(), "the template's facts");
    let out = f.__call(&args).expect("call");
    assert_eq!(values(&out[0]), values(&x).iter().map(|v| 2.0 * v).collect::<Vec<_>>());
    assert_eq!(x.shape(), vec![3]);
}
