//! The verifier: structural invariants every graph must keep. Passes run it
//! after themselves in debug builds ([`checked`]), so a pass that breaks the
//! graph fails at the pass, not three passes later in a kernel.

use crate::graph::{Graph, ValueDef};
use crate::op::ParamKind;
use crate::types::{Arg, ScalarExpr, ScalarTy};
use thiserror::Error;

/// A broken invariant, with where it broke.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    #[error("node {node} (`{op}`): {msg}")]
    Node { node: usize, op: &'static str, msg: String },
    #[error("parameter {param}: {msg}")]
    Param { param: usize, msg: String },
    #[error("value {value}: {msg}")]
    Value { value: u32, msg: String },
    #[error("outputs: {0}")]
    Outputs(String),
}

/// Checks every invariant of the graph.
///
/// - Each value is defined exactly once, by the parameter or node its
///   [`ValueDef`] names, and every use comes after its definition.
/// - Every node matches its op's signature: argument count and kinds, an
///   output exactly when the op is not in place, integer arguments where the
///   op wants integers.
/// - Scalar parameters are referenced only as scalars, tensors only as values.
/// - The outputs are defined values and match the return kind.
pub fn verify(g: &Graph) -> Result<(), VerifyError> {
    let n_values = g.values.len();
    let mut defined = vec![false; n_values];
    let param_types = g.param_types();

    for (i, p) in g.params.iter().enumerate() {
        match (p.ty.is_tensor(), p.value) {
            (true, Some(v)) => {
                let info =
                    g.values.get(v.index()).ok_or_else(|| VerifyError::Param { param: i, msg: format!("value {v} does not exist") })?;
                if info.def != ValueDef::Param(i) {
                    return Err(VerifyError::Param { param: i, msg: format!("value {v} is not defined by this parameter") });
                }
                mark(&mut defined, v.0)?;
            }
            (false, None) => {}
            (true, None) => return Err(VerifyError::Param { param: i, msg: "tensor parameter without a value".into() }),
            (false, Some(_)) => return Err(VerifyError::Param { param: i, msg: "scalar parameter with a tensor value".into() }),
        }
    }

    for (n, node) in g.nodes.iter().enumerate() {
        let sig = node.op.sig();
        let err = |msg: String| VerifyError::Node { node: n, op: sig.name, msg };
        if node.args.len() != sig.params.len() + 1 {
            return Err(err(format!("expected {} arguments, found {}", sig.params.len() + 1, node.args.len())));
        }
        match &node.args[0] {
            Arg::Tensor(_) => {}
            _ => return Err(err("the receiver is not a tensor".into())),
        }
        for (k, (arg, kind)) in node.args[1..].iter().zip(sig.params).enumerate() {
            check_arg(arg, *kind, &param_types).map_err(|m| err(format!("argument {}: {m}", k + 1)))?;
        }
        for v in node.tensor_args() {
            if !defined.get(v.index()).copied().unwrap_or(false) {
                return Err(err(format!("uses {v} before it is defined")));
            }
        }
        match (node.op.is_inplace(), node.out) {
            (true, None) => {}
            (false, Some(out)) => {
                let info = g.values.get(out.index()).ok_or_else(|| err(format!("output {out} does not exist")))?;
                if info.def != ValueDef::Node(n) {
                    return Err(err(format!("output {out} is not defined by this node")));
                }
                mark(&mut defined, out.0)?;
            }
            (true, Some(_)) => return Err(err("an in-place op must not define a value".into())),
            (false, None) => return Err(err("an op that is not in place must define a value".into())),
        }
    }

    if let Some(v) = defined.iter().position(|d| !d) {
        return Err(VerifyError::Value { value: v as u32, msg: "never defined".into() });
    }
    for v in &g.outputs {
        if v.index() >= n_values {
            return Err(VerifyError::Outputs(format!("{v} does not exist")));
        }
    }
    if g.outputs.len() != g.ret.arity() {
        return Err(VerifyError::Outputs(format!("{} outputs for a return type of {}", g.outputs.len(), g.ret.arity())));
    }
    Ok(())
}

/// Runs [`verify`] in debug builds and passes the graph through. Every pass
/// ends with `checked(graph, "pass name")`.
pub fn checked(g: Graph, pass: &str) -> Result<Graph, VerifyError> {
    if cfg!(debug_assertions) {
        verify(&g).map_err(|e| match e {
            VerifyError::Node { node, op, msg } => VerifyError::Node { node, op, msg: format!("after {pass}: {msg}") },
            other => other,
        })?;
    }
    Ok(g)
}

fn mark(defined: &mut [bool], v: u32) -> Result<(), VerifyError> {
    match defined.get_mut(v as usize) {
        Some(d) if !*d => {
            *d = true;
            Ok(())
        }
        Some(_) => Err(VerifyError::Value { value: v, msg: "defined twice".into() }),
        None => Err(VerifyError::Value { value: v, msg: "out of range".into() }),
    }
}

fn check_arg(arg: &Arg, kind: ParamKind, params: &[crate::types::ParamType]) -> Result<(), String> {
    let scalar = |s: &ScalarExpr, want: &[ScalarTy]| match s.ty(params) {
        Some(t) if want.contains(&t) => Ok(()),
        Some(t) => Err(format!("expected {}, found a {} scalar", kind.describe(), t.name())),
        None => Err("refers to a parameter that is not a scalar".to_string()),
    };
    match (kind, arg) {
        (ParamKind::Tensor, Arg::Tensor(_)) => Ok(()),
        (ParamKind::Operand, Arg::Tensor(_)) => Ok(()),
        (ParamKind::Operand | ParamKind::Float, Arg::Scalar(s)) => scalar(s, &[ScalarTy::Float, ScalarTy::Int]),
        (ParamKind::Int, Arg::Scalar(s)) => scalar(s, &[ScalarTy::Int]),
        (ParamKind::Bool, Arg::Scalar(s)) => scalar(s, &[ScalarTy::Bool]),
        (ParamKind::Ints, Arg::Ints(v)) => v.iter().try_for_each(|s| scalar(s, &[ScalarTy::Int])),
        (ParamKind::DType, Arg::DType(_)) => Ok(()),
        _ => Err(format!("expected {}", kind.describe())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::args::*;
    use crate::graph::{GraphBuilder, Node, ReturnKind};
    use crate::op::OpKind;
    use crate::types::{SpanId, ValueId};

    fn sample() -> Graph {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", true);
        b.call(OpKind::MulInplace, a, vec![f(2.0)]);
        let o = b.call(OpKind::View, a, vec![ints(&[-1])]);
        b.finish(vec![o], ReturnKind::Single)
    }

    #[test]
    fn accepts_a_good_graph() {
        assert_eq!(verify(&sample()), Ok(()));
        assert!(checked(sample(), "test").is_ok());
    }

    #[test]
    fn rejects_use_before_def_and_bad_kinds() {
        let mut g = sample();
        g.nodes[0].args[0] = Arg::Tensor(ValueId(2));
        assert!(matches!(verify(&g), Err(VerifyError::Node { node: 0, .. })));

        let mut g = sample();
        g.nodes[1].args[1] = f(1.0);
        assert!(verify(&g).unwrap_err().to_string().contains("integer list"));

        let mut g = sample();
        g.nodes[0].out = Some(ValueId(1));
        assert!(verify(&g).is_err());

        let mut g = sample();
        g.outputs.push(ValueId(0));
        assert!(matches!(verify(&g), Err(VerifyError::Outputs(_))));

        let mut g = sample();
        g.nodes.push(Node { op: OpKind::Select, args: vec![t(ValueId(0)), f(0.5), i(0)], out: None, no_grad: false, span: SpanId(0) });
        assert!(verify(&g).is_err());
    }
}
