//! The eager reference on graphs built in code (the macro's own output is
//! tested from the outside, in ui-tests).

use super::{Arg, CompiledFn};
use crate::{Device, Tensor};
use aot_ir::graph::args::{f, i, ints, t};
use aot_ir::{GraphBuilder, OpKind, ParamType, ReturnKind};

pub(super) fn tensor(values: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("tensor")
}

/// `a.mul_(s); no_grad { b.add_(1) }; (a, a.view(&[-1]), a + b)`
fn sample() -> CompiledFn {
    let mut b = GraphBuilder::new("sample");
    let a = b.tensor("a", true);
    let x = b.tensor("b", true);
    let s = b.scalar("s", ParamType::F64);
    b.call(OpKind::MulInplace, a, vec![aot_ir::Arg::Scalar(s)]);
    b.set_no_grad(true);
    b.call(OpKind::AddInplace, x, vec![f(1.0)]);
    b.set_no_grad(false);
    let v = b.call(OpKind::View, a, vec![ints(&[-1])]);
    let sum = b.call(OpKind::Add, a, vec![t(x)]);
    CompiledFn::new(b.finish(vec![a, v, sum], ReturnKind::Tuple(3))).expect("valid graph")
}

#[test]
fn runs_in_place_on_the_arguments_and_returns_them() {
    let f = sample();
    let a = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = tensor(&[0.0; 4], &[2, 2]);
    let outs = f.run_eager(&[Arg::from(&a), Arg::from(&b), Arg::from(3.0)]).expect("runs");
    assert!(outs[0].same_tensor(&a));
    assert!(outs[1].shares_storage_with(&a) && !outs[1].same_tensor(&a));
    assert_eq!(a.to_vec::<f32>().expect("values"), vec![3.0, 6.0, 9.0, 12.0]);
    assert_eq!(b.to_vec::<f32>().expect("values"), vec![1.0; 4]);
    assert_eq!(outs[2].to_vec::<f32>().expect("values"), vec![4.0, 7.0, 10.0, 13.0]);
}

#[test]
fn errors_name_the_function_and_the_argument() {
    let mut b = GraphBuilder::new("reshape_it");
    let a = b.tensor("weights", false);
    let v = b.call(OpKind::View, a, vec![ints(&[5])]);
    let f = CompiledFn::new(b.finish(vec![v], ReturnKind::Single)).expect("valid graph");
    let x = tensor(&[1.0; 4], &[4]);
    let msg = f.run_eager(&[Arg::from(&x)]).expect_err("bad view").to_string();
    assert!(msg.contains("reshape_it") && msg.contains("weights"), "{msg}");

    let msg = f.run_eager(&[Arg::from(1.0)]).expect_err("bad arg").to_string();
    assert!(msg.contains("declared `&Tensor`"), "{msg}");
    let msg = sample().explain(&[Arg::from(&x)]).expect_err("arity").to_string();
    assert!(msg.contains("expected 3 arguments"), "{msg}");
}

#[test]
fn explain_reports_the_contract_keys() {
    let f = sample();
    let a = tensor(&[1.0; 4], &[2, 2]);
    let report = f.explain(&[Arg::from(&a), Arg::from(&a), Arg::from(2.0)]).expect("explains");
    let v = serde_json::to_value(&report).expect("serialises");
    let mut keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["dedupe", "fw_metadata", "synthetic_base", "synthetic_base_info"]);
    // `a` is mutated and passed twice: the dedupe specialisation applies.
    assert_eq!(v["dedupe"]["keep_arg_mask"], serde_json::json!([true, false, true]));
    // `a` passed twice: both parameters see both mutations, and the outputs
    // alias the last of them, as in PyTorch.
    let info = &report.fw_metadata.input_info;
    assert!(info[0].mutates_data && info[1].mutates_data);
    assert!(!info[0].mutations_under_no_grad_or_inference_mode);
    assert_eq!(report.fw_metadata.output_info[0].base_idx, Some(1));
    assert_eq!(
        f.graph().to_string().lines().next(),
        Some("fn sample(%0 a: &mut Tensor, %1 b: &mut Tensor, s: f64) -> (Tensor, Tensor, Tensor) {")
    );
}

#[test]
fn no_grad_nodes_run_without_grad() {
    let mut b = GraphBuilder::new("ng");
    let a = b.tensor("a", false);
    b.set_no_grad(true);
    let s = b.call(OpKind::Sin, a, vec![]);
    b.set_no_grad(false);
    let c = b.call(OpKind::Select, a, vec![i(0), i(0)]);
    let f = CompiledFn::new(b.finish(vec![s, c], ReturnKind::Tuple(2))).expect("valid graph");
    let x = tensor(&[0.5, 1.0], &[2]).requires_grad_(true).expect("leaf");
    let outs = f.run_eager(&[Arg::from(&x)]).expect("runs");
    assert!(!outs[0].requires_grad());
    assert!(outs[1].requires_grad());
    assert!(crate::is_grad_enabled());
}
