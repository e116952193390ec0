//! Call arguments: tensors by reference, and the scalar types of the DSL.
//!
//! The scalar values a call gives its graph are the declared scalar
//! arguments, then the sizes the body reads of its arguments and, by shape
//! propagation over the graph (`shape_prop.rs`), of tensors it computes.

mod shape_prop;

use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use crate::tree::TensorTree;
use aot_ir::{Graph, ParamType, ScalarValue};

/// One argument of a call to a compiled function, or of
/// [`CompiledFn::explain`](super::CompiledFn::explain).
///
/// ```
/// use aot_runtime::prelude::*;
/// use aot_runtime::Arg;
/// let x = Tensor::ones(&[2], DType::F32, &Device::Cpu)?;
/// let args = [Arg::from(&x), Arg::from(0.5), Arg::from(3usize)];
/// assert!(args[0].tensor().is_some());
/// # Ok::<(), AotError>(())
/// ```
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    /// A tensor (a `Tensor` or `&mut Tensor` parameter).
    Tensor(&'a Tensor),
    /// A struct of tensors (a parameter such as `m: &Mlp`), flattened into
    /// its leaves at the call ([`Arg::tree`]).
    Tree(&'a dyn TensorTree),
    /// An `f64` scalar.
    F64(f64),
    /// An `f32` scalar.
    F32(f32),
    /// An `i64` scalar.
    I64(i64),
    /// A `usize` scalar.
    Usize(usize),
    /// A `bool` scalar.
    Bool(bool),
}

impl std::fmt::Debug for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arg::Tensor(t) => f.debug_tuple("Tensor").field(t).finish(),
            Arg::Tree(t) => {
                let paths: Vec<String> = t.flatten().into_iter().map(|l| l.path).collect();
                f.debug_tuple("Tree").field(&paths).finish()
            }
            Arg::F64(v) => f.debug_tuple("F64").field(v).finish(),
            Arg::F32(v) => f.debug_tuple("F32").field(v).finish(),
            Arg::I64(v) => f.debug_tuple("I64").field(v).finish(),
            Arg::Usize(v) => f.debug_tuple("Usize").field(v).finish(),
            Arg::Bool(v) => f.debug_tuple("Bool").field(v).finish(),
        }
    }
}

impl<'a> Arg<'a> {
    /// A struct of tensors, for a parameter such as `m: &Mlp` or
    /// `state: &mut BatchNormState` (the type derives
    /// [`TensorTree`]).
    pub fn tree<T: TensorTree>(t: &'a T) -> Arg<'a> {
        Arg::Tree(t)
    }

    /// The tensor, when the argument is one.
    pub fn tensor(&self) -> Option<&'a Tensor> {
        match self {
            Arg::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Arg::Tensor(_) => "a tensor",
            Arg::Tree(_) => "a struct of tensors",
            Arg::F64(_) => "an f64",
            Arg::F32(_) => "an f32",
            Arg::I64(_) => "an i64",
            Arg::Usize(_) => "a usize",
            Arg::Bool(_) => "a bool",
        }
    }
}

impl<'a> From<&'a Tensor> for Arg<'a> {
    fn from(t: &'a Tensor) -> Self {
        Arg::Tensor(t)
    }
}

impl<'a> From<&'a mut Tensor> for Arg<'a> {
    fn from(t: &'a mut Tensor) -> Self {
        Arg::Tensor(t)
    }
}

macro_rules! arg_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Arg::$v(v)
            }
        }
    )*};
}
arg_from!(f64 => F64, f32 => F32, i64 => I64, usize => Usize, bool => Bool);

/// Checks the arguments against the signature and returns the scalar
/// values by parameter position (`None` at tensor positions; empty when
/// the function has no scalar parameter).
///
/// Numbers convert where no information is lost in a way the user could
/// not expect: any number for a float parameter, integers for integer
/// parameters.
pub(crate) fn scalar_values(g: &Graph, args: &[Arg]) -> Result<Vec<Option<ScalarValue>>> {
    scalar_values_upto(g, args, usize::MAX)
}

/// [`scalar_values`] for what node `node` may read: the sizes of computed
/// tensors read later are left out (shape propagation stops before the
/// node; `compiled/loops.rs` evaluates a loop's bounds so).
pub(crate) fn scalar_values_before(g: &Graph, args: &[Arg], node: usize) -> Result<Vec<Option<ScalarValue>>> {
    scalar_values_upto(g, args, node)
}

fn scalar_values_upto(g: &Graph, args: &[Arg], limit: usize) -> Result<Vec<Option<ScalarValue>>> {
    // The commonest signature, checked first on every call: tensors only,
    // each passed a tensor (nothing to return).
    let is_tensor = |p: &aot_ir::Param, a: &Arg| matches!(p.ty, ParamType::Tensor | ParamType::TensorMut) && a.tensor().is_some();
    if g.sizes.is_empty()
        && g.value_sizes.is_empty()
        && args.len() == g.params.len()
        && g.params.iter().zip(args).all(|(p, a)| is_tensor(p, a))
    {
        return Ok(Vec::new());
    }
    let sig_err = |msg: String| AotError::Signature { func: g.name.clone(), msg };
    if args.len() != g.params.len() {
        return Err(sig_err(format!("expected {} arguments, got {}", g.params.len(), args.len())));
    }
    let mut values = g.params.iter().zip(args).map(|(p, a)| {
        let v = match (p.ty, *a) {
            (ParamType::Tensor | ParamType::TensorMut, Arg::Tensor(_)) => None,
            (ParamType::F64 | ParamType::F32, Arg::F64(v)) => Some(ScalarValue::F64(v)),
            (ParamType::F64 | ParamType::F32, Arg::F32(v)) => Some(ScalarValue::F64(f64::from(v))),
            (ParamType::F64 | ParamType::F32, Arg::I64(v)) => Some(ScalarValue::F64(v as f64)),
            (ParamType::I64 | ParamType::Usize, Arg::I64(v)) => Some(ScalarValue::I64(v)),
            (ParamType::I64 | ParamType::Usize, Arg::Usize(v)) => {
                let v = i64::try_from(v).map_err(|_| sig_err(format!("argument `{}` = {v} does not fit in an i64", p.name)))?;
                Some(ScalarValue::I64(v))
            }
            (ParamType::Bool, Arg::Bool(v)) => Some(ScalarValue::Bool(v)),
            (ty, a) => {
                return Err(sig_err(format!("argument `{}` is declared `{}`, but {} was passed", p.name, ty.rust_name(), a.kind())));
            }
        };
        Ok(v)
    });
    if !g.sizes.is_empty() || !g.value_sizes.is_empty() {
        let mut values: Vec<Option<ScalarValue>> = values.collect::<Result<_>>()?;
        for &(p, dim) in &g.sizes {
            values.push(Some(ScalarValue::I64(size_of(g, args, p, dim)?)));
        }
        if !g.value_sizes.is_empty() {
            shape_prop::fill_value_sizes(g, args, &mut values, limit).map_err(|e| AotError::InFunction {
                func: g.name.clone(),
                arg: None,
                source: Box::new(e),
            })?;
        }
        return Ok(values);
    }
    if g.params.iter().all(|p| matches!(p.ty, ParamType::Tensor | ParamType::TensorMut)) {
        // Nothing to return (readers of the values look them up with
        // `get`): check the kinds without allocating, on every call.
        return values.try_for_each(|v| v.map(drop)).map(|()| Vec::new());
    }
    values.collect()
}

/// `x.size(dim)` of the tensor argument at `p`, for the body's
/// `x.size(d)` and `x.shape()[d]`.
fn size_of(g: &Graph, args: &[Arg], p: usize, dim: i64) -> Result<i64> {
    let name = g.params.get(p).map_or("?", |p| p.name.as_str());
    let t = args.get(p).and_then(Arg::tensor).ok_or_else(|| AotError::Signature {
        func: g.name.clone(),
        msg: format!("the body reads the size of `{name}`, but argument {p} is not a tensor"),
    })?;
    let shape = t.shape();
    let rank = shape.len() as i64;
    let d = if dim < 0 { dim + rank } else { dim };
    match usize::try_from(d).ok().and_then(|d| shape.get(d)) {
        Some(&n) => Ok(n as i64),
        None => Err(AotError::Signature {
            func: g.name.clone(),
            msg: format!("the body reads `{name}.size({dim})`, but `{name}` has {rank} dims (shape {shape:?})"),
        }),
    }
}

/// The bases of a call's input groups, made on demand from its arguments.
pub(crate) struct Bases<'s, 'a> {
    group_args: &'s [(usize, bool)],
    args: &'s [Arg<'a>],
}

impl<'s, 'a> Bases<'s, 'a> {
    /// The bases of `args` for a specialisation whose input group `g` is
    /// over argument `group_args[g].0`: the tensor itself when
    /// `group_args[g].1` (a one-tensor group), else its whole storage (all
    /// its bytes, as the storage's own dtype, when the argument is a dtype
    /// view: the group's other arguments may read them as other dtypes).
    pub(crate) fn new(group_args: &'s [(usize, bool)], args: &'s [Arg<'a>]) -> Bases<'s, 'a> {
        Bases { group_args, args }
    }

    /// The base of input group `g`.
    pub(crate) fn get(&self, g: usize) -> Option<Tensor> {
        let &(p, single) = self.group_args.get(g)?;
        let t = self.args.get(p)?.tensor()?;
        Some(if single { t.clone() } else { t.root_as_1d() })
    }

    /// The argument that is input group `g`'s base itself (a one-tensor
    /// group).
    pub(crate) fn single_arg(&self, g: usize) -> Option<usize> {
        self.group_args.get(g).and_then(|&(p, single)| single.then_some(p))
    }

    /// `f` of the base of input group `g`, borrowed where it is the
    /// caller's tensor itself.
    pub(crate) fn with<R>(&self, g: usize, f: impl FnOnce(&Tensor) -> R) -> Option<R> {
        let &(p, single) = self.group_args.get(g)?;
        let t = self.args.get(p)?.tensor()?;
        Some(if single { f(t) } else { f(&t.root_as_1d()) })
    }
}
