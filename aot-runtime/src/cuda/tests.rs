//! A CUDA request never panics: without the feature (or without a GPU)
//! every constructor, transfer and primitive is `DeviceUnavailable`.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;

/// The op and the reason of a `DeviceUnavailable` error (panics otherwise).
fn unavailable<T: std::fmt::Debug>(r: Result<T>) -> (&'static str, String) {
    match r {
        Err(AotError::DeviceUnavailable { op, msg }) => (op, msg),
        other => panic!("expected DeviceUnavailable, got {other:?}"),
    }
}

/// The reason a CUDA request fails in this build on this machine.
fn expected_reason() -> &'static str {
    if cfg!(feature = "cuda") {
        "driver"
    } else {
        "built without the `cuda` feature"
    }
}

#[test]
fn cuda_requests_are_device_unavailable() {
    if super::is_available() {
        eprintln!("skipped: a CUDA GPU is present, so CUDA constructors may succeed");
        return;
    }
    let dev = Device::Cuda(0);
    let cases: Vec<(&str, Result<Tensor>)> = vec![
        ("full", Tensor::zeros(&[2], DType::F32, &dev)),
        ("full", Tensor::full(&[2, 2], 1.5, DType::F64, &dev)),
        ("from_vec", Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev)),
        ("arange", Tensor::arange(0.0, 4.0, 1.0, DType::I64, &dev)),
        ("randn", Tensor::randn(&[3], DType::F32, &dev, 0)),
        ("rand", Tensor::rand(&[3], DType::F32, &dev, 0)),
        ("to_device", Tensor::ones(&[2, 3], DType::F32, &Device::Cpu).unwrap().t().unwrap().to_device(&dev)),
    ];
    for (want_op, r) in cases {
        let (op, msg) = unavailable(r);
        assert_eq!(op, want_op);
        assert!(msg.contains(expected_reason()), "{op}: {msg}");
    }
}

#[test]
fn to_device_on_the_same_device_is_the_tensor() -> Result<()> {
    let a = Tensor::ones(&[2], DType::F32, &Device::Cpu)?;
    assert!(a.to_device(&Device::Cpu)?.same_tensor(&a));
    Ok(())
}

#[cfg(not(feature = "cuda"))]
mod dummy {
    use super::unavailable;
    use crate::backend::CpuStorage;
    use crate::backend::Rng;
    use crate::backend::{Backend, Distribution};
    use crate::cuda::dummy::REASON;
    use crate::cuda::CudaStorage;
    use crate::device::Device;
    use crate::dtype::DType;
    use crate::error::{AotError, Result};
    use crate::layout::Layout;
    use crate::storage::{Storage, StorageData};
    use aot_ir::OpKind;

    /// A named call of one backend primitive.
    type Call<'a> = (&'static str, Box<dyn Fn() -> Result<()> + 'a>);

    #[test]
    fn is_available_is_false_without_the_feature() {
        assert!(!crate::cuda::is_available());
    }

    /// Every method of the dummy backend fails with the feature's reason
    /// and the op it was called for.
    #[test]
    fn every_dummy_primitive_is_device_unavailable() {
        let s = || CudaStorage::placeholder(1, DType::F32, 6);
        let (x, l) = (s(), Layout::contiguous(&[2, 3]));
        assert_eq!((x.device(), Backend::dtype(&x), Backend::len(&x), Backend::is_empty(&x)), (Device::Cuda(1), DType::F32, 6, false));
        let dev = Device::Cuda(1);
        let host = || CpuStorage::zeros("t", DType::F32, 6).unwrap();
        let calls: Vec<Call<'_>> = vec![
            ("full", Box::new(|| CudaStorage::full("full", &dev, DType::F32, 6, 0.0).map(drop))),
            ("from_host", Box::new(|| CudaStorage::from_host("from_host", &dev, host()).map(drop))),
            ("randn", Box::new(|| CudaStorage::random("randn", &dev, Distribution::Normal, DType::F32, 6, &mut Rng::new(0)).map(drop))),
            ("to_vec", Box::new(|| x.to_host("to_vec", &l, DType::F32).map(drop))),
            ("exp", Box::new(|| x.unary(OpKind::Exp, &l, &l).map(drop))),
            ("clamp", Box::new(|| x.clamp("clamp", &l, Some(0.0), None, &l).map(drop))),
            ("add", Box::new(|| x.binary(OpKind::Add, &l, &s(), &l, &l).map(drop))),
            ("mul", Box::new(|| x.binary_scalar(OpKind::Mul, &l, 2.0, false, &l).map(drop))),
            ("sub", Box::new(|| x.binary_dense(OpKind::Sub, 0..6, &s(), 0..6).map(drop))),
            ("div", Box::new(|| s().binary_assign_dense(OpKind::Div, 0..6, &x, 0..6))),
            ("where", Box::new(|| x.where_cond("where", &l, &s(), &l, &s(), &l, &l).map(drop))),
            ("to_dtype", Box::new(|| x.cast("to_dtype", &l, DType::F64, &l).map(drop))),
            ("copy_", Box::new(|| x.copy_strided("copy_", &l, &mut s(), &l))),
            ("view_backward", Box::new(|| x.scatter_add("view_backward", &l, &mut s(), &l))),
            ("fill_", Box::new(|| s().fill("fill_", &l, 1.0))),
            ("gather", Box::new(|| x.gather("gather", &l, crate::backend::Indexed { index: &s(), layout: &l, dim: 0 }).map(drop))),
            (
                "index_add_",
                Box::new(|| x.scatter("index_add_", &l, crate::backend::Indexed { index: &s(), layout: &l, dim: 1 }, &mut s(), &l, true)),
            ),
            ("sum", Box::new(|| x.reduce(OpKind::SumDim, &l, &[], false).map(drop))),
            ("var_dim", Box::new(|| x.var("var_dim", &l, &[1], 1, false).map(drop))),
            ("log_softmax", Box::new(|| x.softmax("log_softmax", &l, 1, true).map(drop))),
            ("matmul", Box::new(|| x.matmul("matmul", &l, &s(), &l).map(drop))),
        ];
        for (want_op, call) in &calls {
            let (op, msg) = unavailable(call());
            assert_eq!((op, msg.as_str()), (*want_op, REASON));
            let shown = AotError::DeviceUnavailable { op, msg }.to_string();
            assert!(shown.starts_with(&format!("{want_op}: device unavailable")), "{shown}");
        }
        // A fused kernel is declined, so its ops run one by one and the
        // first reports itself.
        let steps = [crate::backend::FusedStep::new(aot_ir::OpKind::Neg, 0, crate::backend::FusedRhs::None, 1, DType::F32)];
        let p = crate::backend::FusedProgram { steps: &steps, num_values: 2, stored: 1, dtypes: &[DType::F32; 2], read: &[true] };
        let body = vec![
            aot_ir::Node::new(aot_ir::Op::Load(0), vec![], Some(aot_ir::ValueId(0))),
            aot_ir::Node::new(aot_ir::OpKind::Neg, vec![aot_ir::Arg::Tensor(aot_ir::ValueId(0))], Some(aot_ir::ValueId(1))),
        ];
        let stage_values = vec![aot_ir::ValueId(0), aot_ir::ValueId(1)];
        let kernel = aot_ir::kernel::Kernel {
            name: "neg".into(),
            body,
            num_values: 2,
            out: aot_ir::ValueId(1),
            extra_outs: Vec::new(),
            stage_values,
        };
        let f32s = vec![DType::F32; 2];
        let types = aot_ir::kernel::render::KernelTypes { values: f32s.clone(), compute: f32s };
        let call = crate::backend::KernelCall { kernel: &kernel, types: &types, slots: &[] };
        assert!(CudaStorage::fused("fused kernel", &p, Some(&call), &[(&x, l.clone())], &l).is_none());
    }

    /// Operands on two devices are a `DeviceMismatch` naming the op and
    /// both devices, found before any backend runs.
    #[test]
    fn mixed_devices_are_a_device_mismatch() {
        let cpu = Storage::from_host("t", &Device::Cpu, CpuStorage::zeros("t", DType::F32, 6).unwrap()).unwrap();
        let gpu = Storage::new(StorageData::Cuda(CudaStorage::placeholder(0, DType::F32, 6)));
        let l = Layout::contiguous(&[6]);
        let mism = |r: Result<Storage>, want: &str| match r {
            Err(AotError::DeviceMismatch { op, lhs, rhs }) => assert_eq!((op, lhs.as_str(), rhs.as_str()), (want, "cpu", "cuda:0")),
            other => panic!("{want}: expected DeviceMismatch, got {other:?}"),
        };
        mism(cpu.binary(OpKind::Add, &l, &gpu, &l, &l), "add");
        mism(cpu.matmul("matmul", &l, &gpu, &l), "matmul");
        mism(cpu.where_cond("where", &l, &cpu, &l, &gpu, &l, &l), "where");
        match cpu.copy_into("copy_", &l, &gpu, &l) {
            Err(AotError::DeviceMismatch { op: "copy_", lhs, rhs }) => assert_eq!((lhs.as_str(), rhs.as_str()), ("cpu", "cuda:0")),
            other => panic!("copy_: expected DeviceMismatch, got {other:?}"),
        }
        // a single-operand primitive on the CUDA storage reaches the dummy
        let (op, msg) = unavailable(gpu.unary(OpKind::Neg, &l, &l));
        assert_eq!((op, msg.as_str()), ("neg", REASON));
        assert_eq!((gpu.device(), gpu.dtype(), gpu.len()), (Device::Cuda(0), DType::F32, 6));
    }
}
