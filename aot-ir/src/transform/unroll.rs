//! Loops whose bounds are known only at call time (`for t in 0..x.size(1)`,
//! `for i in 0..n`): the macro traces the body once, as a graph of its own
//! ([`LoopBody`]), held by a loop node ([`Op::Call`] with
//! [`CallSite::body`] set). The runtime evaluates the bounds of a call and
//! unrolls the loop that many times ([`unroll_first`]), so every later
//! pass sees one straight-line program, as with a loop the macro unrolls
//! itself; one specialisation per trip count.
//!
//! A loop node's arguments are its bounds (`start`, `end`, end exclusive),
//! then what the body reads from outside: tensors it reads or writes in
//! place (a write is a write of the caller's tensor, as a callee's), scalar
//! expressions, and the initial values of the bindings it reassigns (the
//! loop-carried values). Its results are those bindings' values after the
//! last iteration; with no iteration, their values before the loop.

use super::inline::{inline, Emit, Resolve, Splice};
use crate::graph::{CallSite, Graph, Node, Op};
use crate::types::{Arg, ScalarExpr, ValueId};

pub use crate::graph::call::LoopBody;

/// The first loop node still to unroll, by node index.
pub fn first_loop(g: &Graph) -> Option<usize> {
    g.nodes.iter().position(|n| matches!(&n.op, Op::Call(site) if site.body.is_some()))
}

/// The bodies of `g`'s loops, nested ones included (the macro checks each
/// as it checks the function's graph).
pub fn loop_bodies(g: &Graph) -> Vec<&Graph> {
    let mut out = Vec::new();
    for n in &g.nodes {
        if let Op::Call(site) = &n.op {
            if let Some(b) = &site.body {
                out.push(&b.graph);
                out.extend(loop_bodies(&b.graph));
            }
        }
    }
    out
}

/// Whether a graph holds a loop still to unroll.
pub fn has_loops(g: &Graph) -> bool {
    first_loop(g).is_some()
}

/// `g` with its first loop node replaced by `count` copies of the body, the
/// loop variable `start`, `start + 1`, ... in turn. Later loops stay loops
/// (their bounds may read the values this one computes). Errors are
/// messages.
pub fn unroll_first(g: &Graph, start: i64, count: i64) -> Result<Graph, String> {
    let first = first_loop(g).ok_or("the graph holds no loop")?;
    let mut s = Splice::new(g);
    for (i, node) in g.nodes.iter().enumerate() {
        s.pos.push(s.b.graph().nodes.len());
        match &node.op {
            Op::Call(site) if i == first => s.unroll(node, site, start, count)?,
            Op::Call(site) if site.body.is_some() => s.copy_loop(node, site, None)?,
            Op::Call(site) => return Err(format!("the call of `{}` was not inlined", site.callee)),
            _ => s.copy(node)?,
        }
    }
    s.finish(g)
}

impl Splice {
    /// A node's arguments in the new graph's terms.
    fn caller_args(&mut self, args: &[Arg]) -> Result<Vec<Arg>, String> {
        args.iter()
            .map(|a| {
                Ok(match a {
                    Arg::Tensor(v) => Arg::Tensor(self.value(*v)?),
                    Arg::Scalar(e) => Arg::Scalar(self.caller_scalar(e)?),
                    Arg::Ints(items) => Arg::Ints(items.iter().map(|e| self.caller_scalar(e)).collect::<Result<_, _>>()?),
                    Arg::DType(d) => Arg::DType(*d),
                })
            })
            .collect()
    }

    /// A loop node of the caller copied as a loop. With `resolve`, the
    /// calls in its body are inlined first; the struct fields those
    /// callees read become arguments of the loop (inputs of the caller).
    pub(super) fn copy_loop(&mut self, node: &Node, site: &CallSite, resolve: Option<&mut Resolve<'_>>) -> Result<(), String> {
        let body = site.body.as_ref().ok_or("not a loop")?;
        let mut args = self.caller_args(&node.args)?;
        let mut body = (**body).clone();
        if let Some(resolve) = resolve {
            let before = body.graph.params.len();
            body.graph = inline(&body.graph, resolve)?;
            for p in &body.graph.params[before..] {
                args.push(Arg::Tensor(self.field(&p.name, p.ty, node.span)));
            }
        }
        self.b.set_no_grad(node.no_grad);
        let n = site.results.as_ref().map(Vec::len);
        let made = self.b.call_fn(CallSite { body: Some(Box::new(body)), results: None, ..site.clone() }, args, n, node.span);
        for (old, new) in site.results.iter().flatten().zip(made) {
            self.map[old.index()] = Some(new);
        }
        Ok(())
    }

    /// A loop node of the caller unrolled `count` times.
    fn unroll(&mut self, node: &Node, site: &CallSite, start: i64, count: i64) -> Result<(), String> {
        let body = site.body.as_ref().ok_or("not a loop")?;
        let g = &body.graph;
        let mut cur = self.caller_args(node.args.get(2..).unwrap_or(&[]))?;
        if cur.len() + 1 != g.params.len() || body.carried.len() != g.outputs.len() {
            return Err(format!("the loop `{}` has {} arguments for a body of {} parameters", site.callee, cur.len(), g.params.len()));
        }
        for k in 0..count {
            let t = start.checked_add(k).ok_or_else(|| format!("the loop variable of `{}` overflows", site.callee))?;
            let mut tensors: Vec<Option<ValueId>> = vec![None; g.values.len()];
            let mut scalars: Vec<Option<ScalarExpr>> = vec![None; g.params.len()];
            scalars[0] = Some(ScalarExpr::I64(t));
            for (j, p) in g.params.iter().enumerate().skip(1) {
                match (&cur[j - 1], p.value) {
                    (Arg::Tensor(v), Some(pv)) => tensors[pv.index()] = Some(*v),
                    (Arg::Scalar(e), None) => scalars[j] = Some(e.clone()),
                    _ => return Err(format!("argument {j} of the loop `{}` does not match its body's parameter", site.callee)),
                }
            }
            let how = Emit { name: &site.callee, prefix: None, no_grad: node.no_grad, span: None };
            self.emit_body(g, &mut tensors, &scalars, how)?;
            for (o, &p) in g.outputs.iter().zip(&body.carried) {
                let v = tensors[o.index()].ok_or_else(|| format!("`{}`: output {o} is undefined", site.callee))?;
                *cur.get_mut(p.wrapping_sub(1)).ok_or("a carried value is not a parameter of the body")? = Arg::Tensor(v);
            }
        }
        for (r, &p) in site.results.iter().flatten().zip(&body.carried) {
            let v = cur.get(p.wrapping_sub(1)).and_then(Arg::as_tensor).ok_or("a carried value is not a tensor")?;
            self.map[r.index()] = Some(v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{args, GraphBuilder, ReturnKind};
    use crate::op::OpKind;
    use crate::types::{ParamType, SpanId};

    /// `fn f(x, n) { let mut h = x * 1; for t in 0..n { h = h * t } h }`.
    fn looped() -> Graph {
        let mut body = GraphBuilder::new("f::for");
        let t = body.scalar("t", ParamType::I64);
        let h = body.tensor("h", true);
        let next = body.call(OpKind::Mul, h, vec![Arg::Scalar(t)]);
        let body = LoopBody { var: "t".into(), graph: body.finish(vec![next], ReturnKind::Tuple(1)), carried: vec![1] };
        let mut b = GraphBuilder::new("f");
        let x = b.tensor("x", false);
        let n = b.scalar("n", ParamType::I64);
        let h = b.call(OpKind::Mul, x, vec![args::f(1.0)]);
        let site = CallSite { callee: "for t in ..".into(), index: 0, trees: Vec::new(), results: None, body: Some(Box::new(body)) };
        let r = b.call_fn(site, vec![args::i(0), Arg::Scalar(n), Arg::Tensor(h)], Some(1), SpanId(9));
        b.finish(r, ReturnKind::Single)
    }

    #[test]
    fn a_loop_unrolls_to_its_trip_count() {
        let g = looped();
        crate::verify(&g).expect("a valid loop");
        assert_eq!(first_loop(&g), Some(1));
        let two = unroll_first(&g, 3, 2).expect("unrolled");
        assert!(!has_loops(&two));
        let listing = two.to_string();
        assert!(listing.contains("%2 = mul(%1, 3)") && listing.contains("%3 = mul(%2, 4)"), "{listing}");
        assert!(listing.contains("return %3"), "{listing}");
        // No iteration: the result is the value before the loop.
        let zero = unroll_first(&g, 0, 0).expect("unrolled");
        assert_eq!(zero.nodes.len(), 1);
        assert_eq!(zero.outputs, vec![zero.nodes[0].value()]);
    }
}
