//! The profiler (`aot_runtime::profile`): what a profile of an eager op
//! sequence and of compiled calls holds (rows, calls, bytes, flops,
//! shares), that scopes are per thread and nest, that `AOT_LOG=profile`
//! prints the process's table at exit, and, with the `cuda` feature and a
//! CUDA device (`.ci/run` runs this file with `AOT_CUDA_SIM=1`), the same
//! on `Device::Cuda(0)`, timed by the device's events.

use aot_runtime::prelude::*;
use aot_runtime::profile::{process_profile, Profile, ProfileRow};
use std::time::Duration;

fn row<'a>(p: &'a Profile, name: &str) -> &'a ProfileRow {
    p.row(name).unwrap_or_else(|| panic!("no row `{name}` in\n{p}"))
}

/// The invariants of every profile: shares sum to 1, rows sorted by time,
/// every row counted at least once.
fn check_table(p: &Profile) {
    let shares: f64 = p.rows().iter().map(|r| r.share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "shares sum to {shares}:\n{p}");
    assert!(p.rows().windows(2).all(|w| w[0].total >= w[1].total), "sorted by total time:\n{p}");
    assert!(p.rows().iter().all(|r| r.calls > 0));
    assert_eq!(p.total(), p.rows().iter().map(|r| r.total).sum::<Duration>());
    assert!(p.total() <= p.wall_time(), "rows within the wall time:\n{p}");
    let table = p.to_string();
    for r in p.rows() {
        assert!(table.contains(&r.name), "`{}` printed:\n{table}", r.name);
    }
    assert!(table.contains("allocator cpu (host buffer cache)"), "{table}");
}

fn f32s(shape: &[usize], seed: u64, dev: &Device) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).unwrap().to_device(dev).unwrap()
}

/// A known eager sequence: a transposed tensor made contiguous, one
/// `copy_`, three adds, one matmul, one sum.
fn eager_sequence(dev: &Device) -> Profile {
    let a = f32s(&[1000], 0, dev);
    let b = f32s(&[1000], 1, dev);
    let (x, w) = (f32s(&[8, 16], 2, dev), f32s(&[16, 4], 3, dev));
    let t = f32s(&[40, 25], 4, dev).t().unwrap();
    let ((), p) = aot_runtime::profile(|| {
        let _ = t.contiguous().unwrap();
        b.copy_(&a).unwrap();
        let mut c = a.add(&b).unwrap();
        for _ in 0..2 {
            c = c.add(&a).unwrap();
        }
        let y = x.matmul(&w).unwrap();
        let _ = (c.sum().unwrap(), y);
    });
    p
}

fn check_eager(p: &Profile, dev: Device) {
    check_table(p);
    let copy = row(p, "contiguous");
    assert_eq!((copy.device, copy.calls, copy.bytes), (dev, 1, 2 * 4000), "1000 f32 read, 1000 written:\n{p}");
    // Eager `copy_` materialises its (broadcast, cast) source, then writes
    // it into the destination: two copies of 1000 f32.
    let copy = row(p, "copy_");
    assert_eq!((copy.device, copy.calls, copy.bytes), (dev, 2, 2 * 2 * 4000), "{p}");
    let add = row(p, "add");
    assert_eq!((add.calls, add.bytes), (3, 3 * 3 * 4000), "two operands read, one result written:\n{p}");
    let matmul = row(p, "matmul");
    assert_eq!((matmul.calls, matmul.flops), (1, 2 * 8 * 16 * 4), "{p}");
    assert_eq!(matmul.bytes, 4 * (8 * 16 + 16 * 4 + 8 * 4) as u64);
    assert!(matmul.gflops_per_second().is_some() || matmul.total.is_zero());
    assert_eq!(row(p, "sum_dim").calls, 1);
    assert_eq!(p.calls(), 8, "nothing else ran:\n{p}");
}

#[test]
fn an_eager_sequence_has_a_row_per_op_with_its_calls_and_bytes() {
    let p = eager_sequence(&Device::Cpu);
    check_eager(&p, Device::Cpu);
    assert!(p.total() > Duration::ZERO, "{p}");
}

#[aot_fn]
fn mlp(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let h = (x.matmul(w) + b).relu();
    (h * 2.0 - 1.0).sum()
}

#[aot_fn]
fn attend(emb: &Tensor, ids: &Tensor, acc: &Tensor, at: &Tensor) -> (Tensor, Tensor) {
    let e = emb.index_select(0, ids);
    let p = e.softmax(1);
    (p, acc.scatter_add(0, at, &e))
}

/// The names of the fused kernels a compiled call runs (as
/// `kernels_for` names them).
fn fused_names(sources: &[aot_runtime::KernelSource]) -> Vec<String> {
    sources.iter().map(|k| k.name.clone()).filter(|n| n.starts_with("fused_")).collect()
}

fn check_compiled(dev: Device) {
    let (x, w, b) = (f32s(&[32, 16], 4, &dev), f32s(&[16, 8], 5, &dev), f32s(&[8], 6, &dev));
    let args: [Arg; 3] = [(&x).into(), (&w).into(), (&b).into()];
    let kernels = fused_names(&mlp::compiled().kernels_for(&args, &dev).unwrap());
    assert!(!kernels.is_empty(), "the kernel stage fused the elementwise tail");
    mlp(&x, &w, &b).unwrap(); // planned outside the profile
    let (out, p) = aot_runtime::profile(|| {
        for _ in 0..3 {
            mlp(&x, &w, &b).unwrap();
        }
    });
    let () = out;
    check_table(&p);
    assert_eq!(row(&p, "matmul").calls, 3, "{p}");
    assert_eq!(row(&p, "matmul").flops, 3 * 2 * 32 * 16 * 8);
    for k in &kernels {
        let r = row(&p, k);
        assert_eq!((r.device, r.calls), (dev, 3), "{k}:\n{p}");
        assert!(r.bytes > 0, "{k}:\n{p}");
        assert_eq!(r.gb_per_second().is_some(), !r.total.is_zero(), "a rate wherever time was measured");
    }

    let emb = f32s(&[10, 6], 7, &dev);
    let ids = Tensor::from_vec(vec![1i64, 3, 3, 7], &[4], &Device::Cpu).unwrap().to_device(&dev).unwrap();
    let acc = Tensor::zeros(&[5, 6], DType::F32, &dev).unwrap();
    let at = Tensor::from_vec(vec![0i64, 4, 4, 2], &[4, 1], &Device::Cpu).unwrap().expand(&[4, 6]).unwrap().to_device(&dev).unwrap();
    attend(&emb, &ids, &acc, &at).unwrap();
    let (_, p) = aot_runtime::profile(|| attend(&emb, &ids, &acc, &at).unwrap());
    check_table(&p);
    let gather = row(&p, "index_select");
    // Four i64 indices, and four rows of six f32 picked and written.
    assert_eq!((gather.calls, gather.bytes), (1, 4 * 8 + 2 * 4 * 6 * 4), "{p}");
    // The out-of-place scatter_add: a copy of `acc`, then the scatter.
    assert_eq!(row(&p, "scatter_add").calls, 2, "{p}");
    assert!(p.rows().iter().any(|r| r.name.contains("softmax")), "{p}");
}

#[test]
fn a_compiled_call_has_a_row_per_fused_kernel_and_direct_kernel() {
    check_compiled(Device::Cpu);
}

#[test]
fn scopes_are_per_thread_and_nest() {
    let a = Tensor::ones(&[64], DType::F32, &Device::Cpu).unwrap();
    let (inner, outer) = aot_runtime::profile(|| {
        let _ = a.neg().unwrap();
        let other = std::thread::spawn({
            let a = a.clone();
            move || {
                let ((), p) = aot_runtime::profile(|| drop(a.exp().unwrap()));
                p
            }
        });
        let (_, inner) = aot_runtime::profile(|| a.neg().unwrap());
        let other = other.join().unwrap();
        assert_eq!(other.rows().iter().map(|r| (r.name.as_str(), r.calls)).collect::<Vec<_>>(), [("exp", 1)]);
        inner
    });
    assert_eq!(inner.rows().iter().map(|r| (r.name.as_str(), r.calls)).collect::<Vec<_>>(), [("neg", 1)]);
    assert_eq!(
        outer.rows().iter().map(|r| (r.name.as_str(), r.calls)).collect::<Vec<_>>(),
        [("neg", 2)],
        "the other thread's exp is not here"
    );
    let (_, empty) = aot_runtime::profile(|| ());
    assert!(empty.rows().is_empty() && empty.total().is_zero());
}

/// Set in the child process of `aot_log_profile_prints_the_table_at_exit`.
const CHILD: &str = "AOT_PROFILE_TEST_CHILD";

/// In the child (`AOT_LOG=profile`): calls on two threads, all in the
/// process table; the table printed at exit.
#[test]
fn child_of_the_aot_log_test() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let a = Tensor::ones(&[256], DType::F32, &Device::Cpu).unwrap();
    let b = a.clone();
    std::thread::spawn(move || drop(b.exp().unwrap())).join().unwrap();
    let _ = a.neg().unwrap();
    let p = process_profile().expect("AOT_LOG=profile is set");
    assert_eq!(p.row("exp").map(|r| r.calls), Some(1), "{p}");
    assert_eq!(p.row("neg").map(|r| r.calls), Some(1), "{p}");
}

#[test]
fn aot_log_profile_prints_the_table_at_exit() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let logs_profile = std::env::var("AOT_LOG").is_ok_and(|v| v.split(',').any(|w| w.trim() == "profile"));
    assert_eq!(process_profile().is_some(), logs_profile, "a process table only with AOT_LOG=profile");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_of_the_aot_log_test", "--test-threads", "1"])
        .env(CHILD, "1")
        .env("AOT_LOG", "kernels, profile")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed:\n{}\n{err}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("aot profile (AOT_LOG=profile"), "{err}");
    let line = |name: &str| err.lines().find(|l| l.split_whitespace().next() == Some(name)).map(str::to_string);
    for name in ["exp", "neg", "full"] {
        let l = line(name).unwrap_or_else(|| panic!("no row `{name}` at exit:\n{err}"));
        assert!(l.contains(" cpu "), "{l}");
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;

    fn on() -> bool {
        let on = aot_runtime::cuda::is_available();
        if !on {
            assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
            eprintln!("skipped: no CUDA device (set AOT_CUDA_SIM=1 to simulate one)");
        }
        on
    }

    #[test]
    fn an_eager_sequence_on_cuda_is_timed_by_the_device() {
        if !on() {
            return;
        }
        let dev = Device::Cuda(0);
        let p = eager_sequence(&dev);
        check_eager(&p, dev);
        let alloc = p.allocators().iter().find(|a| a.device == dev).expect("the device's allocator");
        assert!(alloc.requests >= 5, "a buffer per result:\n{p}");
        assert_eq!(alloc.cache_hits, None, "the pool does not report reuse");
        let table = p.to_string();
        assert!(table.contains("allocator cuda:0"), "{table}");
    }

    #[test]
    fn a_compiled_call_on_cuda_has_its_kernels() {
        if on() {
            check_compiled(Device::Cuda(0));
        }
    }

    #[test]
    fn dropout_on_cuda_is_a_philox_row() {
        if !on() {
            return;
        }
        let x = Tensor::ones(&[4096], DType::F32, &Device::Cuda(0)).unwrap();
        let (_, p) = aot_runtime::profile(|| x.dropout(0.5).unwrap());
        let r = row(&p, "philox/dropout");
        assert_eq!((r.calls, r.device), (1, Device::Cuda(0)), "{p}");
        assert_eq!(r.bytes, 4096 * 4, "{p}");
    }
}
