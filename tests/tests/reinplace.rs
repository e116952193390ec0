//! Reinplacing: an optimizer step's writes run as one fused kernel per
//! parameter stored over the written arguments' own storage (no copy, no temporary, no
//! copy-back), and the calls where that would be wrong (an old value read
//! after the write, aliased arguments, a reduction read of the written
//! tensor, dtypes or shapes the out-of-place body does not stand for, a
//! destination that is part of a larger storage) run their ordinary plan,
//! with eager's results or eager's errors.

use aot_runtime::prelude::*;
use aot_runtime::testing::{copied_write_backs, fresh_writes, in_place_kernels, reused_buffers, swapped_write_backs};
use aot_runtime::Arg;
use std::sync::Mutex;

/// The counters are per process: one test at a time.
static COUNTERS: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    COUNTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether scheduling (and so reinplacing) is on.
fn kernels_on() -> bool {
    std::env::var("AOT_KERNELS").map_or(true, |v| v != "0")
}

fn randn(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    Tensor::randn(shape, dtype, &Device::Cpu, seed).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

#[track_caller]
fn same(what: &str, a: &Tensor, b: &Tensor) {
    assert_eq!(a.shape(), b.shape(), "{what}: shape");
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtype");
    assert_eq!(vals(a), vals(b), "{what}: values");
}

fn copy(t: &Tensor) -> Tensor {
    t.copy().unwrap()
}

#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

/// The counters a call moved: in-place kernels, swapped and copied
/// write-backs, out-of-place first writes, reused buffers.
fn counters() -> [u64; 5] {
    [in_place_kernels(), swapped_write_backs(), copied_write_backs(), fresh_writes(), reused_buffers()]
}

fn moved(before: [u64; 5]) -> [u64; 5] {
    let now = counters();
    std::array::from_fn(|i| now[i] - before[i])
}

#[test]
fn sgd_momentum_is_one_kernel_stored_over_p_and_buf() {
    let _t = turn();
    let (mut p, mut buf, g) = (randn(&[40, 30], DType::F32, 1), randn(&[40, 30], DType::F32, 2), randn(&[40, 30], DType::F32, 3));
    let (ep, ebuf, g0) = (copy(&p), copy(&buf), copy(&g));
    let args = [Arg::from(&p), Arg::from(&buf), Arg::from(&g), 0.1.into(), 0.9.into()];
    let kernels = sgd_momentum::compiled().kernels(&args).unwrap();
    if !kernels_on() {
        return;
    }
    let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["fused_mul_add_mul_sub_0"]);
    // Loads p, buf, g (in0, in1, in2); stores the new buf over in1 and
    // the new p over in0.
    let src = &kernels[0].source;
    assert!(src.contains("store %4 in place of in1, %6 in place of in0"), "the listing names the destinations:\n{src}");
    let (ids, versions) = ((p.storage_id(), buf.storage_id()), (p.version(), buf.version()));
    let view = p.narrow(0, 3, 2).unwrap();
    let before = counters();
    sgd_momentum(&mut p, &mut buf, &g, 0.1, 0.9).unwrap();
    assert_eq!(moved(before), [1, 0, 0, 0, 0], "one in-place kernel; no swap, no copy-back, no temporary");
    assert_eq!((p.storage_id(), buf.storage_id()), ids, "the arguments keep their storage");
    assert!(p.version() > versions.0 && buf.version() > versions.1, "the writes bump the versions");
    sgd_momentum::compiled().run_eager(&[Arg::from(&ep), Arg::from(&ebuf), Arg::from(&g), 0.1.into(), 0.9.into()]).unwrap();
    same("p", &p, &ep);
    same("buf", &buf, &ebuf);
    same("a view of p sees the new values", &view, &ep.narrow(0, 3, 2).unwrap());
    same("g is only read", &g, &g0);
}

fn with<'a>(ts: &'a [Tensor], scalars: &[f64]) -> Vec<Arg<'a>> {
    ts.iter().map(Arg::from).chain(scalars.iter().map(|&s| Arg::from(s))).collect()
}

/// Runs `f` compiled on copies of `args` and eagerly on other copies, and
/// checks results and written arguments agree; returns the counters the
/// compiled call moved.
fn against_eager(f: &aot_runtime::CompiledFn, args: &[Tensor], scalars: &[f64]) -> [u64; 5] {
    let (c, e): (Vec<Tensor>, Vec<Tensor>) = (args.iter().map(copy).collect(), args.iter().map(copy).collect());
    let before = counters();
    let out = f.__call(&with(&c, scalars));
    let m = moved(before);
    let want = f.run_eager(&with(&e, scalars));
    match (out, want) {
        (Ok(out), Ok(want)) => {
            for (k, (a, b)) in out.iter().zip(&want).enumerate() {
                same(&format!("output {k}"), a, b);
            }
            for (k, (a, b)) in c.iter().zip(&e).enumerate() {
                same(&format!("argument {k}"), a, b);
            }
        }
        (Err(_), Err(_)) => {
            for (k, (a, b)) in c.iter().zip(args).enumerate() {
                same(&format!("argument {k} after a failed call"), a, b);
            }
        }
        (out, want) => panic!("compiled {:?} but eager {:?}", out.map(|_| ()), want.map(|_| ())),
    }
    m
}

/// `old` is `p`'s value before the write, read after it.
#[aot_fn]
fn reads_the_old_value(p: &mut Tensor, q: &mut Tensor, x: &Tensor) {
    no_grad! {
        let old = p * 2.0;
        p.add_(x);
        q.add_(&old);
    }
}

/// The written tensor read at every index (a reduction) by its own write.
#[aot_fn]
fn reads_other_indices(p: &mut Tensor) {
    no_grad! {
        let s = p.sum();
        p.add_(&s);
    }
}

#[test]
fn an_old_value_read_after_the_write_or_a_reduction_of_the_destination_is_not_reinplaced() {
    let _t = turn();
    let (p, q, x) = (randn(&[5, 7], DType::F32, 4), randn(&[5, 7], DType::F32, 5), randn(&[5, 7], DType::F32, 6));
    let m = against_eager(reads_the_old_value::compiled(), &[p.clone(), q, x], &[]);
    assert_eq!(m[0], 0, "q's write reads p's old value");
    let m = against_eager(reads_other_indices::compiled(), &[p], &[]);
    assert_eq!(m[0], 0, "p.add_(p.sum()) reads p at other indices");
}

#[test]
fn aliased_arguments_are_not_reinplaced() {
    let _t = turn();
    // p and buf are two rows of one storage; g a third.
    let base = randn(&[3, 40], DType::F32, 7);
    let row = |b: &Tensor, i: i64| b.select(0, i).unwrap();
    let (eb, cb) = (copy(&base), copy(&base));
    let before = counters();
    let (mut p, mut buf) = (row(&cb, 0), row(&cb, 1));
    sgd_momentum(&mut p, &mut buf, &row(&cb, 2), 0.1, 0.9).unwrap();
    assert_eq!(moved(before)[0], 0, "p and buf share a storage");
    sgd_momentum::compiled()
        .run_eager(&[Arg::from(&row(&eb, 0)), Arg::from(&row(&eb, 1)), Arg::from(&row(&eb, 2)), 0.1.into(), 0.9.into()])
        .unwrap();
    same("the shared storage", &cb, &eb);
}

#[test]
fn calls_the_body_does_not_stand_for_run_their_plan_with_eagers_results() {
    let _t = turn();
    let f = sgd_momentum::compiled();
    let (p, buf) = (randn(&[6, 4], DType::F32, 8), randn(&[6, 4], DType::F32, 9));
    // A gradient of another dtype: eager computes the write in f64 and
    // casts it back; the out-of-place body would not.
    let m = against_eager(f, &[p.clone(), buf.clone(), randn(&[6, 4], DType::F64, 10)], &[0.1, 0.9]);
    assert_eq!(m[0], 0, "mixed dtypes");
    // A gradient that broadcasts to a larger shape: eager refuses the
    // write, and nothing is written.
    let m = against_eager(f, &[p.clone(), buf.clone(), randn(&[2, 6, 4], DType::F32, 11)], &[0.1, 0.9]);
    assert_eq!(m[0], 0, "a write that would grow its shape");
    // A gradient that broadcasts to the destination's shape: in place.
    let m = against_eager(f, &[p.clone(), buf.clone(), randn(&[4], DType::F32, 12)], &[0.1, 0.9]);
    assert_eq!(m[0], u64::from(kernels_on()), "a broadcast operand");
    // A transposed destination: dense over its storage, in place.
    let m = against_eager(f, &[p.t().unwrap(), buf.t().unwrap(), randn(&[4, 6], DType::F32, 13)], &[0.1, 0.9]);
    assert_eq!(m[0], u64::from(kernels_on()), "transposed arguments");
    // F64 arguments: in place too.
    let m =
        against_eager(f, &[randn(&[6, 4], DType::F64, 14), randn(&[6, 4], DType::F64, 15), randn(&[6, 4], DType::F64, 16)], &[0.1, 0.9]);
    assert_eq!(m[0], u64::from(kernels_on()), "f64");
    // Integer arguments: eager refuses `mul_` by a float; so does the call.
    let ints = || Tensor::from_vec((0..24).collect::<Vec<i64>>(), &[6, 4], &Device::Cpu).unwrap();
    let m = against_eager(f, &[ints(), ints(), ints()], &[0.1, 0.9]);
    assert_eq!(m[0], 0, "integers");
}

#[test]
fn a_destination_inside_a_larger_storage_runs_the_plan() {
    let _t = turn();
    let big = randn(&[10, 4], DType::F32, 17);
    let (cb, eb) = (copy(&big), copy(&big));
    let g = randn(&[3, 4], DType::F32, 18);
    let (mut p, mut buf) = (cb.narrow(0, 2, 3).unwrap(), randn(&[3, 4], DType::F32, 19));
    let ebuf = copy(&buf);
    let before = counters();
    sgd_momentum(&mut p, &mut buf, &g, 0.1, 0.9).unwrap();
    assert_eq!(moved(before)[0], 0, "p is three rows of a larger storage");
    sgd_momentum::compiled()
        .run_eager(&[Arg::from(&eb.narrow(0, 2, 3).unwrap()), Arg::from(&ebuf), Arg::from(&g), 0.1.into(), 0.9.into()])
        .unwrap();
    same("the whole storage", &cb, &eb);
    same("buf", &buf, &ebuf);
}

#[cfg(feature = "cuda")]
#[test]
fn sgd_momentum_on_cuda_is_stored_over_p_and_buf_too() {
    let _t = turn();
    if !aot_runtime::cuda::is_available() || !kernels_on() {
        return;
    }
    let cuda = Device::Cuda(0);
    let (p0, b0, g0) = (randn(&[33, 17], DType::F32, 20), randn(&[33, 17], DType::F32, 21), randn(&[33, 17], DType::F32, 22));
    let on = |t: &Tensor| t.to_device(&cuda).unwrap();
    let (mut p, mut buf, g) = (on(&p0), on(&b0), on(&g0));
    let ids = (p.storage_id(), buf.storage_id());
    let before = counters();
    sgd_momentum(&mut p, &mut buf, &g, 0.1, 0.9).unwrap();
    assert_eq!(moved(before), [1, 0, 0, 0, 0], "one kernel stores p and buf");
    assert_eq!((p.storage_id(), buf.storage_id()), ids);
    let (mut cp, mut cbuf) = (copy(&p0), copy(&b0));
    sgd_momentum(&mut cp, &mut cbuf, &g0, 0.1, 0.9).unwrap();
    let back = |t: &Tensor| t.to_device(&Device::Cpu).unwrap();
    if aot_runtime::cuda::is_simulated() {
        same("p", &back(&p), &cp);
        same("buf", &back(&buf), &cbuf);
    } else {
        let close = |a: &Tensor, b: &Tensor| vals(a).iter().zip(vals(b)).all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()));
        assert!(close(&back(&p), &cp) && close(&back(&buf), &cbuf));
    }
}
