//! Every reduction kind, in every float dtype (and integer and bool sums),
//! with a prologue, an epilogue reading a second input and a scalar slot,
//! renders to CUDA C that the real NVRTC compiles for `compute_80` and
//! `compute_90` (each unit alone, and all of them as one unit), and whose
//! PTX ptxas assembles for `sm_80` and `sm_90`.

use crate::cuda::nvrtc;
use aot_ir::kernel::render::{render_cuda, ScalarSlots};
use aot_ir::kernel::Kernel;
use aot_ir::{Arg, DType, Node, Op, OpKind, ScalarExpr, ValueId};

fn t(v: u32) -> Arg {
    Arg::Tensor(ValueId(v))
}

/// `load x, load y; r = <op>(exp(x) * s); out = r + y` (for integer
/// operands, `abs` instead of `exp`, which keeps them integers).
fn kernel(op: OpKind, float: bool, name: String) -> Kernel {
    let keep = Arg::Scalar(ScalarExpr::Bool(true));
    let dims = Arg::Ints(vec![ScalarExpr::I64(1)]);
    let args = match op {
        OpKind::Sum | OpKind::Mean => vec![t(3)],
        OpKind::VarDim => vec![t(3), dims, Arg::Scalar(ScalarExpr::I64(1)), keep],
        OpKind::Softmax | OpKind::LogSoftmax => vec![t(3), Arg::Scalar(ScalarExpr::I64(1))],
        _ => vec![t(3), dims, keep],
    };
    let pro = if float { OpKind::Exp } else { OpKind::Abs };
    let scale = if float { Arg::Scalar(ScalarExpr::Param(0)) } else { Arg::Scalar(ScalarExpr::I64(3)) };
    let body = vec![
        Node::new(Op::Load(0), vec![], Some(ValueId(0))),
        Node::new(Op::Load(1), vec![], Some(ValueId(1))),
        Node::new(pro, vec![t(0)], Some(ValueId(2))),
        Node::new(OpKind::Mul, vec![t(2), scale], Some(ValueId(3))),
        Node::new(op, args, Some(ValueId(4))),
        Node::new(OpKind::Add, vec![t(4), t(1)], Some(ValueId(5))),
    ];
    Kernel { name, body, num_values: 6, out: ValueId(5), extra_outs: Vec::new(), stage_values: (0..6).map(ValueId).collect() }
}

const KINDS: [OpKind; 8] =
    [OpKind::Sum, OpKind::Mean, OpKind::SumDim, OpKind::MeanDim, OpKind::AmaxDim, OpKind::VarDim, OpKind::Softmax, OpKind::LogSoftmax];

/// Every unit: (entry, source).
fn units() -> Vec<(String, String)> {
    let mut all = Vec::new();
    let mut add = |op: OpKind, dtype: DType, rank: usize| {
        let float = dtype.is_float();
        let k = kernel(op, float, format!("k_{}_{dtype:?}_{rank}", op.name()).to_lowercase());
        let r = render_cuda(&k, dtype, rank, &ScalarSlots::of(&k)).unwrap_or_else(|e| panic!("{op:?} {dtype:?}: {e}"));
        all.push((r.name, r.source));
    };
    for (i, op) in KINDS.into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            add(op, dtype, [0, 1, 2, 3][i % 4]);
        }
    }
    // i64 inputs sum to i64 (eager's promotion) and keep their maximum.
    for op in [OpKind::Sum, OpKind::SumDim, OpKind::AmaxDim] {
        add(op, DType::I64, 2);
    }
    all
}

#[test]
fn every_reduction_kind_and_dtype_compiles_with_nvrtc_and_ptxas() {
    if let Err(why) = nvrtc::nvrtc_status() {
        assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let units = units();
    assert_eq!(units.len(), 35);
    for (name, source) in &units {
        nvrtc::compile_ptx(name, source, "compute_80").unwrap_or_else(|e| panic!("{e}\n{source}"));
    }
    let ptxas = nvrtc::ptxas().expect("ptxas next to NVRTC");
    let unit: String = units.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>().join("\n");
    for (arch, sm) in [("compute_80", "sm_80"), ("compute_90", "sm_90")] {
        let ptx = nvrtc::compile_ptx("reductions", &unit, arch).unwrap_or_else(|e| panic!("{e}"));
        for (name, _) in &units {
            assert!(ptx.contains(&format!(".entry {name}(")), "{name} in the PTX");
        }
        let dir = std::env::temp_dir().join(format!("aot-reduce-ptxas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join(format!("{sm}.ptx"));
        std::fs::write(&file, &ptx).expect("write ptx");
        let out = std::process::Command::new(&ptxas)
            .arg(format!("-arch={sm}"))
            .arg("-o")
            .arg(dir.join(format!("{sm}.cubin")))
            .arg(&file)
            .output()
            .expect("run ptxas");
        assert!(out.status.success(), "ptxas {sm}: {}", String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
