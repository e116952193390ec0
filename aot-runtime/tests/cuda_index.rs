//! The CUDA backend's `gather` and `scatter` (`cuda/index.rs`: the take
//! kernel, and scatter_add's plan kernels) against the CPU backend, on
//! random shapes, strides, dims, dtypes and index values, repeated
//! destinations included: the same bits. Out-of-range indices are the
//! CPU's error and write nothing. Then the eager ops built on them
//! (`index_select`, `gather`, `scatter_add`, `embedding`, `index_copy_`,
//! `index_add_`, `cat`, `stack`) on CUDA tensors equal the CPU's.
//! Runs on the simulated device (`AOT_CUDA_SIM=1`, feature `cuda`);
//! elsewhere it says it is skipped.
#![cfg(feature = "cuda")]

mod cuda_common;

use aot_runtime::backend::{Backend, Indexed};

use aot_runtime::backend::CpuStorage;
use aot_runtime::layout::Layout;
use aot_runtime::{DType, Device, Tensor};
use cuda_common::{bits, download, layout, on, upload, Gen, CUDA, DTYPES};

fn values(g: &mut Gen, dtype: DType, n: usize) -> CpuStorage {
    match dtype {
        DType::I64 => CpuStorage::I64((0..n).map(|_| g.below(2001) as i64 - 1000).collect()),
        DType::Bool => CpuStorage::Bool((0..n).map(|_| g.below(2) == 1).collect()),
        d => CpuStorage::from_f64s("test", d, (0..n).map(|_| (g.below(20001) as f64 - 10000.0) / 997.0).collect::<Vec<_>>().into_iter())
            .unwrap(),
    }
}

/// A data shape, a dim, and an index shape that fits it (any size at `dim`).
fn case_shapes(g: &mut Gen) -> (Vec<usize>, usize, Vec<usize>) {
    let rank = 1 + g.below(3);
    let data: Vec<usize> = (0..rank).map(|_| 1 + g.below(4)).collect();
    let dim = g.below(rank);
    let index = data.iter().enumerate().map(|(k, &n)| if k == dim { g.below(6) } else { 1 + g.below(n) }).collect();
    (data, dim, index)
}

fn index_values(g: &mut Gen, n: usize, size: usize) -> CpuStorage {
    CpuStorage::I64((0..n).map(|_| g.below(size) as i64).collect())
}

#[test]
fn gather_and_scatter_match_the_cpu_bit_for_bit() {
    if !on() {
        return;
    }
    let mut g = Gen(0x1dec_a5e5_0f1d_e9e5);
    let mut repeats = 0;
    for case in 0..120 {
        let dtype = DTYPES[case % 6];
        let (data, dim, ishape) = case_shapes(&mut g);
        let (li, ilen) = layout(&mut g, &ishape);
        let index = index_values(&mut g, ilen, data[dim]);
        // gather
        let (l, len) = layout(&mut g, &data);
        let src = values(&mut g, dtype, len);
        let cpu = src.gather("gather", &l, Indexed { index: &index, layout: &li, dim }).unwrap();
        let cuda = upload(&src).gather("gather", &l, Indexed { index: &upload(&index), layout: &li, dim }).unwrap();
        assert_eq!(bits(&cpu), bits(&download(&cuda)), "gather case {case}: {dtype:?} {l:?} by {li:?} at {dim}");
        // scatter, copying and accumulating, into a strided destination
        let (ld, dlen) = layout(&mut g, &data);
        let (ls, slen) = layout(&mut g, &ishape);
        let (s, d) = (values(&mut g, dtype, slen), values(&mut g, dtype, dlen));
        repeats += usize::from(ishape[dim] > data[dim]);
        for accumulate in [false, true] {
            let mut want = d.clone();
            s.scatter("scatter", &ls, Indexed { index: &index, layout: &li, dim }, &mut want, &ld, accumulate).unwrap();
            let mut got = upload(&d);
            upload(&s).scatter("scatter", &ls, Indexed { index: &upload(&index), layout: &li, dim }, &mut got, &ld, accumulate).unwrap();
            assert_eq!(bits(&want), bits(&download(&got)), "scatter case {case} (accumulate {accumulate}): {dtype:?}");
        }
    }
    assert!(repeats > 10, "only {repeats} cases with repeated destinations");
}

#[test]
fn out_of_range_indices_are_the_cpus_error_and_write_nothing() {
    if !on() {
        return;
    }
    let l = Layout::contiguous(&[2, 3]);
    let li = Layout::contiguous(&[2, 2]);
    let src = CpuStorage::F32(vec![1.0; 6]);
    for bad in [vec![0i64, 3, 1, 1], vec![-1, 0, 0, 0]] {
        let index = CpuStorage::I64(bad);
        let ix = Indexed { index: &index, layout: &li, dim: 1 };
        let cpu = src.gather("gather", &l, ix).unwrap_err();
        let cuda = upload(&src).gather("gather", &l, Indexed { index: &upload(&index), layout: &li, dim: 1 }).unwrap_err();
        assert_eq!(cpu.to_string(), cuda.to_string());
        let dst = CpuStorage::F32(vec![5.0; 6]);
        let mut got = upload(&dst);
        let e = upload(&CpuStorage::F32(vec![2.0; 4]))
            .scatter("index_add_", &li, Indexed { index: &upload(&index), layout: &li, dim: 1 }, &mut got, &l, true)
            .unwrap_err();
        assert!(e.to_string().contains("index_add_"), "{e}");
        assert_eq!(bits(&download(&got)), bits(&dst));
    }
}

fn on_both(f: impl Fn(&Device) -> Vec<Tensor>) {
    let (cpu, cuda) = (f(&Device::Cpu), f(&CUDA));
    for (a, b) in cpu.iter().zip(&cuda) {
        assert_eq!(b.device(), CUDA);
        assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()));
        assert_eq!(a.to_vec::<f64>().unwrap(), b.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap());
    }
}

#[test]
fn eager_index_ops_on_cuda_tensors_equal_the_cpus() {
    if !on() {
        return;
    }
    on_both(|d| {
        let x = Tensor::arange(0.0, 12.0, 1.0, DType::F64, d).unwrap().view(&[3, 4]).unwrap();
        let idx = Tensor::from_vec(vec![2i64, 0, 2], &[3], &Device::Cpu).unwrap().to_device(d).unwrap();
        let gi = Tensor::from_vec(vec![1i64, 0, 3, 3, 2, 1], &[3, 2], &Device::Cpu).unwrap().to_device(d).unwrap();
        let src = x.narrow(1, 0, 2).unwrap();
        let cache = Tensor::zeros(&[3, 4], DType::F64, d).unwrap();
        cache.index_copy_(1, &idx.narrow(0, 0, 2).unwrap(), &src.mul(2.0).unwrap()).unwrap();
        let acc = x.copy().unwrap();
        acc.index_add_(0, &idx, &x).unwrap();
        vec![
            x.index_select(0, &idx).unwrap(),
            x.gather(1, &gi).unwrap(),
            x.scatter_add(1, &gi, &src).unwrap(),
            idx.embedding(&x).unwrap(),
            cache,
            acc,
            Tensor::cat(&[&x, &src.t().unwrap().to_dtype(DType::F32).unwrap().t().unwrap()], 1).unwrap(),
            Tensor::stack(&[&x, &x], 1).unwrap(),
        ]
    });
}
