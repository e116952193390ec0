//! The simulated device runs rendered kernels as the CPU backend computes
//! them: a fused kernel in f32 and f16 on a transposed, broadcast layout,
//! compared bit for bit with the CPU's fused evaluator; and a kernel that
//! synchronises (a block reduction) through the fiber launcher.

use super::{Entry, SimModule};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Device;
use aot_ir::kernel::render::{pack_params, render_cuda, Operand, ScalarSlots};
use aot_ir::kernel::{schedule, Kernel};
use aot_ir::{Arg, Node, Op, OpKind, ScalarExpr, ValueId};
use std::ffi::c_void;

/// `sigmoid(tanh(a * 1.5 + b) * 2 - 1)`, as the scheduler fuses it.
fn kernel() -> Kernel {
    let t = |v: u32| Arg::Tensor(ValueId(v));
    let lit = |x: f64| Arg::Scalar(ScalarExpr::F64(x));
    let nodes = vec![
        Node::new(Op::Primal(0), vec![], Some(ValueId(0))),
        Node::new(Op::Primal(1), vec![], Some(ValueId(1))),
        Node::new(OpKind::Mul, vec![t(0), lit(1.5)], Some(ValueId(2))),
        Node::new(OpKind::Add, vec![t(2), t(1)], Some(ValueId(3))),
        Node::new(OpKind::Tanh, vec![t(3)], Some(ValueId(4))),
        Node::new(OpKind::Mul, vec![t(4), lit(2.0)], Some(ValueId(5))),
        Node::new(OpKind::Sub, vec![t(5), lit(1.0)], Some(ValueId(6))),
        Node::new(OpKind::Sigmoid, vec![t(6)], Some(ValueId(7))),
    ];
    let s = schedule(&nodes, 8, &[ValueId(7)], 0);
    let k: Option<Kernel> = s.kernels().next().cloned();
    k.expect("one kernel")
}

/// The elements' bits, in row-major order.
fn bits(t: &Tensor, dtype: DType) -> Vec<u64> {
    match dtype {
        DType::F32 => t.to_vec::<f32>().expect("f32").iter().map(|x| u64::from(x.to_bits())).collect(),
        _ => t.to_vec::<half::f16>().expect("f16").iter().map(|x| u64::from(x.to_bits())).collect(),
    }
}

fn no_compiler() -> bool {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let missing = std::process::Command::new(&cxx).arg("--version").output().is_err();
    if missing {
        eprintln!("skipped: no host C++ compiler `{cxx}`");
    }
    missing
}

/// Runs the kernel on the simulator: `a` is [5, 7] read transposed from a
/// [7, 5] buffer, `b` a [7] row broadcast over the 5 rows.
fn run_sim(k: &Kernel, dtype: DType, a: &Tensor, b: &Tensor) -> Vec<u64> {
    let r = render_cuda(k, dtype, 2, &ScalarSlots::of(k)).expect("render");
    let st = dtype.storage();
    let entry =
        Entry { name: r.name.clone(), pointers: vec![format!("{st} *"), format!("const {st} *"), format!("const {st} *")], sync: false };
    let m = SimModule::build(&[&r.source], &[entry]).expect("build");
    let bytes = dtype.size_in_bytes();
    // The whole storage, in memory order.
    let raw = |t: &Tensor| -> Vec<u8> { bits(&t.storage_as_1d(), dtype).iter().flat_map(|w| w.to_le_bytes()[..bytes].to_vec()).collect() };
    let (mut ab, mut bb) = (raw(a), raw(b));
    let mut out = vec![0u8; 35 * bytes];
    let words = pack_params(
        &[5, 7],
        Operand { offset: 0, strides: &[7, 1] },
        &[Operand { offset: 0, strides: &[1, 5] }, Operand { offset: 0, strides: &[0, 1] }],
        &[],
    )
    .expect("params");
    let bufs = [out.as_mut_ptr() as *mut c_void, ab.as_mut_ptr() as *mut c_void, bb.as_mut_ptr() as *mut c_void];
    // SAFETY: the buffers hold [35], [35] and [7] elements of the storage
    // type, which is what the parameters address.
    unsafe { m.launch(&r.name, 2, 32, &bufs, &words) }.expect("launch");
    out.chunks(bytes).map(|c| c.iter().rev().fold(0u64, |w, &x| (w << 8) | u64::from(x))).collect()
}

#[test]
fn the_simulator_runs_fused_kernels_bit_for_bit_as_the_cpu() {
    if no_compiler() {
        return;
    }
    let k = kernel();
    for dtype in [DType::F32, DType::F16] {
        let a_buf = Tensor::randn(&[7, 5], DType::F32, &Device::Cpu, 11).and_then(|t| t.to_dtype(dtype)).expect("a");
        let a = a_buf.t().expect("t");
        let b = Tensor::randn(&[7], DType::F32, &Device::Cpu, 12).and_then(|t| t.to_dtype(dtype)).expect("b");
        let y = (&a * 1.5).and_then(|t| &t + &b).and_then(|t| t.tanh()).and_then(|t| &t * 2.0).and_then(|t| &t - 1.0);
        let want = bits(&y.and_then(|t| t.sigmoid()).expect("eager"), dtype);
        assert_eq!(run_sim(&k, dtype, &a, &b), want, "{dtype:?}");
    }
}

#[test]
fn the_simulator_runs_kernels_that_synchronise() {
    if no_compiler() {
        return;
    }
    let src = "struct aot_params_block_sum { long long n; };
extern \"C\" __global__ void block_sum(float *out, const float *in, const aot_params_block_sum p) {
    __shared__ float buf[128];
    const unsigned t = threadIdx.x;
    float v = 0.0f;
    for (long long i = t; i < p.n; i += blockDim.x) v += in[i];
    buf[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 32; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t < 32) {
        v = buf[t] + buf[t + 32];
        for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
        if (t == 0) out[0] = v;
    }
}";
    let entry = Entry { name: "block_sum".into(), pointers: vec!["float *".into(), "const float *".into()], sync: true };
    let m = SimModule::build(&[src], &[entry]).expect("build");
    let mut input: Vec<f32> = (0..1000).map(|i| (i % 17) as f32).collect();
    let mut out = [0.0f32];
    let bufs = [out.as_mut_ptr() as *mut c_void, input.as_mut_ptr() as *mut c_void];
    // SAFETY: `n` is the input's length; the output has one element.
    unsafe { m.launch("block_sum", 1, 128, &bufs, &[1000]) }.expect("launch");
    assert_eq!(out[0], (0..1000).map(|i| (i % 17) as f32).sum::<f32>());
    // A wrong word count is an error, not a bad read.
    // SAFETY: as above; the launch is refused before the kernel runs.
    let e = unsafe { m.launch("block_sum", 1, 128, &bufs, &[1000, 0]) };
    assert!(e.is_err());
}
