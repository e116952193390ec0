//! The CUDA backend's `clamp`, scalar ops and `scatter_add` kernels
//! (`cuda/ops.rs`) against the CPU backend, primitive by primitive, on
//! random shapes, strides, dtypes and values (NaN, infinities, signed
//! zeros, integers past 2^53): the same bits, and no host round trip.
//! Runs on the simulated device (`AOT_CUDA_SIM=1`, feature `cuda`);
//! elsewhere it says it is skipped.
#![cfg(feature = "cuda")]

mod cuda_common;

use aot_ir::OpKind;
use aot_runtime::backend::Backend;
use aot_runtime::backend::CpuStorage;
use aot_runtime::cuda::CudaStorage;
use aot_runtime::layout::Layout;
use aot_runtime::testing::host_round_trips;
use aot_runtime::DType;
use cuda_common::{bits, download, on, upload, Gen, CUDA, DTYPES};
use std::sync::Mutex;

/// The host round-trip counter is per process: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A value that exercises the edges now and then.
fn value(g: &mut Gen) -> f64 {
    match g.below(16) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => -0.0,
        3 => 0.0,
        4 => (1u64 << 60) as f64 + 3.0 * g.unit(),
        5 => -1e30,
        _ => (g.unit() - 0.5) * 20.0,
    }
}

fn values(g: &mut Gen, dtype: DType, n: usize) -> CpuStorage {
    match dtype {
        // Integers past 2^53 too, where f64 sums round.
        DType::I64 => CpuStorage::I64(
            (0..n).map(|_| if g.below(8) == 0 { (1i64 << 60) + g.below(1000) as i64 } else { g.below(41) as i64 - 20 }).collect(),
        ),
        DType::Bool => CpuStorage::Bool((0..n).map(|_| g.below(2) == 1).collect()),
        d => CpuStorage::from_f64s("test", d, (0..n).map(|_| value(g)).collect::<Vec<_>>().into_iter()).unwrap(),
    }
}

/// NaN payloads aside (C and Rust may pick different quiet NaNs).
fn canonical(s: &CpuStorage) -> Vec<u64> {
    let nan = |d: DType, b: u64| match d {
        DType::F32 => f32::from_bits(b as u32).is_nan(),
        DType::F64 => f64::from_bits(b).is_nan(),
        DType::F16 => half::f16::from_bits(b as u16).is_nan(),
        DType::BF16 => half::bf16::from_bits(b as u16).is_nan(),
        _ => false,
    };
    bits(s).into_iter().map(|b| if nan(s.dtype(), b) { u64::MAX } else { b }).collect()
}

fn shape(g: &mut Gen) -> Vec<usize> {
    let rank = g.below(4);
    (0..rank).map(|_| if g.below(12) == 0 { 0 } else { 1 + g.below(4) }).collect()
}

/// A layout of `shape` inside a buffer: dims in a random order, some
/// strided by 2, maybe one broadcast (stride 0) if `broadcast`, and an
/// offset. Returns it with the buffer length it needs (plus some slack).
fn layout(g: &mut Gen, shape: &[usize], broadcast: bool) -> (Layout, usize) {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, g.below(i + 1));
    }
    let mut stride = vec![0; shape.len()];
    let mut step = 1 + g.below(2);
    for &d in order.iter().rev() {
        stride[d] = step;
        step *= shape[d].max(1) * (1 + g.below(2));
    }
    if broadcast && !shape.is_empty() && g.below(3) == 0 {
        stride[g.below(shape.len())] = 0;
    }
    let l = Layout::new(shape.to_vec(), stride, g.below(3));
    let len = l.storage_extent() + g.below(3);
    (l, len)
}

/// A dense layout of `shape`: row-major or column-major.
fn dense(g: &mut Gen, shape: &[usize]) -> Layout {
    if g.below(2) == 0 || shape.len() < 2 {
        return Layout::contiguous(shape);
    }
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let mut l = Layout::contiguous(&rev);
    for i in 0..shape.len() / 2 {
        let j = shape.len() - 1 - i;
        l = l.transpose("test", i as i64, j as i64).unwrap();
    }
    l
}

fn same(cpu: Result<CpuStorage, aot_runtime::AotError>, cuda: Result<CudaStorage, aot_runtime::AotError>, what: &str) {
    close(cpu, cuda, 0, what);
}

/// Equal within `ulps` units in the last place (0: bit for bit).
fn close(cpu: Result<CpuStorage, aot_runtime::AotError>, cuda: Result<CudaStorage, aot_runtime::AotError>, ulps: u64, what: &str) {
    match (cpu, cuda) {
        (Ok(c), Ok(d)) => {
            assert_eq!(d.device(), CUDA);
            let (want, got) = (canonical(&c), canonical(&download(&d)));
            let far = want.iter().zip(&got).filter(|(w, g)| w.abs_diff(**g) > ulps).count();
            assert!(want.len() == got.len() && far == 0, "{what}: {far} elements differ by more than {ulps} ulps:\n{want:?}\n{got:?}");
        }
        (Err(c), Err(d)) => assert_eq!(c.to_string(), d.to_string(), "{what}"),
        (c, d) => panic!("{what}: cpu {:?}, cuda {:?}", c.map(|_| ()), d.map(|_| ())),
    }
}

#[test]
fn clamp_matches_the_cpu_in_every_dtype_without_the_host() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !on() {
        return;
    }
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (host0, launches0) = host_round_trips();
    for case in 0..120 {
        let dtype = DTYPES[case % 5];
        let sh = shape(&mut g);
        let (l, len) = layout(&mut g, &sh, true);
        let x = values(&mut g, dtype, len);
        let out = dense(&mut g, &sh);
        let bound = |g: &mut Gen| match g.below(6) {
            0 => None,
            1 => Some(f64::NAN),
            2 => Some(1e300),
            _ => Some((g.unit() - 0.5) * 12.0),
        };
        let (min, max) = (bound(&mut g), bound(&mut g));
        let what = format!("clamp case {case}: {dtype:?} {l:?} min {min:?} max {max:?}");
        same(x.clamp("clamp", &l, min, max, &out), upload(&x).clamp("clamp", &l, min, max, &out), &what);
    }
    let (host, launches) = host_round_trips();
    assert_eq!(host, host0, "clamp of float and i64 tensors ran on the host");
    assert!(launches > launches0);
    // Bool has no clamp: the CPU's error, through the host.
    let b = CpuStorage::Bool(vec![true]);
    let l = Layout::contiguous(&[1]);
    same(b.clamp("clamp", &l, Some(0.0), None, &l), upload(&b).clamp("clamp", &l, Some(0.0), None, &l), "bool clamp");
}

const OPS: [OpKind; 13] = [
    OpKind::Add,
    OpKind::Sub,
    OpKind::Mul,
    OpKind::Div,
    OpKind::Pow,
    OpKind::Maximum,
    OpKind::Minimum,
    OpKind::Eq,
    OpKind::Ne,
    OpKind::Lt,
    OpKind::Le,
    OpKind::Gt,
    OpKind::Ge,
];

/// The scalar ops that go through the host: what the CPU refuses (integer
/// `div`, bool `sub`/`div`/`pow`), which the host reports.
fn on_the_host(op: OpKind, dtype: DType) -> bool {
    match dtype {
        DType::I64 => op == OpKind::Div,
        DType::Bool => matches!(op, OpKind::Sub | OpKind::Div | OpKind::Pow),
        _ => false,
    }
}

#[test]
fn scalar_ops_match_the_cpu_in_every_dtype_and_order() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !on() {
        return;
    }
    let mut g = Gen(0x1234_5678_9abc_def1);
    for dtype in DTYPES {
        for op in OPS {
            for first in [false, true] {
                let sh = shape(&mut g);
                let (l, len) = layout(&mut g, &sh, true);
                let x = values(&mut g, dtype, len);
                let out = dense(&mut g, &sh);
                let s = match (dtype, g.below(5)) {
                    (_, 0) => 2.0,
                    (DType::Bool, _) => g.below(2) as f64,
                    (DType::I64, 1) => 1e30,
                    (DType::I64, _) => g.below(9) as f64 - 4.0,
                    _ => value(&mut g),
                };
                let host0 = host_round_trips().0;
                let what = format!("{op:?} {dtype:?} scalar {s} first {first} {l:?}");
                // Float `pow` calls the platform's libm (the renderer's
                // module doc): the host's on the simulator, CUDA's on a GPU.
                let ulps = if op == OpKind::Pow && dtype.is_float() { 2 } else { 0 };
                close(x.binary_scalar(op, &l, s, first, &out), upload(&x).binary_scalar(op, &l, s, first, &out), ulps, &what);
                let ran_on_host = host_round_trips().0 > host0;
                assert_eq!(ran_on_host, on_the_host(op, dtype), "{what}: ran on the host: {ran_on_host}");
            }
        }
    }
}

/// A destination layout that may visit positions more than once: a
/// random layout, or one with stride 0 (an expand), or overlapping windows.
fn destination(g: &mut Gen) -> (Layout, usize) {
    match g.below(4) {
        0 => {
            let (n, w) = (1 + g.below(5), 1 + g.below(4));
            let l = Layout::new(vec![n, w], vec![1, 1], g.below(2));
            let len = l.storage_extent();
            (l, len)
        }
        1 => {
            let sh = vec![1 + g.below(3), 1 + g.below(4)];
            let l = Layout::new(sh.clone(), vec![0, 1], 0);
            (l, sh[1] + g.below(2))
        }
        _ => {
            let sh = shape(g);
            layout(g, &sh, true)
        }
    }
}

#[test]
fn scatter_add_matches_the_cpu_where_positions_repeat_without_the_host() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !on() {
        return;
    }
    let mut g = Gen(0x0ddb_a11c_afe5_eed5);
    let (host0, launches0) = host_round_trips();
    let mut overlapping = 0;
    for case in 0..150 {
        let dtype = DTYPES[case % 6];
        // Now and then from another dtype (the CPU converts each addend).
        let src_dtype = if g.below(5) == 0 { DTYPES[g.below(6)] } else { dtype };
        let (ld, dlen) = destination(&mut g);
        overlapping += usize::from(!ld.is_non_overlapping());
        // The source: the destination's shape, or the same count flat.
        let (ls, slen) = if g.below(4) == 0 {
            let n = ld.numel();
            (Layout::new(vec![n], vec![2], 1), 2 * n + 1)
        } else {
            layout(&mut g, ld.shape(), false)
        };
        let (src, dst) = (values(&mut g, src_dtype, slen), values(&mut g, dtype, dlen));
        let mut want = dst.clone();
        let cpu = src.scatter_add("view_backward", &ls, &mut want, &ld);
        let mut got = upload(&dst);
        let cuda = upload(&src).scatter_add("view_backward", &ls, &mut got, &ld);
        let what = format!("scatter_add case {case}: {src_dtype:?} into {dtype:?}, {ls:?} into {ld:?}");
        assert_eq!(cpu.is_ok(), cuda.is_ok(), "{what}: {cpu:?} {cuda:?}");
        assert_eq!(canonical(&want), canonical(&download(&got)), "{what}");
    }
    assert!(overlapping > 20, "only {overlapping} overlapping destinations");
    let (host, launches) = host_round_trips();
    assert_eq!(host, host0, "scatter_add ran on the host");
    assert!(launches > launches0);
    // A count mismatch is refused, and writes nothing.
    let (src, dst) = (CpuStorage::F32(vec![1.0; 3]), CpuStorage::F32(vec![5.0; 2]));
    let mut got = upload(&dst);
    let e = upload(&src).scatter_add("view_backward", &Layout::contiguous(&[3]), &mut got, &Layout::contiguous(&[2]));
    assert!(matches!(e, Err(aot_runtime::AotError::ShapeMismatch { .. })), "{e:?}");
    assert_eq!(bits(&download(&got)), bits(&dst));
}
