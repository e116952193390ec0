//! `for` loops. A loop with integer bounds (`0..4`, an outer literal loop's
//! variable) is unrolled here. One whose bounds are known only at call
//! time (`for t in 0..x.size(1)`, `for i in 0..n`) cannot be, so its body
//! is traced once, as a graph of its own held by a loop node
//! ([`aot_ir::transform::unroll::LoopBody`]), which the runtime unrolls for
//! each call's trip count.
//!
//! While the body is lowered, `Lower::b` builds the body's graph and the
//! enclosing graph's builder waits in a [`LoopFrame`]. A name bound
//! outside the loop and read inside is captured: its tensor becomes a
//! parameter of the body (an in-place write to it writes the caller's
//! tensor), its scalar expression a scalar parameter, and the loop node
//! passes the outside value. A binding the body reassigns (`h = ..`) is
//! loop-carried: the body takes its current value as a parameter and
//! returns the next one, and after the loop the name is bound to the loop
//! node's result. Fields of struct parameters stay inputs of the function
//! itself and are captured like any tensor.

use super::{Binding, Lower, Val, MAX_ITERATIONS, MAX_NODES};
use crate::ast::{Block, Expr, Stmt};
use crate::diag::SpanRange;
use aot_ir::transform::inline::CallSite;
use aot_ir::transform::unroll::LoopBody;
use aot_ir::{Arg, GraphBuilder, ParamType, ReturnKind, ScalarExpr, ScalarTy, ValueDef, ValueId};
use std::collections::HashMap;

/// The enclosing graph of a loop body being lowered.
pub(super) struct LoopFrame {
    /// The enclosing graph's builder, while the body's is `Lower::b`.
    outer: GraphBuilder,
    /// `Lower::scopes` below this index belong to enclosing graphs.
    base: usize,
    /// Enclosing tensors captured, and the body parameter each became.
    tensors: Vec<(ValueId, ValueId)>,
    /// Enclosing scalar expressions captured, and the body's parameter.
    scalars: Vec<(ScalarExpr, ScalarExpr)>,
    /// The loop node's arguments after the bounds: one per body parameter
    /// after the loop variable, in the enclosing graph's terms.
    args: Vec<Arg>,
    /// The switch values of the enclosing graph (a body has none of its
    /// own: a switch it reads is a constant in this variant).
    switches: HashMap<usize, bool>,
}

/// A binding the body reassigns: its name, and its body parameter (a
/// tensor, loop-carried) or the value it must keep (anything else).
struct Carried {
    name: String,
    param: Result<usize, Val>,
}

impl Lower<'_> {
    /// The builder of the graph at `level` (0: the function's).
    fn builder(&mut self, level: usize) -> &mut GraphBuilder {
        if level == self.frames.len() {
            &mut self.b
        } else {
            &mut self.frames[level].outer
        }
    }

    /// Swaps `Lower::b` with the function's own builder (the outermost),
    /// hiding the frames meanwhile; a second call undoes it.
    pub(super) fn swap_function_builder(&mut self) {
        let undo = self.frames.is_empty();
        if undo {
            std::mem::swap(&mut self.frames, &mut self.hidden_frames);
        }
        if let Some(f) = self.frames.first_mut() {
            std::mem::swap(&mut self.b, &mut f.outer);
        }
        if !undo {
            std::mem::swap(&mut self.frames, &mut self.hidden_frames);
        }
    }

    /// The level of the graph that scope `s` belongs to.
    pub(super) fn scope_level(&self, s: usize) -> usize {
        self.frames.iter().filter(|f| f.base <= s).count()
    }

    /// `val`, bound at `from`, as a value of the graph at `to` (deeper):
    /// tensors and non-constant scalars are captured at each level between.
    pub(super) fn translate(&mut self, val: Val, from: usize, to: usize) -> Val {
        if from >= to {
            return val;
        }
        match val {
            Val::Tensor(v) => Val::Tensor((from..to).fold(v, |v, l| self.capture_tensor(l, v, None))),
            Val::Device(v) => Val::Device((from..to).fold(v, |v, l| self.capture_tensor(l, v, None))),
            Val::Scalar(e, ty) => Val::Scalar(self.translate_scalar(e, ty, from, to), ty),
            Val::Ints(items) => Val::Ints(items.into_iter().map(|e| self.translate_scalar(e, ScalarTy::Int, from, to)).collect()),
            Val::Tuple(items) => Val::Tuple(items.into_iter().map(|v| self.translate(v, from, to)).collect()),
            Val::Struct(path, fields) => Val::Struct(path, fields.into_iter().map(|(m, v)| (m, self.translate(v, from, to))).collect()),
            Val::Shape(super::scalar::SizeOf::Value(v)) => {
                Val::Shape(super::scalar::SizeOf::Value((from..to).fold(v, |v, l| self.capture_tensor(l, v, None))))
            }
            // A parameter's shape is read where it is used, through its
            // captured tensor; anything else is no value of a graph.
            Val::Shape(super::scalar::SizeOf::Param(p)) => {
                let v = self.builder(from).graph().params.get(p).and_then(|p| p.value);
                match v {
                    Some(v) => {
                        let v = (from..to).fold(v, |v, l| self.capture_tensor(l, v, None));
                        Val::Shape(super::scalar::SizeOf::Value(v))
                    }
                    None => Val::Poison,
                }
            }
            other => other,
        }
    }

    fn translate_scalar(&mut self, e: ScalarExpr, ty: ScalarTy, from: usize, to: usize) -> ScalarExpr {
        // A switch of the function is a constant in this variant.
        let e = match (&e, from) {
            (ScalarExpr::Param(i), 0) => {
                let switches = if self.frames.is_empty() { &self.switches } else { &self.frames[0].switches };
                switches.get(i).map_or(e.clone(), |&b| ScalarExpr::Bool(b))
            }
            _ => e,
        };
        if e.as_const().is_some() {
            return e;
        }
        (from..to).fold(e, |e, l| self.capture_scalar(l, e, ty))
    }

    /// The parameter of the body at `level + 1` standing for `v` of the
    /// graph at `level`: made on first use, or always when `carried` names
    /// it (a carried binding is its own parameter, even when another name
    /// holds the same tensor).
    fn capture_tensor(&mut self, level: usize, v: ValueId, carried: Option<&str>) -> ValueId {
        if carried.is_none() {
            if let Some(&(_, p)) = self.frames[level].tensors.iter().find(|(o, _)| *o == v) {
                return p;
            }
        }
        let (name, ty) = {
            let g = self.builder(level).graph();
            (carried.map_or_else(|| g.value_name(v), str::to_string), root_type(g, v))
        };
        let span = self.builder(level + 1).graph().params.first().map_or(aot_ir::SpanId(0), |p| p.span);
        let p = self.builder(level + 1).param(name, ty, span).unwrap_or(ValueId(u32::MAX));
        let frame = &mut self.frames[level];
        frame.args.push(Arg::Tensor(v));
        if carried.is_none() {
            frame.tensors.push((v, p));
        }
        p
    }

    fn capture_scalar(&mut self, level: usize, e: ScalarExpr, ty: ScalarTy) -> ScalarExpr {
        if let Some((_, p)) = self.frames[level].scalars.iter().find(|(o, _)| *o == e) {
            return p.clone();
        }
        let pty = match ty {
            ScalarTy::Int => ParamType::I64,
            ScalarTy::Float => ParamType::F64,
            ScalarTy::Bool => ParamType::Bool,
        };
        let span = self.builder(level + 1).graph().params.first().map_or(aot_ir::SpanId(0), |p| p.span);
        let b = self.builder(level + 1);
        b.param(format!("s{}", b.graph().params.len()), pty, span);
        let p = ScalarExpr::Param(b.graph().params.len() - 1);
        let frame = &mut self.frames[level];
        frame.args.push(Arg::Scalar(e.clone()));
        frame.scalars.push((e, p.clone()));
        p
    }

    /// A loop with integer bounds, unrolled now.
    pub(super) fn unrolled_loop(&mut self, var: Option<&syn::Ident>, start: i64, end: i64, body: &Block, span: SpanRange) {
        if end.saturating_sub(start) > MAX_ITERATIONS {
            self.errors.add(
                span,
                format!("this loop runs more than {MAX_ITERATIONS} times"),
                Some("the loop is unrolled at compile time: use fewer iterations".into()),
            );
            return;
        }
        for k in start..end {
            if self.over_budget {
                break;
            }
            let before = self.errors.len();
            self.scopes.push(HashMap::new());
            if let Some(var) = var {
                self.bind(&var.to_string(), Val::Scalar(ScalarExpr::I64(k), ScalarTy::Int), false);
                self.declare(var);
            }
            self.block_stmts(body);
            self.scopes.pop();
            // The same mistake in every iteration is one mistake.
            if self.errors.len() > before {
                break;
            }
            if self.b.graph().nodes.len() > MAX_NODES {
                self.over_budget = true;
                self.errors.add(span, format!("this loop unrolls to more than {MAX_NODES} ops"), Some("use fewer iterations".into()));
            }
        }
    }

    /// `for var in start..end { body }` with bounds known only at call
    /// time: one loop node whose body is traced once (see the module docs).
    pub(super) fn runtime_loop(&mut self, var: Option<&syn::Ident>, bounds: (ScalarExpr, ScalarExpr), body: &Block, span: SpanRange) {
        let mut assigned = Vec::new();
        assigned_names(body, &mut assigned);
        let level = self.frames.len();
        let name = format!("{}::for", self.b.graph().name);
        let outer = std::mem::replace(&mut self.b, GraphBuilder::new(name));
        let switches = std::mem::take(&mut self.switches);
        let base = self.scopes.len();
        self.frames.push(LoopFrame { outer, base, tensors: Vec::new(), scalars: Vec::new(), args: Vec::new(), switches });
        let var_name = var.map_or_else(|| "_".to_string(), ToString::to_string);
        let span_id = self.span_id(span);
        self.b.param(var_name.clone(), ParamType::I64, span_id);
        self.scopes.push(HashMap::new());
        if let Some(var) = var {
            self.bind(&var.to_string(), Val::Scalar(ScalarExpr::Param(0), ScalarTy::Int), false);
            self.declare(var);
        }
        let carried = self.carry(&assigned, level);
        let before = self.errors.len();
        self.block_stmts(body);
        let mut outputs = Vec::new();
        for c in &carried {
            let now = self.scopes[base].get(&c.name).map(|b| b.val.clone());
            match (now, &c.param) {
                (Some(Val::Tensor(v)), Ok(_)) => outputs.push(v),
                // Already reported where it was poisoned.
                (Some(Val::Poison) | None, _) | (_, Err(Val::Poison)) => {}
                (Some(now), Err(kept)) if format!("{now:?}") == format!("{kept:?}") => {}
                (Some(other), _) if self.errors.len() == before => {
                    self.errors.add(
                        span,
                        format!(
                            "this loop's bounds are known only when the function is called, so it can reassign only tensors, but it assigns {} to `{}`",
                            other.describe(),
                            c.name
                        ),
                        Some("compute the value before the loop, or use literal bounds (`0..4`), which are unrolled when the macro expands".into()),
                    );
                }
                (Some(_), _) => {}
            }
        }
        let carried: Vec<(String, usize)> = carried.into_iter().filter_map(|c| c.param.ok().map(|p| (c.name, p))).collect();
        self.scopes.truncate(base);
        let Some(frame) = self.frames.pop() else { return };
        let body_b = std::mem::replace(&mut self.b, frame.outer);
        self.switches = frame.switches;
        if self.errors.len() > before || outputs.len() != carried.len() {
            return;
        }
        let ret = if outputs.is_empty() { ReturnKind::Unit } else { ReturnKind::Tuple(outputs.len()) };
        let graph = body_b.finish(outputs, ret);
        let body = LoopBody { var: var_name.clone(), graph, carried: carried.iter().map(|c| c.1).collect() };
        let mut args = vec![Arg::Scalar(bounds.0), Arg::Scalar(bounds.1)];
        args.extend(frame.args);
        let site =
            CallSite { callee: format!("for {var_name} in .."), index: 0, trees: Vec::new(), results: None, body: Some(Box::new(body)) };
        let results = self.b.call_fn(site, args, Some(carried.len()), span_id);
        for ((name, _), r) in carried.iter().zip(results) {
            self.rebind_outer(name, Val::Tensor(r));
        }
    }

    /// Shadows each binding the body reassigns (`assigned`) with a body
    /// parameter holding its value when an iteration starts.
    fn carry(&mut self, assigned: &[String], level: usize) -> Vec<Carried> {
        let mut carried = Vec::new();
        let base = self.frames[level].base;
        for name in assigned {
            let Some((s, b)) = self.scopes[..base].iter().enumerate().rev().find_map(|(s, sc)| sc.get(name).map(|b| (s, b.clone()))) else {
                continue;
            };
            if !b.mutable {
                // `assign` reports it where it happens.
                continue;
            }
            let from = self.scope_level(s);
            let before = self.translate(b.val.clone(), from, level);
            let (val, param) = match &before {
                Val::Tensor(v) => {
                    let p = self.capture_tensor(level, *v, Some(name));
                    (Val::Tensor(p), Ok(self.b.graph().params.len() - 1))
                }
                // A scalar or other value is read as captured; reassigning
                // it is reported when the body is done.
                other => {
                    let v = self.translate(other.clone(), level, level + 1);
                    (v.clone(), Err(v))
                }
            };
            if let Some(scope) = self.scopes.last_mut() {
                scope.insert(name.clone(), Binding { val, mutable: true, decl: b.decl.clone() });
            }
            carried.push(Carried { name: name.clone(), param });
        }
        carried
    }

    /// After the loop: the binding `name` takes the loop's result (the
    /// innermost one, which the body carried).
    fn rebind_outer(&mut self, name: &str, val: Val) {
        if let Some(b) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(name)) {
            b.val = val.clone();
            if let Val::Tensor(id) = val {
                self.b.name_value(id, name);
            }
        }
    }
}

/// The type of the parameter capturing `v`: `&Tensor` when `v` is (a view
/// of) an input declared `&Tensor`, so that a write to it is refused as
/// one to that input; `&mut Tensor` otherwise.
fn root_type(g: &aot_ir::Graph, v: ValueId) -> ParamType {
    let mut cur = v;
    loop {
        match g.values.get(cur.index()).map(|i| i.def) {
            Some(ValueDef::Param(p)) => {
                return match g.params.get(p).map(|p| p.ty) {
                    Some(ParamType::Tensor) => ParamType::Tensor,
                    _ => ParamType::TensorMut,
                }
            }
            Some(ValueDef::Node(n)) => match (g.nodes[n].kind(), g.nodes[n].receiver()) {
                (Some(op), Some(r)) if matches!(op.alias_effect(), aot_ir::op::AliasEffect::View | aot_ir::op::AliasEffect::Detach) => {
                    cur = r
                }
                _ => return ParamType::TensorMut,
            },
            None => return ParamType::TensorMut,
        }
    }
}

/// The names a block assigns (`name = ..`), at any depth.
fn assigned_names(block: &Block, out: &mut Vec<String>) {
    for stmt in &block.stmts {
        match stmt {
            Stmt::Assign { name, value } => {
                let n = name.to_string();
                if !out.contains(&n) {
                    out.push(n);
                }
                expr_assigned(value, out);
            }
            Stmt::Let { init: e, .. } | Stmt::Expr(e) => expr_assigned(e, out),
            Stmt::For { body, .. } => assigned_names(body, out),
        }
    }
    if let Some(t) = &block.tail {
        expr_assigned(t, out);
    }
}

fn expr_assigned(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::If { then, els, .. } => {
            assigned_names(then, out);
            if let Some(e) = els {
                expr_assigned(e, out);
            }
        }
        Expr::NoGrad(b, _) | Expr::Block(b, _) => assigned_names(b, out),
        _ => {}
    }
}
