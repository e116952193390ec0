//! Step 3, lower: the validated syntax tree to an IR graph.
//!
//! Names are resolved in Rust's scoping (blocks, `no_grad!` and loop bodies
//! open scopes; `let` shadows), loops with integer bounds are unrolled (a
//! loop over a parameter or a size becomes a loop node whose body is
//! traced once, `lower/loops.rs`), operators become ops and
//! scalar arithmetic stays symbolic so that scalar parameters remain runtime
//! inputs. Each node records a span id; the table of real spans stays here,
//! so the analyses on the IR can point at the user's tokens.
//!
//! Fields of struct parameters (graph inputs named by their paths, `m.w1`)
//! and struct literals a function returns are lowered in `lower/tree.rs`;
//! method calls and static calls (`Tensor::cat`) in `lower/call.rs`;
//! operators, casts and integer lists in `lower/operators.rs`; calls of
//! other `#[aot_fn]` functions in `lower/aot_call.rs`; the factory
//! `Tensor::arange(..)` in `lower/factory.rs`.
//!
//! Errors poison the value they concern ([`Val::Poison`]); a poisoned value
//! propagates silently, so one mistake yields one message.

use crate::ast::{Block, Expr, Pat, Stmt};
use crate::diag::{Errors, SpanRange};
use crate::valid::Signature;
use aot_ir::{DType, Graph, GraphBuilder, ParamType, ReturnKind, ScalarExpr, ScalarTy, SpanId, ValueId};
use proc_macro2::TokenStream;

use std::collections::HashMap;

mod aot_call;
mod call;
mod factory;
mod loops;
mod operators;
mod scalar;
mod tree;

pub(crate) use aot_call::source_fn;
use aot_call::Want;
pub use scalar::switch_names;

/// Unrolled loops stop here rather than exhausting the compiler.
const MAX_NODES: usize = 50_000;
/// An empty loop body adds no nodes, so iterations are capped too.
const MAX_ITERATIONS: i64 = 10_000;

/// The result of lowering: the graph and the span of every [`SpanId`].
pub struct Lowered {
    pub graph: Graph,
    pub spans: Vec<SpanRange>,
    /// Per struct parameter the body used: its name and one statement per
    /// field access, as the user wrote it (`let _: &Tensor = &m.w1;`, with
    /// `m.layers[0usize]` for an index), for rustc to type-check in the
    /// generated function.
    pub field_checks: Vec<(syn::Ident, Vec<TokenStream>)>,
    /// For a function returning a struct: the expression that builds it
    /// from the output variables.
    pub ret_struct: Option<TokenStream>,
    /// The `let` bindings, loop variables and parameters the body never
    /// reads, keyed by their declaration (for rustc's `unused_variables`).
    pub unused: Vec<(String, syn::Ident)>,
    /// The paths of the `#[aot_fn]` functions the body calls, in the order
    /// of [`aot_ir::transform::inline::CallSite::index`].
    pub callees: Vec<TokenStream>,
    /// Per call, a closure rustc type-checks (`lower/aot_call.rs`).
    pub call_checks: Vec<TokenStream>,
}

impl Lowered {
    pub fn span(&self, id: SpanId) -> SpanRange {
        self.spans.get(id.0 as usize).copied().unwrap_or_else(|| SpanRange::single(proc_macro2::Span::call_site()))
    }
}

/// The value of an expression during lowering.
#[derive(Clone, Debug)]
enum Val {
    Tensor(ValueId),
    Scalar(ScalarExpr, ScalarTy),
    Ints(Vec<ScalarExpr>),
    DType(DType),
    Tuple(Vec<Val>),
    /// A struct parameter (index into `Lower::trees`): only its fields are
    /// values.
    Tree(usize),
    /// A `let` name for a field path of a struct parameter: a struct
    /// whose fields are read through it, or a tensor read when it is used.
    Alias(FieldPath),
    /// A struct literal of tensors (to be returned).
    Struct(syn::Path, Vec<(syn::Member, Val)>),
    /// A constant non-tensor field of a struct literal (`bits: 8`): the
    /// Rust literal, spanned at the user's expression.
    Attr(TokenStream),
    /// `x.shape()` of a tensor: only indexed (`x.shape()[0]`).
    Shape(scalar::SizeOf),
    /// `x.device()` of this tensor: only the device of `Tensor::arange`.
    Device(ValueId),
    Unit,
    /// An expression that already produced an error.
    Poison,
}

impl Val {
    fn describe(&self) -> &'static str {
        match self {
            Val::Tensor(_) => "a tensor",
            Val::Scalar(_, ScalarTy::Float) => "a float scalar",
            Val::Scalar(_, ScalarTy::Int) => "an integer scalar",
            Val::Scalar(_, ScalarTy::Bool) => "a bool",
            Val::Ints(_) => "a list",
            Val::DType(_) => "a dtype",
            Val::Tuple(_) => "a tuple",
            Val::Tree(_) => "a struct of tensors",
            Val::Alias(_) => "a field of a struct parameter",
            Val::Struct(..) => "a struct",
            Val::Attr(_) => "a constant",
            Val::Shape(_) => "a shape (index it: `x.shape()[0]`)",
            Val::Device(_) => "a device (only `Tensor::arange(.., &x.device())` takes one)",
            Val::Unit => "`()`",
            Val::Poison => "an invalid value",
        }
    }
}

/// A field path of a struct parameter (`m.blocks[1].w`).
#[derive(Clone, Debug)]
struct FieldPath {
    /// The struct parameter (index into `Lower::trees`).
    root: usize,
    /// The parameter's name as the user wrote it, spanned there.
    used: syn::Ident,
    /// The graph input's name: `m.blocks.1.w`.
    name: String,
    /// The access in Rust (`.blocks[1usize].w`), for rustc's type check.
    access: Vec<TokenStream>,
    span: SpanRange,
}

/// A name in scope: its value and whether it was declared `mut`.
#[derive(Clone, Debug)]
struct Binding {
    val: Val,
    mutable: bool,
    /// The key of the user's declaration in `Lower::decls`.
    decl: Option<String>,
}

struct Lower<'e> {
    b: GraphBuilder,
    scopes: Vec<HashMap<String, Binding>>,
    spans: Vec<SpanRange>,
    errors: &'e mut Errors,
    over_budget: bool,
    /// Struct parameters: name and the graph input type of their fields.
    trees: Vec<(syn::Ident, ParamType)>,
    /// Graph inputs made for field paths (`m.w1`), and the accesses to check.
    fields: HashMap<String, ValueId>,
    field_checks: Vec<(syn::Ident, Vec<TokenStream>)>,
    ret_struct: Option<TokenStream>,
    /// The values of the switch parameters (by position) in this variant.
    switches: HashMap<usize, bool>,
    /// Every user declaration: its name and whether it was read.
    decls: HashMap<String, (syn::Ident, bool)>,
    /// The path of the runtime crate (`::aot_runtime`, or `crate = ..`).
    krate: TokenStream,
    /// The callees' table: the path as a string (the key) and as tokens.
    callees: Vec<(String, TokenStream)>,
    call_checks: Vec<TokenStream>,
    /// The graphs enclosing the loop body being lowered, innermost last
    /// (`lower/loops.rs`); empty while lowering the function's own graph.
    frames: Vec<loops::LoopFrame>,
    /// `frames` while a field input is made in the function's own graph.
    hidden_frames: Vec<loops::LoopFrame>,
}

/// Lowers a function for one combination of its switch parameters'
/// values (`switches`, by parameter position). Returns `None` when errors
/// were reported.
pub fn lower(name: &str, sig: &Signature, body: &Block, switches: HashMap<usize, bool>, errors: &mut Errors) -> Option<Lowered> {
    let before = errors.len();
    let mut l = Lower {
        b: GraphBuilder::new(name),
        scopes: vec![HashMap::new()],
        spans: Vec::new(),
        errors,
        over_budget: false,
        trees: Vec::new(),
        fields: HashMap::new(),
        field_checks: Vec::new(),
        ret_struct: None,
        switches,
        decls: HashMap::new(),
        krate: sig.krate.clone(),
        callees: Vec::new(),
        call_checks: Vec::new(),
        frames: Vec::new(),
        hidden_frames: Vec::new(),
    };
    for p in &sig.params {
        if p.tree {
            // Its fields become graph inputs when the body uses them.
            l.trees.push((p.ident.clone(), p.ty));
            l.bind(&p.ident.to_string(), Val::Tree(l.trees.len() - 1), false);
            if p.ident != "self" {
                l.declare(&p.ident);
            }
            continue;
        }
        let span = l.span_id(p.span);
        let val = match l.b.param(p.ident.to_string(), p.ty, span) {
            Some(v) => Val::Tensor(v),
            None => Val::Scalar(ScalarExpr::Param(l.b.graph().params.len() - 1), p.ty.scalar_ty().unwrap_or(ScalarTy::Float)),
        };
        l.bind(&p.ident.to_string(), val, p.mutable);
        l.declare(&p.ident);
    }
    for stmt in &body.stmts {
        l.stmt(stmt);
    }
    // A call in tail position returns what the function declares.
    let tail = match body.tail.as_deref() {
        Some(Expr::Call { path, args, span }) if !sig.ret_struct && !sig.ret_vec => {
            l.fn_call(path, args, *span, Want::Values(sig.ret.arity()))
        }
        Some(e) => l.expr(e),
        None => Val::Unit,
    };
    let outputs = l.outputs(tail, body, sig);
    let (callees, call_checks) = (l.callees.into_iter().map(|(_, t)| t).collect(), l.call_checks);
    let spans = l.spans;
    let field_checks = l.field_checks;
    let ret_struct = l.ret_struct;
    let mut unused: Vec<(String, syn::Ident)> = l.decls.into_iter().filter(|(_, (_, used))| !used).map(|(k, (id, _))| (k, id)).collect();
    unused.sort_by(|a, b| a.0.cmp(&b.0));
    let outputs = outputs?;
    let ret = if sig.ret_struct || sig.ret_vec { ReturnKind::Tuple(outputs.len()) } else { sig.ret };
    let graph = l.b.finish(outputs, ret);
    if errors.len() > before {
        return None;
    }
    if let Err(e) = aot_ir::verify(&graph) {
        errors.add(sig.ret_span, format!("internal error in `#[aot_fn]`: the lowered graph is invalid: {e}"), None);
        return None;
    }
    Some(Lowered { graph, spans, field_checks, ret_struct, unused, callees, call_checks })
}

impl Lower<'_> {
    fn span_id(&mut self, r: SpanRange) -> SpanId {
        self.spans.push(r);
        SpanId((self.spans.len() - 1) as u32)
    }

    fn bind(&mut self, name: &str, val: Val, mutable: bool) {
        if let Val::Tensor(id) = val {
            self.b.name_value(id, name);
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), Binding { val, mutable, decl: None });
        }
    }

    /// Records the user's declaration of the name just bound, so that an
    /// unread one gets rustc's warning (names starting with `_` are exempt,
    /// as in Rust).
    fn declare(&mut self, id: &syn::Ident) {
        let name = id.to_string();
        if name.starts_with('_') {
            return;
        }
        let key = format!("{name}@{:?}", id.span());
        self.decls.entry(key.clone()).or_insert_with(|| (id.clone(), false));
        if let Some(b) = self.scopes.last_mut().and_then(|s| s.get_mut(&name)) {
            b.decl = Some(key);
        }
    }

    /// The value of a name; inside a loop body traced as a graph of its
    /// own, a value from outside it is captured (`lower/loops.rs`).
    fn lookup(&mut self, name: &str) -> Option<Val> {
        let (s, b) = self.scopes.iter().enumerate().rev().find_map(|(s, sc)| sc.get(name).map(|b| (s, b)))?;
        if let Some((_, used)) = b.decl.as_ref().and_then(|k| self.decls.get_mut(k)) {
            *used = true;
        }
        let val = b.val.clone();
        if self.frames.is_empty() {
            return Some(val);
        }
        let from = self.scope_level(s);
        Some(self.translate(val, from, self.frames.len()))
    }

    /// `name = value`: updates the binding where it lives, as Rust does, so
    /// the new value is seen after the inner scope (a loop body) ends.
    fn assign(&mut self, name: &syn::Ident, val: Val) {
        let key = name.to_string();
        let Some(binding) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(&key)) else {
            self.errors.add(SpanRange::single(name.span()), format!("cannot find value `{name}` in this scope"), None);
            return;
        };
        if !binding.mutable {
            self.errors.add(
                SpanRange::single(name.span()),
                format!("cannot assign twice to immutable variable `{name}`"),
                Some(format!("make the binding mutable: `let mut {name} = ...`")),
            );
            return;
        }
        binding.val = val.clone();
        if let Val::Tensor(id) = val {
            self.b.name_value(id, &key);
        }
    }

    /// Lowers the statements of a block in a new scope; returns its value.
    fn block(&mut self, block: &Block) -> Val {
        self.scopes.push(HashMap::new());
        let v = self.block_stmts(block);
        self.scopes.pop();
        v
    }

    fn block_stmts(&mut self, block: &Block) -> Val {
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
        match &block.tail {
            Some(e) => self.expr(e),
            None => Val::Unit,
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Let { pat, init } => {
                let mut v = match init {
                    Expr::Call { path, args, span } => {
                        let want = match pat {
                            Pat::Tuple(items, _) => Want::Values(items.len()),
                            Pat::Bind(..) => Want::Values(1),
                            Pat::Wild => Want::Discard,
                        };
                        self.fn_call(path, args, *span, want)
                    }
                    Expr::Field(..) => self.field_alias(init),
                    Expr::Index(base, ..) if !matches!(&**base, Expr::Method { special: Some(crate::ast::Special::Shape), .. }) => {
                        self.field_alias(init)
                    }
                    _ => self.expr(init),
                };
                if let Val::Tree(_) = v {
                    // Fields are named by the parameter's own path.
                    self.errors.add(
                        init.span(),
                        "a struct parameter cannot be bound to another name in an `#[aot_fn]` body",
                        Some("use its fields through the parameter itself: `m.w1`".into()),
                    );
                    v = Val::Poison;
                }
                self.bind_pat(pat, v);
            }
            Stmt::Assign { name, value } => {
                let v = self.expr(value);
                self.assign(name, v);
            }
            Stmt::Expr(Expr::Call { path, args, span }) => {
                self.fn_call(path, args, *span, Want::Discard);
            }
            Stmt::Expr(e) => {
                self.expr(e);
            }
            Stmt::For { var, start, end, closed, body, span } => {
                let (Some(start), Some(end)) = (self.loop_bound(start), self.loop_bound(end)) else { return };
                let end = match (*closed, end.as_const_int()) {
                    (true, Some(k)) => ScalarExpr::I64(k.saturating_add(1)),
                    (true, None) => ScalarExpr::Bin(aot_ir::ScalarBinOp::Add, Box::new(end), Box::new(ScalarExpr::I64(1))),
                    (false, _) => end,
                };
                match (start.as_const_int(), end.as_const_int()) {
                    (Some(a), Some(b)) => self.unrolled_loop(var.as_ref(), a, b, body, *span),
                    _ => self.runtime_loop(var.as_ref(), (start, end), body, *span),
                }
            }
        }
    }

    fn bind_pat(&mut self, pat: &Pat, v: Val) {
        match (pat, v) {
            (Pat::Wild, _) => {}
            (Pat::Bind(id, mutable), v) => {
                self.bind(&id.to_string(), v, *mutable);
                self.declare(id);
            }
            (Pat::Tuple(pats, _), Val::Tuple(vals)) if pats.len() == vals.len() => {
                for (p, v) in pats.iter().zip(vals) {
                    self.bind_pat(p, v);
                }
            }
            (Pat::Tuple(pats, _), Val::Poison) => {
                for p in pats {
                    self.bind_pat(p, Val::Poison);
                }
            }
            (Pat::Tuple(pats, span), v) => {
                self.errors.add(*span, format!("this pattern has {} elements, but the value is {}", pats.len(), describe_len(&v)), None);
                for p in pats {
                    self.bind_pat(p, Val::Poison);
                }
            }
        }
    }

    fn outputs(&mut self, tail: Val, body: &Block, sig: &Signature) -> Option<Vec<ValueId>> {
        let at = body.tail.as_ref().map_or(sig.ret_span, |e| e.span());
        let tensor = |v: &Val| match v {
            Val::Tensor(id) => Some(*id),
            _ => None,
        };
        if sig.ret_vec {
            return match tail {
                Val::Poison => None,
                // `vec![..]` lowers to a tuple value; a tuple literal is not a `Vec`.
                Val::Tuple(vals)
                    if !matches!(body.tail.as_deref(), Some(Expr::Tuple(..)))
                        && vals.iter().all(|v| matches!(v, Val::Tensor(_) | Val::Poison)) =>
                {
                    vals.iter().map(tensor).collect()
                }
                other => {
                    self.errors.add(
                        at,
                        format!("the function returns `Vec<Tensor>`, but the body ends in {}", describe_len(&other)),
                        Some("end the body with `vec![a, b]`".into()),
                    );
                    None
                }
            };
        }
        if sig.ret_struct {
            let mut outputs = Vec::new();
            return match tail {
                Val::Poison => None,
                Val::Struct(path, fields) => {
                    self.ret_struct = tree::struct_outputs(&path, &fields, &mut outputs);
                    self.ret_struct.as_ref().map(|_| outputs)
                }
                other => {
                    self.errors.add(
                        at,
                        format!("the function returns a struct, but the body ends in {}", describe_len(&other)),
                        Some("end the body with a struct literal of tensors: `Mlp { w1: .., b1: .. }`".into()),
                    );
                    None
                }
            };
        }
        match (sig.ret, tail) {
            (_, Val::Poison) => None,
            (ReturnKind::Unit, Val::Unit) => Some(Vec::new()),
            (ReturnKind::Unit, v) => {
                self.errors.add(
                    at,
                    format!("the function declares no return type, but the body ends in {}", v.describe()),
                    Some("declare the return type (e.g. `-> Tensor`), or end the statement with `;`".into()),
                );
                None
            }
            (ReturnKind::Single, Val::Tensor(v)) => Some(vec![v]),
            (ReturnKind::Tuple(n), Val::Tuple(vals))
                if vals.len() == n && vals.iter().all(|v| tensor(v).is_some() || matches!(v, Val::Poison)) =>
            {
                vals.iter().map(tensor).collect()
            }
            (ret, v) => {
                let want = match ret {
                    ReturnKind::Single => "a tensor".to_string(),
                    _ => format!("a tuple of {} tensors", ret.arity()),
                };
                let found = match &v {
                    Val::Unit if body.tail.is_none() => "nothing".to_string(),
                    other => describe_len(other),
                };
                self.errors.add(
                    at,
                    format!("the function returns {want}, but the body ends in {found}"),
                    Some("make the returned tensors the tail expression of the body".into()),
                );
                None
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> Val {
        match e {
            Expr::Var(id) => match self.lookup(&id.to_string()) {
                Some(Val::Alias(mut p)) => {
                    p.span = SpanRange::single(id.span());
                    self.field_input(p)
                }
                Some(v) => v,
                None => {
                    self.errors.add(SpanRange::single(id.span()), format!("cannot find value `{id}` in this scope"), None);
                    Val::Poison
                }
            },
            Expr::Float(v, _) => Val::Scalar(ScalarExpr::F64(*v), ScalarTy::Float),
            Expr::Int(v, _) => Val::Scalar(ScalarExpr::I64(*v), ScalarTy::Int),
            Expr::Bool(v, _) => Val::Scalar(ScalarExpr::Bool(*v), ScalarTy::Bool),
            Expr::DType(d, _) => Val::DType(*d),
            Expr::List(items, _) => self.int_list(items),
            Expr::Tuple(items, _) if items.is_empty() => Val::Unit,
            Expr::Tuple(items, _) => Val::Tuple(items.iter().map(|x| self.expr(x)).collect()),
            Expr::Method { recv, method, args, span, op, special, .. } => {
                let recv_v = self.expr(recv);
                let arg_vs: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
                if let Some(sp) = *special {
                    if let Some(v) = self.special(sp, method, &recv_v, recv.span(), &arg_vs, args, *span, op.is_some()) {
                        return v;
                    }
                }
                let Some(op) = *op else { return Val::Poison };
                if op.class() == aot_ir::OpClass::MetadataMutation && matches!(recv_v, Val::Tensor(_)) {
                    self.metadata_mutation_check(recv);
                }
                self.method(op, method, recv_v, recv.span(), arg_vs, args, *span)
            }
            Expr::If { cond, then, els, .. } => self.if_expr(cond, then, els.as_deref()),
            Expr::Not(x, span) => {
                let v = self.expr(x);
                self.not(v, *span)
            }
            Expr::Vec(items, _) => Val::Tuple(items.iter().map(|x| self.expr(x)).collect()),
            Expr::Index(base, index, _) if matches!(&**base, Expr::Method { special: Some(crate::ast::Special::Shape), .. }) => {
                match self.expr(base) {
                    Val::Shape(p) => self.shape_index(p, index),
                    _ => Val::Poison,
                }
            }
            Expr::Static { func, args, span, op, .. } => {
                let Some(op) = *op else { return Val::Poison };
                if op.sig().is_factory() {
                    return self.factory_call(op, args, *span);
                }
                self.static_call(op, func, args, *span)
            }
            Expr::Binary { op, lhs, rhs, span } => {
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                self.binary(*op, l, r, *span)
            }
            Expr::Neg(x, span) => {
                let v = self.expr(x);
                self.neg(v, *span)
            }
            Expr::Cast(x, ty, span) => {
                let v = self.expr(x);
                self.cast(v, *ty, *span)
            }
            Expr::NoGrad(block, _) => {
                let prev = self.b.set_no_grad(true);
                let v = self.block(block);
                self.b.set_no_grad(prev);
                v
            }
            Expr::Block(block, _) => self.block(block),
            Expr::Field(..) | Expr::Index(..) => self.field(e),
            Expr::Struct(path, fields, _) => self.struct_lit(path, fields),
            Expr::Call { path, args, span } => self.fn_call(path, args, *span, Want::Values(1)),
            Expr::Error(_) => Val::Poison,
        }
    }
}

fn describe_len(v: &Val) -> String {
    match v {
        Val::Tuple(items) => format!("a tuple of {} elements", items.len()),
        other => other.describe().to_string(),
    }
}
