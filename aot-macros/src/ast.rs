//! Step 1, parse: the function body as a small DSL syntax tree.
//!
//! `syn` accepts all of Rust; the DSL is a small part of it. This step maps
//! the part we support onto our own tree and reports everything else
//! (closures, `match`, `while`, `?`, ...) with a span and a
//! hint. Unsupported syntax becomes [`Expr::Error`], so the later steps can
//! go on and report further problems without repeating this one.

use crate::diag::{Errors, SpanRange};
use aot_ir::{DType, ScalarTy};
use syn::Ident;

mod calls;
mod float_consts;
use calls::{call_arg, number_method, self_method_call};
use float_consts::float_const;

/// A `{ .. }` body: statements and an optional tail expression.
#[derive(Debug)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
}

/// What a method name means besides (or instead of) a tensor op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// A method of Rust's numbers (`b2.powi(t)`, `x.sqrt()`).
    Scalar(aot_ir::ScalarFn),
    /// `x.size(d)`: a dim's size at call time.
    Size,
    /// `x.shape()`: indexed with a literal (`x.shape()[0]`).
    Shape,
    /// `x.device()`: only as the device of `Tensor::arange(..)`.
    Device,
}

#[derive(Debug)]
pub enum Stmt {
    Let {
        pat: Pat,
        init: Expr,
    },
    /// `name = value;` to a `let mut` binding.
    Assign {
        name: Ident,
        value: Expr,
    },
    Expr(Expr),
    /// `for var in start..end { body }` (`..=` when `closed`): unrolled
    /// during lowering when the bounds lower to integers known then, else
    /// traced once and unrolled per call (`lower/loops.rs`).
    For {
        var: Option<Ident>,
        start: Expr,
        end: Expr,
        closed: bool,
        body: Block,
        span: SpanRange,
    },
}

#[derive(Debug)]
pub enum Pat {
    /// A name, and whether it was declared `mut`.
    Bind(Ident, bool),
    Wild,
    Tuple(Vec<Pat>, SpanRange),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug)]
pub enum Expr {
    Var(Ident),
    Float(f64, SpanRange),
    Int(i64, SpanRange),
    Bool(bool, SpanRange),
    DType(DType, SpanRange),
    /// `&[a, b]` or `[a, b]`.
    List(Vec<Expr>, SpanRange),
    Tuple(Vec<Expr>, SpanRange),
    /// `recv.method(args)`; `op` is filled in by validation when the call
    /// matches the op table, and stays `None` for a call already reported.
    Method {
        recv: Box<Expr>,
        method: Ident,
        args: Vec<Expr>,
        span: SpanRange,
        call: SpanRange,
        op: Option<aot_ir::OpKind>,
        /// Set by validation when the name is also (or only) a method of
        /// scalars or a size query; lowering picks by the receiver's kind.
        special: Option<Special>,
    },
    /// `Tensor::func(args)`: a static op (`Tensor::cat(&[&a, &b], 0)`);
    /// `op` as for [`Expr::Method`].
    Static {
        func: Ident,
        args: Vec<Expr>,
        span: SpanRange,
        call: SpanRange,
        op: Option<aot_ir::OpKind>,
    },
    /// `callee(args)`: a call of another `#[aot_fn]` function, by its
    /// path as written; each argument with whether it is passed `&mut`.
    Call {
        path: syn::Path,
        args: Vec<(Expr, bool)>,
        span: SpanRange,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: SpanRange,
    },
    Neg(Box<Expr>, SpanRange),
    /// `!flag` on a bool.
    Not(Box<Expr>, SpanRange),
    /// `if cond { .. } else { .. }`: `cond` must be a `bool` parameter, and
    /// each value of it gets its own traced graph.
    If {
        cond: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
        span: SpanRange,
    },
    /// `vec![a, b]`: a list of tensors to return as `Vec<Tensor>`.
    Vec(Vec<Expr>, SpanRange),
    Cast(Box<Expr>, ScalarTy, SpanRange),
    NoGrad(Block, SpanRange),
    Block(Block, SpanRange),
    /// `base.member`: a field of a struct parameter (`m.w1`, `m.l1.w`).
    Field(Box<Expr>, syn::Member, SpanRange),
    /// `base[index]`: an element of a `Vec` field (`m.layers[0]`).
    Index(Box<Expr>, Box<Expr>, SpanRange),
    /// `Path { field: value, .. }`: a struct of tensors to return.
    Struct(syn::Path, Vec<(syn::Member, Expr)>, SpanRange),
    /// Unsupported syntax, already reported.
    Error(SpanRange),
}

impl Expr {
    pub fn span(&self) -> SpanRange {
        match self {
            Expr::Var(i) => SpanRange::single(i.span()),
            Expr::Float(_, s)
            | Expr::Int(_, s)
            | Expr::Bool(_, s)
            | Expr::DType(_, s)
            | Expr::List(_, s)
            | Expr::Tuple(_, s)
            | Expr::Method { span: s, .. }
            | Expr::Static { span: s, .. }
            | Expr::Call { span: s, .. }
            | Expr::Binary { span: s, .. }
            | Expr::Neg(_, s)
            | Expr::Not(_, s)
            | Expr::If { span: s, .. }
            | Expr::Vec(_, s)
            | Expr::Cast(_, _, s)
            | Expr::NoGrad(_, s)
            | Expr::Block(_, s)
            | Expr::Field(_, _, s)
            | Expr::Index(_, _, s)
            | Expr::Struct(_, _, s)
            | Expr::Error(s) => *s,
        }
    }
}

/// Parses a function body.
pub fn parse_block(block: &syn::Block, errors: &mut Errors) -> Block {
    parse_stmts(&block.stmts, errors)
}

fn parse_stmts(stmts: &[syn::Stmt], errors: &mut Errors) -> Block {
    let mut out = Block { stmts: Vec::new(), tail: None };
    let last = stmts.len().saturating_sub(1);
    for (i, stmt) in stmts.iter().enumerate() {
        match stmt {
            syn::Stmt::Local(local) => {
                if let Some(s) = parse_local(local, errors) {
                    out.stmts.push(s);
                }
            }
            syn::Stmt::Expr(syn::Expr::ForLoop(f), _) => {
                if let Some(s) = parse_for(f, errors) {
                    out.stmts.push(s);
                }
            }
            syn::Stmt::Expr(syn::Expr::Assign(a), Some(_)) => match &*a.left {
                syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                    let name = p.path.get_ident().cloned();
                    if let Some(name) = name {
                        out.stmts.push(Stmt::Assign { name, value: parse_expr(&a.right, errors) });
                    }
                }
                other => {
                    errors.add(
                        SpanRange::of(other),
                        "only plain names can be assigned to in an `#[aot_fn]` body",
                        Some("write into a tensor with `copy_`".into()),
                    );
                }
            },
            syn::Stmt::Expr(e, semi) => {
                let e = parse_expr(e, errors);
                if semi.is_none() && i == last {
                    out.tail = Some(Box::new(e));
                } else {
                    out.stmts.push(Stmt::Expr(e));
                }
            }
            syn::Stmt::Macro(m) => {
                let e = parse_macro(&m.mac, errors);
                // A trailing `no_grad! { .. }` is the block's value.
                if m.semi_token.is_none() && i == last {
                    out.tail = Some(Box::new(e));
                } else {
                    out.stmts.push(Stmt::Expr(e));
                }
            }
            syn::Stmt::Item(item) => {
                errors.add(
                    SpanRange::of(item),
                    "items are not supported inside an `#[aot_fn]` body",
                    Some("move the item outside the function".into()),
                );
            }
        }
    }
    out
}

fn parse_local(local: &syn::Local, errors: &mut Errors) -> Option<Stmt> {
    let pat = parse_pat(&local.pat, errors)?;
    let Some(init) = &local.init else {
        errors.add(SpanRange::of(local), "`let` without a value is not supported", Some("bind the value directly: `let x = ...;`".into()));
        return None;
    };
    if let Some((else_token, _)) = &init.diverge {
        errors.add(SpanRange::of(else_token), "`let ... else` is not supported in an `#[aot_fn]` body", None);
        return None;
    }
    Some(Stmt::Let { pat, init: parse_expr(&init.expr, errors) })
}

fn parse_pat(pat: &syn::Pat, errors: &mut Errors) -> Option<Pat> {
    match pat {
        syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(Pat::Bind(p.ident.clone(), p.mutability.is_some())),
        syn::Pat::Wild(_) => Some(Pat::Wild),
        syn::Pat::Type(t) => parse_pat(&t.pat, errors),
        syn::Pat::Paren(p) => parse_pat(&p.pat, errors),
        syn::Pat::Tuple(t) => {
            let items: Option<Vec<Pat>> = t.elems.iter().map(|p| parse_pat(p, errors)).collect();
            Some(Pat::Tuple(items?, SpanRange::of(t)))
        }
        other => {
            errors.add(
                SpanRange::of(other),
                "unsupported pattern in `let`",
                Some("bind a name (`let x = ..`) or a tuple of names (`let (a, b) = ..`)".into()),
            );
            None
        }
    }
}

fn parse_for(f: &syn::ExprForLoop, errors: &mut Errors) -> Option<Stmt> {
    let span = SpanRange::of(f);
    if f.label.is_some() {
        errors.add(SpanRange::of(&f.label), "loop labels are not supported", None);
    }
    let var = match &*f.pat {
        syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(p.ident.clone()),
        syn::Pat::Wild(_) => None,
        other => {
            errors.add(SpanRange::of(other), "unsupported loop pattern", Some("use a name or `_`: `for i in 0..3`".into()));
            return None;
        }
    };
    let syn::Expr::Range(syn::ExprRange { start: Some(start), end: Some(end), limits, .. }) = &*f.expr else {
        errors.add(
            SpanRange::of(&f.expr),
            "a `for` loop must iterate over a range with both bounds",
            Some("`for` loops are unrolled: iterate over a range of integers like `0..4`, `0..n` or `0..x.size(0)`".into()),
        );
        return None;
    };
    let closed = matches!(limits, syn::RangeLimits::Closed(_));
    let (start, end) = (parse_bound(start, errors), parse_bound(end, errors));
    let body = parse_block(&f.body, errors);
    Some(Stmt::For { var, start, end, closed, body, span })
}

/// A loop bound; a path to an item (`model::LAYERS`) cannot be unrolled.
fn parse_bound(e: &syn::Expr, errors: &mut Errors) -> Expr {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() && p.path.segments.len() > 1 => {
            let name = p.path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::");
            let span = SpanRange::of(e);
            const_bound_error(errors, span, &name);
            Expr::Error(span)
        }
        _ => parse_expr(e, errors),
    }
}

/// A loop bound that names a `const` item (or anything else out of the
/// body's reach): its value is not visible to the macro.
pub fn const_bound_error(errors: &mut Errors, span: SpanRange, name: &str) {
    errors.add(
        span,
        format!("`#[aot_fn]` cannot read the value of `{name}`: a macro sees only the function's own tokens, not `const` items"),
        Some(format!(
            "write the bound as an integer literal (`0..2`), unrolled when the macro expands, and keep it in step with the constant by asserting it beside the function: `const _: () = assert!({name} == 2);`; or pass the count as a parameter (`n: usize`), unrolled when the function is called"
        )),
    );
}

/// `if cond { .. } else ..`; whether `cond` may be branched on is decided
/// when lowering, which knows what the name is.
fn parse_if(i: &syn::ExprIf, span: SpanRange, errors: &mut Errors) -> Expr {
    if let syn::Expr::Let(l) = &*i.cond {
        return report_unsupported(
            errors,
            SpanRange::of(l),
            "`if let`",
            Some("only `if flag { .. } else { .. }` on a `bool` parameter is supported"),
        );
    }
    let cond = parse_expr(&i.cond, errors);
    let then = parse_block(&i.then_branch, errors);
    let els = i.else_branch.as_ref().map(|(_, e)| Box::new(parse_expr(e, errors)));
    Expr::If { cond: Box::new(cond), then, els, span }
}

fn parse_macro(mac: &syn::Macro, errors: &mut Errors) -> Expr {
    let span = SpanRange::of(mac);
    if mac.path.is_ident("vec") {
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        return match mac.parse_body_with(parser) {
            Ok(items) => Expr::Vec(items.iter().map(|x| parse_expr(x, errors)).collect(), span),
            Err(e) => {
                errors.push(e);
                Expr::Error(span)
            }
        };
    }
    if !mac.path.is_ident("no_grad") {
        let name = mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        errors.add(
            SpanRange::of(&mac.path),
            format!("macro `{name}!` is not supported in an `#[aot_fn]` body"),
            Some("the macros of the DSL are `no_grad! { .. }` and `vec![..]` (to return `Vec<Tensor>`)".into()),
        );
        return Expr::Error(span);
    }
    match mac.parse_body_with(syn::Block::parse_within) {
        Ok(stmts) => Expr::NoGrad(parse_stmts(&stmts, errors), span),
        Err(e) => {
            errors.push(e);
            Expr::Error(span)
        }
    }
}

/// Parses an expression, reporting unsupported syntax.
pub fn parse_expr(e: &syn::Expr, errors: &mut Errors) -> Expr {
    let span = SpanRange::of(e);
    let mut unsupported = |what: &str, help: Option<&str>| report_unsupported(errors, span, what, help);
    match e {
        syn::Expr::Lit(l) => parse_lit(&l.lit, span, errors),
        syn::Expr::Path(p) => parse_path(p, span, errors),
        syn::Expr::MethodCall(m) => {
            if m.turbofish.is_some() {
                return unsupported("a turbofish (`::<..>`)", None);
            }
            if let Some(call) = self_method_call(m, span, errors) {
                return call;
            }
            let recv = parse_expr(&m.receiver, errors);
            let args = m.args.iter().map(|a| parse_expr(a, errors)).collect();
            let call = SpanRange::single(m.method.span()).to(SpanRange::single(m.paren_token.span.join()));
            Expr::Method { recv: Box::new(recv), method: m.method.clone(), args, span, call, op: None, special: None }
        }
        syn::Expr::Binary(b) => parse_binary(b, span, errors),
        syn::Expr::Unary(u) => match u.op {
            syn::UnOp::Neg(_) => Expr::Neg(Box::new(parse_expr(&u.expr, errors)), span),
            // `&*buf` (how plain Rust reborrows a `&mut Tensor`) is the
            // tensor itself, as `&` is.
            syn::UnOp::Deref(_) => parse_expr(&u.expr, errors),
            syn::UnOp::Not(_) => Expr::Not(Box::new(parse_expr(&u.expr, errors)), span),
            _ => unsupported("this operator", None),
        },
        // `&` on operands is accepted and ignored: `a.add(&b)` and `a.add(b)` are the same.
        syn::Expr::Reference(r) => parse_expr(&r.expr, errors),
        syn::Expr::Array(a) => Expr::List(a.elems.iter().map(|x| parse_expr(x, errors)).collect(), span),
        syn::Expr::Paren(p) => parse_expr(&p.expr, errors),
        syn::Expr::Group(g) => parse_expr(&g.expr, errors),
        syn::Expr::Tuple(t) => Expr::Tuple(t.elems.iter().map(|x| parse_expr(x, errors)).collect(), span),
        syn::Expr::Macro(m) => parse_macro(&m.mac, errors),
        syn::Expr::Block(b) if b.label.is_none() => Expr::Block(parse_block(&b.block, errors), span),
        syn::Expr::Cast(c) => match cast_target(&c.ty) {
            Some(ty) => Expr::Cast(Box::new(parse_expr(&c.expr, errors)), ty, span),
            None => unsupported("this cast", Some("scalars can be cast with `as f64`, `as f32`, `as i64` or `as usize`")),
        },
        syn::Expr::Closure(_) => unsupported("closures", Some("write the computation inline; the body is traced once at compile time")),
        syn::Expr::Match(_) => unsupported(
            "`match`",
            Some("the traced program is a fixed sequence of ops; select values elementwise with `where_(&cond, &other)`"),
        ),
        syn::Expr::If(i) => parse_if(i, span, errors),
        syn::Expr::While(_) | syn::Expr::Loop(_) => {
            unsupported("this loop", Some("only `for` loops over integer ranges (`for i in 0..4`) are supported; they are unrolled"))
        }
        syn::Expr::ForLoop(_) => unsupported("a `for` loop in expression position", Some("use the loop as a statement")),
        syn::Expr::Return(_) => unsupported("`return`", Some("make the returned value the tail expression of the body")),
        syn::Expr::Try(_) => unsupported(
            "the `?` operator",
            Some("remove the `?`: ops in the body return tensors, and errors propagate from the generated function"),
        ),
        syn::Expr::Async(_) | syn::Expr::Await(_) => unsupported("`async`/`.await`", None),
        syn::Expr::Call(c) if static_op(&c.func).is_some() => {
            let func = static_op(&c.func).cloned().unwrap_or_else(|| Ident::new("_", c.paren_token.span.join()));
            let args = c.args.iter().map(|a| parse_expr(a, errors)).collect();
            let call = SpanRange::of(&c.func).to(SpanRange::single(c.paren_token.span.join()));
            Expr::Static { func, args, span, call, op: None }
        }
        syn::Expr::Call(c) if number_method(&c.func).is_some() && !c.args.is_empty() => {
            // `f64::powi(b, t)` is `b.powi(t)`, as in Rust.
            let method = number_method(&c.func).cloned().unwrap_or_else(|| Ident::new("_", c.paren_token.span.join()));
            let mut args = c.args.iter().map(|a| parse_expr(a, errors));
            let recv = args.next().unwrap_or(Expr::Error(span));
            let call = SpanRange::of(&c.func).to(SpanRange::single(c.paren_token.span.join()));
            Expr::Method { recv: Box::new(recv), method, args: args.collect(), span, call, op: None, special: None }
        }
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p) if p.qself.is_none() => {
                let args = c.args.iter().map(|a| call_arg(a, errors)).collect();
                Expr::Call { path: p.path.clone(), args, span }
            }
            _ => unsupported("calls of closures or computed functions", Some("call an `#[aot_fn]` function by its name: `helper(&x)`")),
        },
        // Fields of struct parameters; lowering refuses them elsewhere.
        syn::Expr::Field(f) => Expr::Field(Box::new(parse_expr(&f.base, errors)), f.member.clone(), span),
        syn::Expr::Struct(s) if s.rest.is_some() || s.dot2_token.is_some() => {
            unsupported("struct update syntax (`..`)", Some("name every field of the returned struct"))
        }
        syn::Expr::Struct(s) if s.qself.is_none() => {
            Expr::Struct(s.path.clone(), s.fields.iter().map(|f| (f.member.clone(), parse_expr(&f.expr, errors))).collect(), span)
        }
        syn::Expr::Index(i) => Expr::Index(Box::new(parse_expr(&i.expr, errors)), Box::new(parse_expr(&i.index, errors)), span),
        syn::Expr::Assign(_) => unsupported("assignment", Some("bind a new name with `let`, or write into a tensor with `copy_`")),
        syn::Expr::Range(_) => unsupported("a range outside a `for` loop", None),
        syn::Expr::Unsafe(_) => unsupported("`unsafe` blocks", None),
        _ => unsupported("this expression", None),
    }
}

/// Parses a literal: floats, integers that fit in `i64`, bools.
fn parse_lit(lit: &syn::Lit, span: SpanRange, errors: &mut Errors) -> Expr {
    match lit {
        syn::Lit::Float(f) => match f.base10_parse::<f64>() {
            Ok(v) => Expr::Float(v, span),
            Err(err) => {
                errors.push(err);
                Expr::Error(span)
            }
        },
        syn::Lit::Int(i) => match i.base10_parse::<i64>() {
            Ok(v) => Expr::Int(v, span),
            Err(_) => report_unsupported(errors, span, "an integer literal outside the range of `i64`", None),
        },
        syn::Lit::Bool(b) => Expr::Bool(b.value, span),
        _ => report_unsupported(errors, span, "this literal", Some("the DSL has numbers and bools")),
    }
}

/// Reports `what` as unsupported syntax, with an optional help line.
fn report_unsupported(errors: &mut Errors, span: SpanRange, what: &str, help: Option<&str>) -> Expr {
    errors.add(
        span,
        format!("{what} {} not supported in an `#[aot_fn]` body", if what.ends_with('s') { "are" } else { "is" }),
        help.map(str::to_string),
    );
    Expr::Error(span)
}

/// Parses a binary operation; comparisons, compound assignments and the
/// other operators are reported with what to write instead.
fn parse_binary(b: &syn::ExprBinary, span: SpanRange, errors: &mut Errors) -> Expr {
    let op = match b.op {
        syn::BinOp::Add(_) => BinOp::Add,
        syn::BinOp::Sub(_) => BinOp::Sub,
        syn::BinOp::Mul(_) => BinOp::Mul,
        syn::BinOp::Div(_) => BinOp::Div,
        syn::BinOp::Lt(_) | syn::BinOp::Le(_) | syn::BinOp::Gt(_) | syn::BinOp::Ge(_) | syn::BinOp::Eq(_) | syn::BinOp::Ne(_) => {
            errors.add(
                SpanRange::of(&b.op),
                "comparison operators are not supported in an `#[aot_fn]` body",
                Some("compare tensors elementwise with the methods `lt`, `le`, `gt`, `ge`, `eq`, `ne`: `a.lt(&b)`".into()),
            );
            return Expr::Error(span);
        }
        syn::BinOp::AddAssign(_) | syn::BinOp::SubAssign(_) | syn::BinOp::MulAssign(_) | syn::BinOp::DivAssign(_) => {
            errors.add(
                SpanRange::of(&b.op),
                "compound assignment is not supported in an `#[aot_fn]` body",
                Some("use the in-place methods: `a.add_(&b)`, `a.sub_(&b)`, `a.mul_(&b)`, `a.div_(&b)`".into()),
            );
            return Expr::Error(span);
        }
        _ => {
            errors.add(
                SpanRange::of(&b.op),
                "this operator is not supported in an `#[aot_fn]` body",
                Some("the operators are `+ - * /` and unary `-`".into()),
            );
            return Expr::Error(span);
        }
    };
    let lhs = parse_expr(&b.left, errors);
    let rhs = parse_expr(&b.right, errors);
    Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs), span }
}

fn parse_path(p: &syn::ExprPath, span: SpanRange, errors: &mut Errors) -> Expr {
    if p.qself.is_none() {
        if let Some(ident) = p.path.get_ident() {
            return Expr::Var(ident.clone());
        }
        if let Some(v) = float_const(&p.path) {
            return Expr::Float(v, span);
        }
        // `DType::F32`, also spelled with a crate prefix.
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() >= 2 && segs[segs.len() - 2] == "DType" {
            if let Some(d) = DType::from_variant_name(&segs[segs.len() - 1]) {
                return Expr::DType(d, span);
            }
        }
    }
    errors.add(
        span,
        "unsupported path in an `#[aot_fn]` body",
        Some("refer to parameters and `let` bindings by name, to dtypes as `DType::F32`, and to constants as `f64::consts::PI`".into()),
    );
    Expr::Error(span)
}

/// `f` of a call `Tensor::f(..)` (also with a path before `Tensor`).
fn static_op(func: &syn::Expr) -> Option<&Ident> {
    let syn::Expr::Path(p) = func else { return None };
    let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
    match segs[..] {
        [.., ty, f] if p.qself.is_none() && ty.ident == "Tensor" && ty.arguments.is_empty() && f.arguments.is_empty() => Some(&f.ident),
        _ => None,
    }
}

fn cast_target(ty: &syn::Type) -> Option<ScalarTy> {
    let syn::Type::Path(p) = ty else { return None };
    let name = p.path.get_ident()?.to_string();
    match name.as_str() {
        "f64" | "f32" => Some(ScalarTy::Float),
        "i64" | "i32" | "usize" | "isize" | "u32" | "u64" => Some(ScalarTy::Int),
        _ => None,
    }
}
