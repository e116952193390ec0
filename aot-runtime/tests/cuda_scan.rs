//! The CUDA backend's scans, index reductions and loss (`cuda/scan.rs`:
//! `cumsum`, the extremes along a dim, `nll_loss` and its gradient)
//! against the CPU backend on random shapes, strides, dims and dtypes,
//! ties and NaN included: the same bits. Then the eager ops built on them
//! (`cumsum`, `argmax`/`argmin`, `max_dim`/`min_dim`, `nll_loss`,
//! `cross_entropy` and its gradient) on CUDA tensors equal the CPU's, and
//! run as kernels (no host round trip). Runs on the simulated device
//! (`AOT_CUDA_SIM=1`, feature `cuda`); elsewhere it says it is skipped.
#![cfg(feature = "cuda")]

mod cuda_common;

use aot_runtime::backend::CpuStorage;
use aot_runtime::backend::{Backend, Targets};
use aot_runtime::layout::Layout;
use aot_runtime::testing::host_round_trips;
use aot_runtime::{DType, Device, Tensor};
use cuda_common::{bits, download, layout, on, upload, Gen, CUDA, DTYPES};

/// Values with many ties (few distinct values) and, for floats, a NaN
/// now and then.
fn values(g: &mut Gen, dtype: DType, n: usize) -> CpuStorage {
    match dtype {
        DType::I64 => CpuStorage::I64((0..n).map(|_| g.below(7) as i64 - 3).collect()),
        DType::Bool => CpuStorage::Bool((0..n).map(|_| g.below(2) == 1).collect()),
        d => {
            let v: Vec<f64> = (0..n)
                .map(|_| match g.below(40) {
                    0 => f64::NAN,
                    1..=10 => (g.below(5) as f64) - 2.0,
                    _ => (g.below(20001) as f64 - 10000.0) / 997.0,
                })
                .collect();
            CpuStorage::from_f64s("test", d, v.into_iter()).unwrap()
        }
    }
}

#[test]
fn scans_and_extremes_match_the_cpu_bit_for_bit() {
    if !on() {
        return;
    }
    let mut g = Gen(0x5ca7_cafe_d00d_f00d);
    for case in 0..90 {
        let dtype = DTYPES[case % 6];
        let rank = 1 + g.below(3);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + g.below(9)).collect();
        let dim = g.below(rank);
        let (l, len) = layout(&mut g, &shape);
        let src = values(&mut g, dtype, len);
        let dev = upload(&src);
        for reverse in [false, true] {
            let cpu = src.cumsum("cumsum", &l, dim, reverse).unwrap();
            let cuda = dev.cumsum("cumsum", &l, dim, reverse).unwrap();
            assert_eq!(bits(&cpu), bits(&download(&cuda)), "cumsum case {case}: {dtype:?} {l:?} dim {dim} reverse {reverse}");
        }
        for max in [true, false] {
            let (cv, ci) = src.extreme("max_dim", &l, dim, max).unwrap();
            let (gv, gi) = dev.extreme("max_dim", &l, dim, max).unwrap();
            assert_eq!(bits(&ci), bits(&download(&gi)), "indices case {case}: {dtype:?} {l:?} dim {dim} max {max}");
            assert_eq!(bits(&cv), bits(&download(&gv)), "values case {case}: {dtype:?} {l:?} dim {dim} max {max}");
        }
    }
}

#[test]
fn nll_loss_and_its_gradient_match_the_cpu_bit_for_bit() {
    if !on() {
        return;
    }
    let mut g = Gen(0x0dd_ba11_5eed);
    for case in 0..40 {
        let dtype = [DType::F32, DType::F64, DType::F16, DType::BF16][case % 4];
        let (n, c) = (1 + g.below(7), 1 + g.below(6));
        let (l, len) = layout(&mut g, &[n, c]);
        let x = values(&mut g, dtype, len);
        let (lt, tlen) = layout(&mut g, &[n]);
        let tv: Vec<i64> = (0..tlen).map(|_| if g.below(5) == 0 { -100 } else { g.below(c) as i64 }).collect();
        let count = lt.offsets().filter(|&o| tv[o] != -100).count();
        let tg = CpuStorage::I64(tv);
        let dtg = upload(&tg);
        let t = Targets { index: &tg, layout: &lt, classes: c, ignore: -100, count };
        let dt = Targets { index: &dtg, layout: &lt, classes: c, ignore: -100, count };
        let cpu = x.nll_loss("nll_loss", &l, t).unwrap();
        let cuda = upload(&x).nll_loss("nll_loss", &l, dt).unwrap();
        assert_eq!(bits(&cpu), bits(&download(&cuda)), "nll_loss case {case}: {dtype:?} {l:?} targets {lt:?}");
        let gr = values(&mut g, dtype, 2);
        let lg = Layout::new(vec![], vec![], 1);
        let t = Targets { index: &tg, layout: &lt, classes: c, ignore: -100, count };
        let dt = Targets { index: &dtg, layout: &lt, classes: c, ignore: -100, count };
        let cpu = gr.nll_loss_backward("nll_loss_backward", &lg, t, dtype).unwrap();
        let cuda = upload(&gr).nll_loss_backward("nll_loss_backward", &lg, dt, dtype).unwrap();
        assert_eq!(bits(&cpu), bits(&download(&cuda)), "nll_loss_backward case {case}: {dtype:?}");
    }
}

#[test]
fn eager_scans_extremes_and_losses_on_cuda_tensors_equal_the_cpus_as_kernels() {
    if !on() {
        return;
    }
    let run = |d: &Device| -> Vec<Tensor> {
        let x = Tensor::randn(&[4, 5], DType::F32, &Device::Cpu, 3).unwrap().to_device(d).unwrap().requires_grad_(true).unwrap();
        let y = Tensor::from_vec(vec![2i64, -100, 0, 4], &[4], &Device::Cpu).unwrap().to_device(d).unwrap();
        let (m, mi) = x.t().unwrap().max_dim(1, true).unwrap();
        let ce = x.cross_entropy(&y).unwrap();
        let loss = ce.add(&m.sum().unwrap()).unwrap().add(&x.cumsum(1).unwrap().sum().unwrap()).unwrap();
        loss.backward().unwrap();
        let lp = x.log_softmax(-1).unwrap().detach().unwrap();
        vec![
            ce.detach().unwrap(),
            x.cumsum(0).unwrap().detach().unwrap(),
            x.argmax(1, false).unwrap(),
            x.argmin(0, true).unwrap(),
            m.detach().unwrap(),
            mi,
            x.min_dim(-1, false).unwrap().0.detach().unwrap(),
            lp.nll_loss(&y).unwrap(),
            x.grad().unwrap(),
        ]
    };
    let cpu = run(&Device::Cpu);
    let before = host_round_trips().0;
    let cuda = run(&CUDA);
    assert_eq!(host_round_trips().0, before, "an op ran through the host");
    for (k, (a, b)) in cpu.iter().zip(&cuda).enumerate() {
        assert_eq!(b.device(), CUDA);
        assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "result {k}");
        let (a, b) = (a.to_dtype(DType::F64).unwrap(), b.to_dtype(DType::F64).unwrap().to_device(&Device::Cpu).unwrap());
        let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
        // The backward's sums and softmax may run as differently fused
        // kernels; everything else is the same bits.
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() <= 1e-6 * (1.0 + p.abs()), "result {k}: {a:?} vs {b:?}");
        }
    }
}
