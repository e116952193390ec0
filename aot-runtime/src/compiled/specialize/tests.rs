//! The bounded specialisation cache: LRU eviction, rebuilt keys, hash
//! collisions and concurrent use.

use super::{Entry, ProbeKey, SpecCache, Specialization, Table, DEFAULT_CAPACITY};
use crate::compiled::{Arg, CompiledFn};
use crate::{DType, Device, Tensor};
use aot_ir::graph::args::t;
use aot_ir::{GraphBuilder, OpKind, ReturnKind};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Barrier};

/// `(a * b).sum()`: the key changes with the ranks of `a` and `b`.
fn mul_sum() -> CompiledFn {
    let mut b = GraphBuilder::new("mul_sum");
    let a = b.tensor("a", false);
    let x = b.tensor("b", false);
    let m = b.call(OpKind::Mul, a, vec![t(x)]);
    let s = b.call(OpKind::Sum, m, vec![]);
    CompiledFn::new(b.finish(vec![s], ReturnKind::Single)).expect("valid graph")
}

/// A tensor of rank `rank` holding the single value `v`.
fn of_rank(rank: usize, v: f64) -> Tensor {
    Tensor::full(&vec![1; rank], v, DType::F64, &Device::Cpu).expect("tensor")
}

/// 10 x 9 = 90 rank patterns, more than the default capacity.
fn patterns() -> Vec<(usize, usize)> {
    (0..10).flat_map(|ra| (0..9).map(move |rb| (ra, rb))).collect()
}

fn call(f: &CompiledFn, ra: usize, rb: usize) -> f64 {
    let (a, b) = (of_rank(ra, ra as f64 + 1.0), of_rank(rb, rb as f64 + 2.0));
    let out = f.__call(&[Arg::from(&a), Arg::from(&b)]).expect("call");
    out[0].to_vec::<f64>().expect("values")[0]
}

fn probe(f: &CompiledFn, ra: usize, rb: usize) -> bool {
    let (a, b) = (of_rank(ra, 1.0), of_rank(rb, 1.0));
    f.cache_probe(&[Arg::from(&a), Arg::from(&b)])
}

#[test]
fn more_patterns_than_capacity_keep_the_cache_at_capacity_and_evicted_keys_are_rebuilt() {
    let f = mul_sum();
    let pats = patterns();
    assert!(pats.len() > DEFAULT_CAPACITY);
    for sweep in 0..2 {
        for (n, &(ra, rb)) in pats.iter().enumerate() {
            // In the second sweep every key was evicted and is rebuilt.
            assert!(!probe(&f, ra, rb), "sweep {sweep}: ({ra}, {rb}) should have been evicted");
            assert_eq!(call(&f, ra, rb), (ra as f64 + 1.0) * (rb as f64 + 2.0), "sweep {sweep}: ({ra}, {rb})");
            assert_eq!(f.num_specializations(), (n + 1 + sweep * pats.len()).min(DEFAULT_CAPACITY));
        }
        // The most recent DEFAULT_CAPACITY patterns are the ones kept.
        let kept = pats.len() - DEFAULT_CAPACITY;
        assert!(pats[kept..].iter().all(|&(ra, rb)| probe(&f, ra, rb)), "sweep {sweep}");
        assert!(!pats[..kept].iter().any(|&(ra, rb)| probe(&f, ra, rb)), "sweep {sweep}");
    }
}

#[test]
fn the_least_recently_used_key_is_evicted() {
    let f = mul_sum();
    let cache = SpecCache::with_capacity(3);
    let get = |ra: usize| {
        let (a, b) = (of_rank(ra, 1.0), of_rank(0, 1.0));
        cache.get(f.graph(), f.static_meta(), &[Arg::from(&a), Arg::from(&b)]).expect("specialisation")
    };
    let has = |ra: usize| {
        let (a, b) = (of_rank(ra, 1.0), of_rank(0, 1.0));
        cache.contains(f.static_meta(), &[Arg::from(&a), Arg::from(&b)])
    };
    let first = get(0);
    get(1);
    get(2);
    // A hit refreshes rank 0 and returns the very specialisation built.
    assert!(Arc::ptr_eq(&first, &get(0)));
    get(3);
    assert_eq!(cache.len(), 3);
    assert_eq!([has(0), has(1), has(2), has(3)], [true, false, true, true]);
    // A probe that hits is a use too: 0, 2 and 3 were just probed in that
    // order, so rank 0 is now the least recently used.
    get(4);
    assert_eq!([has(0), has(2), has(3), has(4)], [false, true, true, true]);
}

#[test]
fn keys_with_the_same_hash_are_told_apart() {
    let f = mul_sum();
    let (a0, a1, b) = (of_rank(0, 1.0), of_rank(1, 1.0), of_rank(0, 1.0));
    let args0 = [Arg::from(&a0), Arg::from(&b)];
    let args1 = [Arg::from(&a1), Arg::from(&b)];
    let (p0, p1) = (ProbeKey::of(&args0, f.static_meta()), ProbeKey::of(&args1, f.static_meta()));
    assert_ne!(p0.hash(), p1.hash());
    let spec = |p: &ProbeKey| Arc::new(Specialization::build(f.graph(), f.static_meta(), &p.to_owned()).expect("build"));
    let (s0, s1) = (spec(&p0), spec(&p1));
    let mut table = Table::default();
    // Both under one (forced) hash: the bucket's keys decide.
    let bucket = table.by_hash.entry(7).or_default();
    bucket.push(Entry { key: p0.to_owned(), spec: s0.clone(), last_used: AtomicU64::new(0) });
    bucket.push(Entry { key: p1.to_owned(), spec: s1.clone(), last_used: AtomicU64::new(1) });
    table.len = 2;
    assert!(Arc::ptr_eq(&table.find(7, &p0).expect("p0").spec, &s0));
    assert!(Arc::ptr_eq(&table.find(7, &p1).expect("p1").spec, &s1));
    assert!(table.find(8, &p0).is_none());
    assert!(table.evict_one());
    assert!(table.find(7, &p0).is_none(), "the older entry goes first");
    assert!(table.find(7, &p1).is_some());
    assert!(table.evict_one());
    assert!(table.by_hash.is_empty() && table.len == 0);
    assert!(!table.evict_one());
}

#[test]
fn threads_building_one_key_at_once_share_one_specialisation() {
    let f = mul_sum();
    let barrier = Barrier::new(8);
    let specs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let (a, b) = (of_rank(2, 1.0), of_rank(1, 1.0));
                    barrier.wait();
                    f.cache.get(f.graph(), f.static_meta(), &[Arg::from(&a), Arg::from(&b)]).expect("specialisation")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(f.num_specializations(), 1);
    assert!(specs.iter().all(|s| Arc::ptr_eq(s, &specs[0])));
}

#[test]
fn concurrent_calls_over_more_patterns_than_capacity_stay_bounded_and_right() {
    let f = mul_sum();
    let pats = patterns();
    std::thread::scope(|s| {
        for k in 0..8 {
            let (f, pats) = (&f, &pats);
            s.spawn(move || {
                for n in 0..3 * pats.len() {
                    let (ra, rb) = pats[(n * 7 + k * 13) % pats.len()];
                    assert_eq!(call(f, ra, rb), (ra as f64 + 1.0) * (rb as f64 + 2.0));
                    assert!(f.num_specializations() <= DEFAULT_CAPACITY);
                }
            });
        }
    });
    assert_eq!(f.num_specializations(), DEFAULT_CAPACITY);
}
