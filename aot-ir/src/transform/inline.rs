//! Inlining: the calls of a traced source graph ([`Op::Call`]) replaced by
//! the callees' graphs, so that every later pass (the mutation and alias
//! metadata, functionalization, partitioning, the kernel stage's fusion)
//! sees one program, as if each callee's body were written in place.
//!
//! The macro cannot see a callee's body, so it records the call; the
//! runtime resolves each callee (its graph with its own calls already
//! inlined) and splices it here. A callee's tensor parameters become the
//! caller's argument values (its in-place writes write them, and a
//! returned parameter is that very value); its scalar parameters become
//! the caller's scalar expressions, evaluated at call time; fields of its
//! struct parameters become the caller's field inputs (`blk.w1` passed
//! `&m.blocks[1]` reads `m.blocks.1.w1`, an input added to the caller
//! when the caller did not use it itself). `no_grad` regions carry over.
//!
//! A loop over call-time bounds ([`crate::transform::unroll`]) is copied as
//! a loop, with the calls of its body inlined the same way; the struct
//! fields its callees read become inputs of the caller, passed to the loop.
//!
//! The call's types ([`CallSite`], [`TreeArg`]) are defined with the node
//! types, in `graph::call`, since a node holds them; they are re-exported
//! here.

use crate::graph::{Graph, GraphBuilder, Node, Op, ValueDef, ValueSizeRead};
use crate::types::{Arg, ParamType, ScalarExpr, ScalarTy, SpanId, ValueId};

pub use crate::graph::call::{CallArg, CallSite, TreeArg};

/// A callee as the runtime resolved it.
pub struct Callee {
    /// Its graph, free of calls.
    pub graph: Graph,
    /// Its Rust parameters in order: name, and whether it is a struct.
    pub params: Vec<(String, bool)>,
}

/// How the runtime resolves a call (with the node's arguments) to its callee.
pub type Resolve<'a> = dyn FnMut(&CallSite, &[Arg]) -> Result<Callee, String> + 'a;

/// `caller` with every call replaced by its callee's graph; `resolve`
/// gives the callee of a call (seeing the call's arguments, which pick
/// the variant of a callee that branches on a `bool`). Errors are
/// messages naming the callee and the argument.
pub fn inline(caller: &Graph, resolve: &mut Resolve<'_>) -> Result<Graph, String> {
    let mut s = Splice::new(caller);
    for node in &caller.nodes {
        s.pos.push(s.b.graph().nodes.len());
        match &node.op {
            Op::Call(site) if site.body.is_some() => s.copy_loop(node, site, Some(&mut *resolve))?,
            Op::Call(site) => {
                let callee = resolve(site, &node.args)?;
                s.call(caller, node, site, &callee)?;
            }
            _ => s.copy(node)?,
        }
    }
    s.finish(caller)
}

pub(super) struct Splice {
    pub(super) b: GraphBuilder,
    /// The caller's values to the new graph's.
    pub(super) map: Vec<Option<ValueId>>,
    /// Names for the callees' values (`gelu::h`), given after the caller's.
    pub(super) names: Vec<(ValueId, String)>,
    /// The caller's reads of computed sizes ([`Graph::value_sizes`]).
    pub(super) reads: Vec<ValueSizeRead>,
    /// Per caller node so far: how many nodes the new graph held before it.
    pub(super) pos: Vec<usize>,
}

impl Splice {
    /// A splice of `caller` into a new graph with the caller's parameters.
    pub(super) fn new(caller: &Graph) -> Splice {
        let mut s = Splice {
            b: GraphBuilder::new(caller.name.clone()),
            map: vec![None; caller.values.len()],
            names: Vec::new(),
            reads: caller.value_sizes.clone(),
            pos: Vec::with_capacity(caller.nodes.len() + 1),
        };
        for p in &caller.params {
            let v = s.b.param(p.name.clone(), p.ty, p.span);
            if let (Some(old), Some(new)) = (p.value, v) {
                s.map[old.index()] = Some(new);
            }
        }
        s
    }

    /// The new graph, with the caller's names, then the callees'.
    pub(super) fn finish(mut self, caller: &Graph) -> Result<Graph, String> {
        for (old, info) in caller.values.iter().enumerate() {
            if let (Some(name), Some(new)) = (&info.name, self.map[old]) {
                self.b.name_value(new, name);
            }
        }
        for (v, name) in std::mem::take(&mut self.names) {
            self.b.name_value(v, &name);
        }
        let outputs = caller.outputs.iter().map(|&v| self.value(v)).collect::<Result<Vec<_>, _>>()?;
        let g = self.b.finish(outputs, caller.ret);
        crate::verify(&g).map_err(|e| format!("the inlined graph is invalid: {e}"))?;
        Ok(g)
    }

    pub(super) fn value(&self, v: ValueId) -> Result<ValueId, String> {
        self.map.get(v.index()).copied().flatten().ok_or_else(|| format!("value {v} is used before it is defined"))
    }

    /// A node of the caller, as it is.
    pub(super) fn copy(&mut self, node: &Node) -> Result<(), String> {
        let op = node.kind().ok_or_else(|| format!("`{}` in a source graph", node.op.name()))?;
        let mut args = Vec::with_capacity(node.args.len());
        for a in &node.args {
            args.push(match a {
                Arg::Tensor(v) => Arg::Tensor(self.value(*v)?),
                Arg::Scalar(e) => Arg::Scalar(self.caller_scalar(e)?),
                Arg::Ints(items) => Arg::Ints(items.iter().map(|e| self.caller_scalar(e)).collect::<Result<_, _>>()?),
                Arg::DType(d) => Arg::DType(*d),
            });
        }
        self.b.set_no_grad(node.no_grad);
        let r = self.b.op(op, args, node.span);
        if let (Some(out), Some(r)) = (node.out, r) {
            self.map[out.index()] = Some(r);
        }
        Ok(())
    }

    /// A scalar of the caller: its size slots renumbered for the new
    /// graph's parameters, its reads of computed sizes for its values there.
    pub(super) fn caller_scalar(&mut self, e: &ScalarExpr) -> Result<ScalarExpr, String> {
        let Splice { b, map, reads, pos, .. } = self;
        subst(e, &mut |leaf| match leaf {
            ScalarExpr::Size { param, dim, .. } => Ok(Some(b.size(*param, *dim))),
            ScalarExpr::ValueSize { read, .. } => {
                let r = reads.get(*read).ok_or_else(|| format!("size read {read} is not recorded"))?;
                let v =
                    map.get(r.value.index()).copied().flatten().ok_or_else(|| format!("value {} is used before it is defined", r.value))?;
                let at = pos.get(r.at).copied().unwrap_or(b.graph().nodes.len());
                Ok(Some(b.value_size_at(v, r.dim, at)))
            }
            _ => Ok(None),
        })
    }

    /// One call: the callee's parameters bound to the caller's arguments,
    /// its nodes appended, its results bound to the caller's values.
    fn call(&mut self, caller: &Graph, node: &Node, site: &CallSite, callee: &Callee) -> Result<(), String> {
        let (name, g) = (&site.callee, &callee.graph);
        let at = |k: usize| callee.params.get(k).map_or_else(|| format!("argument {}", k + 1), |p| format!("argument `{}`", p.0));
        let args = site.arguments(&node.args).ok_or_else(|| format!("the call of `{name}` has inconsistent arguments"))?;
        if args.len() != callee.params.len() {
            return Err(format!("`{name}` takes {} arguments, but {} were passed", callee.params.len(), args.len()));
        }
        // Per callee graph parameter: the tensor value or scalar it takes.
        let mut tensors: Vec<Option<ValueId>> = vec![None; g.values.len()];
        let mut scalars: Vec<Option<ScalarExpr>> = vec![None; g.params.len()];
        for (j, p) in g.params.iter().enumerate() {
            let (k, field) = match p.name.split_once('.') {
                Some((root, rest)) => (callee.params.iter().position(|(n, tree)| *tree && n == root), Some(rest)),
                None => (callee.params.iter().position(|(n, tree)| !*tree && *n == p.name), None),
            };
            let k = k.ok_or_else(|| format!("`{name}` has no parameter for its input `{}`", p.name))?;
            match (args[k], field, p.value) {
                (CallArg::Tree(t), Some(rest), Some(v)) => {
                    tensors[v.index()] = Some(self.field(&format!("{}.{rest}", t.path), t.ty, node.span))
                }
                // A field path the macro could not type (`&m.w1`): a tensor field.
                (CallArg::Tree(t), None, Some(v)) => tensors[v.index()] = Some(self.field(&t.path, t.ty, node.span)),
                (CallArg::Plain(Arg::Tensor(a)), None, Some(v)) => tensors[v.index()] = Some(self.value(*a)?),
                (CallArg::Plain(Arg::Scalar(e)), None, None) => {
                    let e = self.caller_scalar(e)?;
                    // An integer passed to a float parameter is converted, as
                    // the callee's arithmetic on it is float arithmetic.
                    let int = e.ty(&self.b.graph().param_types()) == Some(ScalarTy::Int);
                    scalars[j] = Some(if int && p.ty.scalar_ty() == Some(ScalarTy::Float) {
                        ScalarExpr::Cast(ScalarTy::Float, Box::new(e))
                    } else {
                        e
                    });
                }
                (CallArg::Plain(Arg::Scalar(_)), _, Some(_)) => {
                    return Err(format!("{} of `{name}` is a tensor, but a scalar was passed", at(k)))
                }
                (CallArg::Plain(Arg::Tensor(_)), _, None) => {
                    return Err(format!("{} of `{name}` is a scalar, but a tensor was passed", at(k)))
                }
                (CallArg::Tree(_), ..) => return Err(format!("{} of `{name}` is not a struct, but a struct was passed", at(k))),
                _ => return Err(format!("{} of `{name}` is a struct of tensors, but a tensor or scalar was passed", at(k))),
            }
        }
        let outputs: Vec<ValueId> = g.outputs.clone();
        let how = Emit { name, prefix: Some(name), no_grad: node.no_grad, span: Some(node.span) };
        self.emit_body(g, &mut tensors, &scalars, how)?;
        let Some(results) = &site.results else { return Ok(()) };
        if results.len() != outputs.len() {
            let got = match outputs.len() {
                0 => "nothing".to_string(),
                1 => "one tensor".to_string(),
                n => format!("{n} tensors"),
            };
            return Err(format!("`{}` binds {} values to the result of `{name}`, which returns {got}", caller.name, results.len()));
        }
        for (r, o) in results.iter().zip(&outputs) {
            self.map[r.index()] = Some(tensors[o.index()].ok_or_else(|| format!("`{name}`: output {o} is undefined"))?);
        }
        Ok(())
    }

    /// The nodes of `g` (a callee, or a loop body) appended, its
    /// parameters bound by `tensors` (per value) and `scalars` (per
    /// parameter); `tensors` receives the values its nodes define. A loop
    /// inside it is copied as a loop, its arguments in the new graph's terms.
    pub(super) fn emit_body(
        &mut self,
        g: &Graph,
        tensors: &mut [Option<ValueId>],
        scalars: &[Option<ScalarExpr>],
        how: Emit<'_>,
    ) -> Result<(), String> {
        let name = how.name;
        // Per callee node so far: how many nodes the new graph held before it.
        let mut cpos = Vec::with_capacity(g.nodes.len());
        for cn in &g.nodes {
            cpos.push(self.b.graph().nodes.len());
            let mut args = Vec::with_capacity(cn.args.len());
            for a in &cn.args {
                let scope = Scope { name, g, scalars, tensors, pos: &cpos };
                args.push(match a {
                    Arg::Tensor(v) => Arg::Tensor(tensors[v.index()].ok_or_else(|| format!("`{name}`: value {v} is undefined"))?),
                    Arg::Scalar(e) => Arg::Scalar(self.callee_scalar(e, scope)?),
                    Arg::Ints(items) => Arg::Ints(items.iter().map(|e| self.callee_scalar(e, scope)).collect::<Result<_, _>>()?),
                    Arg::DType(d) => Arg::DType(*d),
                });
            }
            self.b.set_no_grad(cn.no_grad || how.no_grad);
            let span = how.span.unwrap_or(cn.span);
            if let Op::Call(site) = &cn.op {
                if site.body.is_none() {
                    return Err(format!("`{name}` still holds a `call` after inlining"));
                }
                let n = site.results.as_ref().map(Vec::len);
                let made = self.b.call_fn(CallSite { results: None, ..(**site).clone() }, args, n, span);
                for (old, new) in site.results.iter().flatten().zip(made) {
                    tensors[old.index()] = Some(new);
                }
                continue;
            }
            let op = cn.kind().ok_or_else(|| format!("`{name}` still holds a `{}` after inlining", cn.op.name()))?;
            let r = self.b.op(op, args, span);
            if let (Some(out), Some(r)) = (cn.out, r) {
                tensors[out.index()] = Some(r);
                let own = g.values.get(out.index()).and_then(|i| i.name.as_deref());
                match (how.prefix, own) {
                    (Some(p), _) if !g.outputs.contains(&out) => {
                        self.names.push((r, own.map_or_else(|| format!("in {p}"), |n| format!("{p}::{n}"))))
                    }
                    (None, Some(n)) => self.names.push((r, n.to_string())),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The caller's input for a field path, added when the caller does
    /// not read it itself.
    pub(super) fn field(&mut self, path: &str, ty: ParamType, span: SpanId) -> ValueId {
        let found = self.b.graph().params.iter().find(|p| p.name == path).and_then(|p| p.value);
        found.unwrap_or_else(|| self.b.param(path.to_string(), ty, span).unwrap_or(ValueId(u32::MAX)))
    }

    /// A scalar of the callee in the caller's terms: its parameters are
    /// the call's scalar arguments; a size of its tensor parameter is the
    /// size of what the caller passed there (as it was when the call
    /// began), and a size of a value it computes is that of the value it
    /// became.
    pub(super) fn callee_scalar(&mut self, e: &ScalarExpr, cx: Scope<'_>) -> Result<ScalarExpr, String> {
        let Scope { name, g, scalars, tensors, pos } = cx;
        let b = &mut self.b;
        let start = pos.first().copied().unwrap_or(b.graph().nodes.len());
        subst(e, &mut |leaf| match leaf {
            ScalarExpr::Param(j) => {
                scalars.get(*j).cloned().flatten().map(Some).ok_or_else(|| format!("`{name}`: scalar parameter {j} is unbound"))
            }
            ScalarExpr::Size { param, dim, .. } => {
                let pname = g.params.get(*param).map_or("?", |p| p.name.as_str());
                let arg = g.params.get(*param).and_then(|p| p.value).and_then(|v| tensors[v.index()]);
                match arg.map(|v| (v, b.graph().values[v.index()].def)) {
                    Some((_, ValueDef::Param(p))) => Ok(Some(b.size(p, *dim))),
                    Some((v, ValueDef::Node(_))) => Ok(Some(b.value_size_at(v, *dim, start))),
                    None => Err(format!("`{name}` reads the size of its argument `{pname}`, which is not bound")),
                }
            }
            ScalarExpr::ValueSize { read, .. } => {
                let r = g.value_sizes.get(*read).ok_or_else(|| format!("`{name}`: size read {read} is not recorded"))?;
                let v =
                    tensors.get(r.value.index()).copied().flatten().ok_or_else(|| format!("`{name}`: value {} is undefined", r.value))?;
                let at = pos.get(r.at).copied().unwrap_or(b.graph().nodes.len());
                Ok(Some(b.value_size_at(v, r.dim, at)))
            }
            _ => Ok(None),
        })
    }
}

/// How [`Splice::emit_body`] appends a graph: `name` for messages, the
/// prefix of its values' names (`gelu::h`; a loop body's keep theirs),
/// whether all of it is under `no_grad`, and the span every node takes
/// (a call's), or `None` for the nodes' own.
#[derive(Clone, Copy)]
pub(super) struct Emit<'a> {
    pub(super) name: &'a str,
    pub(super) prefix: Option<&'a str>,
    pub(super) no_grad: bool,
    pub(super) span: Option<SpanId>,
}

/// What a callee's scalars are read against: its name and graph, the
/// scalars and tensors its parameters are bound to, and per callee node
/// emitted so far, the new graph's node count before it.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    pub(super) name: &'a str,
    pub(super) g: &'a Graph,
    pub(super) scalars: &'a [Option<ScalarExpr>],
    pub(super) tensors: &'a [Option<ValueId>],
    pub(super) pos: &'a [usize],
}

/// `e` with each leaf that `f` replaces (`Some`) replaced.
pub(super) fn subst(e: &ScalarExpr, f: &mut dyn FnMut(&ScalarExpr) -> Result<Option<ScalarExpr>, String>) -> Result<ScalarExpr, String> {
    if let Some(r) = f(e)? {
        return Ok(r);
    }
    Ok(match e {
        ScalarExpr::Neg(x) => ScalarExpr::Neg(Box::new(subst(x, f)?)),
        ScalarExpr::Cast(t, x) => ScalarExpr::Cast(*t, Box::new(subst(x, f)?)),
        ScalarExpr::Bin(op, a, c) => ScalarExpr::Bin(*op, Box::new(subst(a, f)?), Box::new(subst(c, f)?)),
        ScalarExpr::Fn(func, args) => ScalarExpr::Fn(*func, args.iter().map(|a| subst(a, f)).collect::<Result<_, _>>()?),
        leaf => leaf.clone(),
    })
}

/// Whether a graph holds calls still to inline, or loops still to
/// unroll.
pub fn has_calls(g: &Graph) -> bool {
    g.nodes.iter().any(|n| matches!(n.op, Op::Call(_)))
}
