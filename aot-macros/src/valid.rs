//! Step 2, validate: the signature, and every method call against the op
//! table (known name, arity, argument syntax).
//!
//! What needs name resolution (is `b` a tensor or a scalar?) is checked by
//! lowering; validation marks each call it accepted (`op: Some(..)`) so that
//! lowering neither repeats an error nor trips over a call already reported.

use crate::ast::{Block, Expr, Special, Stmt};
use crate::diag::{suggest, Errors, SpanRange};
use aot_ir::{op::op_names, OpKind, ParamKind, ParamType, ReturnKind, ScalarFn};
use syn::{FnArg, Ident, ReturnType, Type};

/// One parameter of a valid signature.
pub struct ParamSig {
    pub ident: Ident,
    /// Declared `mut`: the body may assign to it.
    pub mutable: bool,
    pub ty: ParamType,
    /// A struct of tensors (`m: &Mlp`): `ty` is `Tensor` or `TensorMut`
    /// for the borrow, and each field the body uses becomes a graph input.
    pub tree: bool,
    pub span: SpanRange,
}

/// The parts of the signature the later steps need.
pub struct Signature {
    pub params: Vec<ParamSig>,
    pub ret: ReturnKind,
    /// The function returns a struct of tensors (`-> Mlp`): `ret` is
    /// decided by the struct the body builds.
    pub ret_struct: bool,
    /// The function returns `Vec<Tensor>`: `ret` is decided by the
    /// `vec![..]` the body ends in.
    pub ret_vec: bool,
    /// A method (`&self` or `&mut self`): its first parameter is `self`.
    pub method: bool,
    /// The path of the runtime crate: `::aot_runtime`, or the attribute's
    /// `crate = ..` (set by `expand`).
    pub krate: proc_macro2::TokenStream,
    pub ret_span: SpanRange,
}

const PARAM_HELP: &str =
    "parameters can be `&Tensor`, `&mut Tensor`, `f64`, `f32`, `i64`, `usize`, `bool`, or a reference to a struct that derives `TensorTree` (`&Mlp`, `&mut Mlp`)";

/// Checks the signature. Returns `None` (with errors recorded) when a later
/// step could not make sense of it.
pub fn signature(sig: &syn::Signature, errors: &mut Errors) -> Option<Signature> {
    let before = errors.len();
    let qualifier = |errors: &mut Errors, at: SpanRange, what: &str| {
        errors.add(
            at,
            format!("`{what} fn` is not supported by `#[aot_fn]`"),
            Some("remove the qualifier: the function is traced at compile time and runs synchronously".into()),
        );
    };
    if let Some(t) = &sig.constness {
        qualifier(errors, SpanRange::of(t), "const");
    }
    if let Some(t) = &sig.asyncness {
        qualifier(errors, SpanRange::of(t), "async");
    }
    if let Some(t) = &sig.unsafety {
        qualifier(errors, SpanRange::of(t), "unsafe");
    }
    if let Some(abi) = &sig.abi {
        qualifier(errors, SpanRange::of(abi), "extern");
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.add(
            SpanRange::of(&sig.generics),
            "generic parameters are not supported by `#[aot_fn]`",
            Some("the function is traced once, at compile time, for concrete types: use `&Tensor`, `&mut Tensor` and scalar types".into()),
        );
    }
    if let Some(v) = &sig.variadic {
        errors.add(SpanRange::of(v), "variadic parameters are not supported by `#[aot_fn]`", None);
    }

    // A parameter typed by a generic parameter is already reported above.
    let generic_types: Vec<&Ident> = sig.generics.type_params().map(|t| &t.ident).collect();
    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            // `&self` / `&mut self` of a type deriving `TensorTree`: a
            // struct parameter named `self` (rustc checks the trait).
            FnArg::Receiver(r) if r.reference.is_some() && r.colon_token.is_none() => {
                let ty = if r.mutability.is_some() { ParamType::TensorMut } else { ParamType::Tensor };
                params.push(ParamSig {
                    ident: Ident::new("self", r.self_token.span),
                    mutable: false,
                    ty,
                    tree: true,
                    span: SpanRange::of(r),
                });
            }
            FnArg::Receiver(r) => errors.add(
                SpanRange::of(r),
                "`#[aot_fn]` methods take `&self` or `&mut self`",
                Some("the type must derive `TensorTree`; its tensor fields become the graph's inputs (`self.w1`)".into()),
            ),
            FnArg::Typed(pt) => {
                let (ident, mutable) = match &*pt.pat {
                    syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => (p.ident.clone(), p.mutability.is_some()),
                    other => {
                        errors.add(SpanRange::of(other), "parameters must be plain names", Some("write `name: Type`".into()));
                        continue;
                    }
                };
                if params.iter().any(|p: &ParamSig| p.ident == ident) {
                    errors.add(SpanRange::of(&ident), format!("parameter `{ident}` is declared twice"), None);
                    continue;
                }
                let span = SpanRange::of(pt);
                let generic = matches!(&*pt.ty, Type::Path(p) if p.path.get_ident().is_some_and(|i| generic_types.contains(&i)));
                if generic {
                    continue;
                }
                if let Some((ty, tree)) = param_type(&pt.ty, errors) {
                    params.push(ParamSig { ident, mutable, ty, tree, span });
                }
            }
        }
    }

    let (ret, ret_span) = match &sig.output {
        ReturnType::Default => (Some((ReturnKind::Unit, false)), SpanRange::of(&sig.ident)),
        ReturnType::Type(_, ty) => (return_kind(ty, errors), SpanRange::of(ty)),
    };
    if errors.len() > before {
        return None;
    }
    let (ret, ret_struct) = ret?;
    let ret_vec = matches!(&sig.output, ReturnType::Type(_, ty) if is_vec_of_tensor(ty));
    let method = matches!(sig.inputs.first(), Some(FnArg::Receiver(_)));
    let krate = quote::quote!(::aot_runtime);
    Some(Signature { params, ret, ret_struct: ret_struct && !ret_vec, ret_vec, method, krate, ret_span })
}

fn is_tensor_path(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().is_some_and(|s| s.ident == "Tensor" && s.arguments.is_empty()),
        Type::Group(g) => is_tensor_path(&g.elem),
        Type::Paren(p) => is_tensor_path(&p.elem),
        _ => false,
    }
}

/// `Vec<Tensor>`.
fn is_vec_of_tensor(ty: &Type) -> bool {
    let Type::Path(p) = ty else { return false };
    let Some(last) = p.path.segments.last() else { return false };
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) if last.ident == "Vec" && a.args.len() == 1 => {
            matches!(a.args.first(), Some(syn::GenericArgument::Type(t)) if is_tensor_path(t))
        }
        _ => false,
    }
}

/// The parameter's type, and whether it is a struct of tensors.
fn param_type(ty: &Type, errors: &mut Errors) -> Option<(ParamType, bool)> {
    let at = SpanRange::of(ty);
    match ty {
        Type::Reference(r) if is_tensor_path(&r.elem) => {
            Some((if r.mutability.is_some() { ParamType::TensorMut } else { ParamType::Tensor }, false))
        }
        // Any other named type behind a reference is a struct of tensors;
        // rustc checks that it implements `TensorTree` in the generated call.
        Type::Reference(r) if matches!(&*r.elem, Type::Path(p) if p.qself.is_none() && scalar_type(p).is_none()) => {
            Some((if r.mutability.is_some() { ParamType::TensorMut } else { ParamType::Tensor }, true))
        }
        t if is_tensor_path(t) => {
            errors.add(
                at,
                "tensor parameters must be taken by reference",
                Some("write `&Tensor`, or `&mut Tensor` if the body mutates it".into()),
            );
            None
        }
        Type::Path(p) if p.qself.is_none() => {
            let found = scalar_type(p);
            if found.is_none() {
                errors.add(at, "unsupported parameter type", Some(PARAM_HELP.into()));
            }
            found.map(|t| (t, false))
        }
        Type::Group(g) => param_type(&g.elem, errors),
        _ => {
            errors.add(at, "unsupported parameter type", Some(PARAM_HELP.into()));
            None
        }
    }
}

fn scalar_type(p: &syn::TypePath) -> Option<ParamType> {
    p.path.get_ident().and_then(|i| match i.to_string().as_str() {
        "f64" => Some(ParamType::F64),
        "f32" => Some(ParamType::F32),
        "i64" => Some(ParamType::I64),
        "usize" => Some(ParamType::Usize),
        "bool" => Some(ParamType::Bool),
        _ => None,
    })
}

/// The return kind, and whether it is a struct of tensors.
fn return_kind(ty: &Type, errors: &mut Errors) -> Option<(ReturnKind, bool)> {
    const HELP: &str =
        "return `Tensor`, a tuple of `Tensor`s such as `(Tensor, Tensor)`, `Vec<Tensor>`, a struct of tensors built in the body (`-> Mlp`), or nothing";
    match ty {
        t if is_tensor_path(t) => Some((ReturnKind::Single, false)),
        t if is_vec_of_tensor(t) => Some((ReturnKind::Tuple(0), true)),
        Type::Tuple(t) if t.elems.is_empty() => Some((ReturnKind::Unit, false)),
        Type::Tuple(t) if t.elems.iter().all(is_tensor_path) => Some((ReturnKind::Tuple(t.elems.len()), false)),
        Type::Group(g) => return_kind(&g.elem, errors),
        Type::Paren(p) => return_kind(&p.elem, errors),
        Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Result") => {
            errors.add(
                SpanRange::of(ty),
                "unsupported return type: write the plain type without `Result`",
                Some("the generated function already returns `aot_runtime::Result<...>` of the declared type".into()),
            );
            None
        }
        // A named type without generic arguments: a struct the body builds
        // with a literal (rustc checks its fields).
        Type::Path(p) if p.qself.is_none() && p.path.segments.iter().all(|s| s.arguments.is_empty()) && scalar_type(p).is_none() => {
            Some((ReturnKind::Tuple(0), true))
        }
        _ => {
            errors.add(SpanRange::of(ty), "unsupported return type", Some(HELP.into()));
            None
        }
    }
}

/// Checks every method call of the body against the op table and records
/// the op it names.
pub fn body(block: &mut Block, errors: &mut Errors) {
    for stmt in &mut block.stmts {
        match stmt {
            Stmt::Let { init, .. } | Stmt::Assign { value: init, .. } => expr(init, errors),
            Stmt::Expr(e) => expr(e, errors),
            Stmt::For { start, end, body: b, .. } => {
                expr(start, errors);
                expr(end, errors);
                body(b, errors);
            }
        }
    }
    if let Some(t) = &mut block.tail {
        expr(t, errors);
    }
}

fn expr(e: &mut Expr, errors: &mut Errors) {
    match e {
        Expr::Method { recv, method, args, call, op, special, .. } => {
            expr(recv, errors);
            args.iter_mut().for_each(|a| expr(a, errors));
            *special = special_method(method, args, *call, errors);
            // A name that is only a scalar method or a size query is no op.
            if special.is_none() || OpKind::from_name(&method.to_string()).is_some() {
                let field = field_text(recv);
                *op = method_call(method, args, *call, errors, special.is_some(), field.as_deref());
            }
        }
        Expr::If { cond, then, els, .. } => {
            expr(cond, errors);
            body(then, errors);
            if let Some(e) = els {
                expr(e, errors);
            }
        }
        Expr::Static { func, args, call, op, .. } => {
            args.iter_mut().for_each(|a| expr(a, errors));
            *op = static_call(func, args, *call, errors);
        }
        Expr::Binary { lhs, rhs, .. } => {
            expr(lhs, errors);
            expr(rhs, errors);
        }
        Expr::Neg(x, _) | Expr::Not(x, _) | Expr::Cast(x, _, _) | Expr::Field(x, _, _) => expr(x, errors),
        Expr::Struct(_, fields, _) => fields.iter_mut().for_each(|(_, x)| expr(x, errors)),
        Expr::Call { args, .. } => args.iter_mut().for_each(|(x, _)| expr(x, errors)),
        Expr::Index(x, i, _) => {
            expr(x, errors);
            expr(i, errors);
        }
        Expr::List(xs, _) | Expr::Tuple(xs, _) | Expr::Vec(xs, _) => xs.iter_mut().for_each(|x| expr(x, errors)),
        Expr::NoGrad(b, _) | Expr::Block(b, _) => body(b, errors),
        Expr::Var(_) | Expr::Float(..) | Expr::Int(..) | Expr::Bool(..) | Expr::DType(..) | Expr::Error(_) => {}
    }
}

/// A method of scalars (`powi`, `sqrt`) or a size query (`size`,
/// `shape`), with its arity checked. Names that are also tensor ops
/// (`sqrt`) are checked as both; lowering picks by the receiver.
fn special_method(method: &Ident, args: &[Expr], call: SpanRange, errors: &mut Errors) -> Option<Special> {
    let name = method.to_string();
    let (special, arity, usage) = match name.as_str() {
        "size" => (Special::Size, 1, "x.size(dim)".to_string()),
        "shape" => (Special::Shape, 0, "x.shape()[dim]".to_string()),
        "device" => (Special::Device, 0, "x.device()".to_string()),
        _ => {
            let f = ScalarFn::from_name(&name)?;
            let usage = if f.arity() == 1 { format!("x.{name}(y)") } else { format!("x.{name}()") };
            (Special::Scalar(f), f.arity(), usage)
        }
    };
    // A tensor op of the same name checks its own arity, and a method of
    // numbers is checked when lowering sees its receiver (`x.max()` on a
    // tensor is not an arity mistake).
    if args.len() != arity && OpKind::from_name(&name).is_none() && !matches!(special, Special::Scalar(_)) {
        errors.add(
            call,
            format!("`{name}` takes {arity} argument{} but {} supplied", if arity == 1 { "" } else { "s" }, args.len()),
            Some(format!("call it as `{usage}`")),
        );
        return None;
    }
    Some(special)
}

/// `m.blk` or `self.layers[0]` as written, for a receiver that is a field
/// of a struct parameter.
fn field_text(e: &Expr) -> Option<String> {
    match e {
        Expr::Field(base, member, _) => {
            let base = match &**base {
                Expr::Var(id) => id.to_string(),
                other => field_text(other)?,
            };
            Some(format!("{base}.{}", quote::ToTokens::to_token_stream(member)))
        }
        Expr::Index(base, index, _) => {
            let k = match &**index {
                Expr::Int(k, _) => k.to_string(),
                _ => "..".into(),
            };
            Some(format!("{}[{k}]", field_text(base)?))
        }
        _ => None,
    }
}

/// A method call on a tensor (`field` is the receiver as written when it
/// is a field of a struct parameter).
fn method_call(method: &Ident, args: &[Expr], call: SpanRange, errors: &mut Errors, special: bool, field: Option<&str>) -> Option<OpKind> {
    let name = method.to_string();
    let at = SpanRange::single(method.span());
    if name == "clone" {
        errors.add(
            at,
            "`.clone()` on a tensor is not supported in an `#[aot_fn]` body: it would copy the handle, not the data",
            Some("write `.copy()` for a copy of the data (PyTorch's `clone()`), or use the tensor itself to share it".into()),
        );
        return None;
    }
    if name == "dtype" {
        errors.add(
            at,
            "`dtype()` cannot be read in an `#[aot_fn]` body: a body reads the values and sizes of tensors, not their dtypes",
            Some("write the dtype itself: `.to_dtype(DType::F32)`".into()),
        );
        return None;
    }
    let Some(op) = OpKind::from_name(&name) else {
        let help = match (suggest(&name, op_names()), field) {
            (Some(s), _) if OpKind::from_name(s).is_some_and(|k| k.sig().is_static()) => format!("did you mean `Tensor::{s}`?"),
            (Some(s), _) => format!("did you mean `{s}`?"),
            (None, Some(f)) => format!(
                "to call the `#[aot_fn]` method `{name}` of a struct field, name its type: `Type::{name}(&{f}, ..)`; on `self` itself, `self.{name}(..)` works"
            ),
            (None, None) => format!("the ops are listed in the `aot_runtime::dsl` docs: {}", op_names().collect::<Vec<_>>().join(", ")),
        };
        errors.add(at, format!("unknown op `{name}` in an `#[aot_fn]` body"), Some(help));
        return None;
    };
    // A scalar method of the same name with another arity (none today)
    // leaves the tensor form's arity to lowering.
    if special && args.len() != op.sig().params.len() {
        return None;
    }
    if op.sig().is_static() {
        errors.add(at, format!("`{name}` is not a method: it takes a list of tensors"), Some(format!("call it as `{}`", op.sig().usage)));
        return None;
    }
    if op.sig().is_factory() {
        errors.add(at, format!("`{name}` is not a method: it is a function of `Tensor`"), Some(format!("call it as `{}`", op.sig().usage)));
        return None;
    }
    check_call(op, &name, args, call, errors)
}

/// A call `Tensor::func(args..)` of a static op.
fn static_call(func: &Ident, args: &[Expr], call: SpanRange, errors: &mut Errors) -> Option<OpKind> {
    let name = func.to_string();
    let at = SpanRange::single(func.span());
    match OpKind::from_name(&name) {
        Some(op) if op.sig().is_static() => check_call(op, &name, args, call, errors),
        Some(op) if op.sig().is_factory() => check_factory(op, &name, args, call, errors),
        Some(op) => {
            errors.add(at, format!("`{name}` is a method, not a function of `Tensor`"), Some(format!("call it as `{}`", op.sig().usage)));
            None
        }
        None => {
            let statics: Vec<&str> = aot_ir::op::OP_TABLE.iter().filter(|s| s.is_static() || s.is_factory()).map(|s| s.name).collect();
            let help = match suggest(&name, statics.iter().copied()) {
                Some(s) => format!("did you mean `Tensor::{s}`?"),
                None => format!(
                    "the functions of `Tensor` in an `#[aot_fn]` body are {}",
                    statics.iter().map(|s| format!("`Tensor::{s}`")).collect::<Vec<_>>().join(", ")
                ),
            };
            errors.add(at, format!("unknown function `Tensor::{name}` in an `#[aot_fn]` body"), Some(help));
            None
        }
    }
}

/// A call's arity and argument syntax against the op's signature.
fn check_call(op: OpKind, name: &str, args: &[Expr], call: SpanRange, errors: &mut Errors) -> Option<OpKind> {
    let sig = op.sig();
    if args.len() != sig.params.len() {
        let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
        errors.add(
            call,
            format!(
                "`{name}` takes {} {} but {} {} supplied",
                sig.params.len(),
                plural(sig.params.len()),
                args.len(),
                if args.len() == 1 { "was" } else { "were" }
            ),
            Some(format!("call it as `{}`", sig.usage)),
        );
        return None;
    }
    let mut ok = true;
    for (arg, kind) in args.iter().zip(sig.params) {
        if let Some(found) = syntactic_mismatch(arg, *kind) {
            errors.add(
                arg.span(),
                format!("`{name}` expects {} here, found {found}", kind.describe()),
                Some(format!("call it as `{}`", sig.usage)),
            );
            ok = false;
        }
    }
    ok.then_some(op)
}

/// `Tensor::arange(..)`: PyTorch's forms `(end)`, `(start, end)`,
/// `(start, end, step)`, then the dtype, then the device as the eager
/// function takes them: `(start, end, step, DType::I64, &x.device())`.
fn check_factory(op: OpKind, name: &str, args: &[Expr], call: SpanRange, errors: &mut Errors) -> Option<OpKind> {
    let sig = op.sig();
    let usage =
        || Some(format!("call it as `{}`, or with PyTorch's defaults `Tensor::arange(end)`, `Tensor::arange(start, end)`", sig.usage));
    if args.is_empty() || args.len() > sig.params.len() + 1 {
        errors.add(call, format!("`{name}` takes 1 to {} arguments but {} were supplied", sig.params.len() + 1, args.len()), usage());
        return None;
    }
    let mut ok = true;
    for (k, arg) in args.iter().enumerate() {
        let device = matches!(arg, Expr::Method { special: Some(Special::Device), .. });
        let found = match sig.params.get(k) {
            Some(kind) => syntactic_mismatch(arg, *kind).or(device.then_some("a device")),
            None if device => None,
            // a tensor is not its device: `&x.device()` says which is meant
            None => Some(syntactic_mismatch(arg, ParamKind::Tensor).unwrap_or("an expression that is not `x.device()`")),
        };
        if let Some(found) = found {
            let want = sig.params.get(k).map_or("a device like `&x.device()`", |p| p.describe());
            errors.add(arg.span(), format!("`{name}` expects {want} here, found {found}"), usage());
            ok = false;
        }
    }
    ok.then_some(op)
}

/// The kinds visible from syntax alone: a list, a dtype, a literal.
fn syntactic_mismatch(arg: &Expr, kind: ParamKind) -> Option<&'static str> {
    let found = match arg {
        Expr::List(..) => "a list",
        Expr::DType(..) => "a dtype",
        Expr::Float(..) => "a float literal",
        Expr::Int(..) => "an integer literal",
        Expr::Bool(..) => "a bool literal",
        Expr::Tuple(..) => "a tuple",
        _ => return None,
    };
    let fits = matches!(
        (kind, arg),
        (ParamKind::Ints | ParamKind::Tensors, Expr::List(..))
            | (ParamKind::DType, Expr::DType(..))
            | (ParamKind::Operand | ParamKind::Float, Expr::Float(..) | Expr::Int(..))
            | (ParamKind::Int, Expr::Int(..))
            | (ParamKind::Bool, Expr::Bool(..))
    );
    (!fits).then_some(found)
}
