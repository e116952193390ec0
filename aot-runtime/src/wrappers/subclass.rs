//! Tensor subclasses (PyTorch's `subclass_utils` and
//! `AOTDispatchSubclassWrapper`): a composite type that stands for one
//! tensor, built from inner tensors and non-tensor attributes.
//!
//! A struct declares itself a subclass with `#[tensor_subclass]` next to
//! `#[derive(TensorTree)]`. Its tensor fields are its inner tensors (each a
//! plain `Tensor`; subclasses do not nest), its `#[skip]` fields its
//! non-tensor attributes (PyTorch's flatten context; they must implement
//! `Debug`, which [`SubclassCreationMeta::meta`] records). What the wrapper
//! does for a `#[aot_fn]` function:
//!
//! - **Unwrap at the call.** A subclass argument is flattened into its inner
//!   tensors like any struct argument (`compiled/boundary.rs`), so the
//!   compiled graph sees only plain tensors, named by their field paths
//!   (`w.q`, `w.scale`) in `graph()`, `graph_signature()` and errors.
//!   Gradients reach the inner tensors that require grad: they are the
//!   caller's own tensors.
//! - **Rewrap the outputs.** A function returning the subclass type builds it
//!   with a struct literal whose tensor fields are graph outputs; the
//!   literal's non-tensor attributes (`bits: 8`) are constants recorded
//!   when the body is traced, as PyTorch records the traced output's
//!   flatten context, and every call rebuilds the value with them.
//! - **Refusals.** As in PyTorch, the metadata of a subclass input's inner
//!   tensor (its shape or strides: `w.q.t_()`, `w.scale.unsqueeze_(0)`)
//!   may not be changed in place. The macro makes it a compile error on the
//!   receiver's tokens ([`NotTensorSubclass`] is implemented for every
//!   `TensorTree` type that is not a subclass); a call that reaches it
//!   anyway (a subclass passed for a plain struct through
//!   [`Arg::tree`](crate::Arg::tree)) is an error before anything runs.
//!
//! [`create_subclass_meta`] gives the creation metadata of a value (PyTorch's
//! `subclass_inp_meta` for an argument, `subclass_fw_graph_out_meta` for a
//! returned value).
//!
//! ```
//! use aot_runtime::prelude::*;
//! use aot_runtime::subclass::create_subclass_meta;
//!
//! #[derive(TensorTree)]
//! #[tensor_subclass(size = q, dtype = scale)]
//! struct Int8Weight {
//!     q: Tensor,
//!     scale: Tensor,
//!     #[skip]
//!     bits: u8,
//! }
//!
//! let w = Int8Weight {
//!     q: Tensor::ones(&[2, 3], DType::I64, &Device::Cpu)?,
//!     scale: Tensor::ones(&[2], DType::F32, &Device::Cpu)?,
//!     bits: 8,
//! };
//! let metas = create_subclass_meta(&w);
//! assert_eq!(metas[0].inner, ["q", "scale"]);
//! assert_eq!(metas[0].meta, [("bits".to_string(), "8".to_string())]);
//! assert_eq!(metas[0].outer_size, Some(vec![2, 3]));
//! assert_eq!(metas[0].outer_stride, Some(vec![3, 1]));
//! assert_eq!(metas[0].outer_dtype, Some(DType::F32));
//! # Ok::<(), AotError>(())
//! ```

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use crate::tree::TensorTree;
use serde::Serialize;

/// How to rebuild one subclass value from a flat list of tensors (PyTorch's
/// `SubclassCreationMeta`): which tensors are its inner ones, in what
/// order, and the attributes that are not tensors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubclassCreationMeta {
    /// The Rust type's name (`Int8Weight`).
    pub type_name: String,
    /// The value's field path inside its argument (`""` for the argument
    /// itself, `qw` for a field).
    pub path: String,
    /// Where its inner tensors start in the flattened leaves of the
    /// argument.
    pub flat_tensor_start_idx: usize,
    /// How many inner tensors it has.
    pub arg_count: usize,
    /// The inner tensors' field names, in flatten order (PyTorch's
    /// `__tensor_flatten__` keys).
    pub inner: Vec<String>,
    /// The non-tensor attributes (`#[skip]` fields), as `Debug` shows them.
    pub meta: Vec<(String, String)>,
    /// The outer tensor's size: the shape of the inner tensor named by
    /// `#[tensor_subclass(size = ..)]`, if the type declares one.
    pub outer_size: Option<Vec<usize>>,
    /// The outer tensor's strides: those of the same inner tensor.
    pub outer_stride: Option<Vec<usize>>,
    /// The outer tensor's dtype: that of the inner tensor named by
    /// `#[tensor_subclass(dtype = ..)]`, if the type declares one.
    pub outer_dtype: Option<DType>,
}

/// Implemented by `#[derive(TensorTree)]` for every type that is not a
/// tensor subclass: the generated code of a function that changes a
/// field's metadata in place requires it of each struct on the field's
/// path, so that doing it to a subclass's inner tensor is a compile error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a tensor subclass: the metadata of its inner tensors cannot be changed in place",
    label = "metadata mutation of an inner tensor of a tensor subclass",
    note = "as in PyTorch's AOTAutograd, a subclass input's metadata (shape, strides) is fixed; use the out-of-place op (`t()`, `unsqueeze(d)`, ...) instead"
)]
pub trait NotTensorSubclass {}

impl NotTensorSubclass for Tensor {}
impl<T: NotTensorSubclass> NotTensorSubclass for Vec<T> {}
impl<T: NotTensorSubclass + ?Sized> NotTensorSubclass for Box<T> {}
impl<T: NotTensorSubclass + ?Sized> NotTensorSubclass for &T {}
impl<T: NotTensorSubclass + ?Sized> NotTensorSubclass for &mut T {}

/// What the generated code calls on each struct on the path of a field
/// whose metadata the body changes in place.
#[doc(hidden)]
pub fn __no_metadata_mutation<T: NotTensorSubclass + ?Sized>(_: &T) {}

/// The creation metadata of every tensor subclass inside `value`, in
/// flatten order (PyTorch's `create_subclass_meta`); empty when it holds
/// none.
pub fn create_subclass_meta(value: &dyn TensorTree) -> Vec<SubclassCreationMeta> {
    let mut out = Vec::new();
    value.subclass_metas_into("", &mut 0, &mut out);
    out
}

/// The leaves of `value` with, for each, the path of the subclass it is an
/// inner tensor of (PyTorch's `unwrap_tensor_subclasses` for one argument:
/// the plain tensors the compiled graph takes).
pub fn unwrap_tensor_subclasses(value: &dyn TensorTree) -> Vec<(crate::tree::Leaf, Option<String>)> {
    let leaves = value.flatten();
    let metas = create_subclass_meta(value);
    leaves
        .into_iter()
        .enumerate()
        .map(|(k, l)| {
            let owner = metas.iter().find(|m| (m.flat_tensor_start_idx..m.flat_tensor_start_idx + m.arg_count).contains(&k));
            (l, owner.map(|m| m.path.clone()))
        })
        .collect()
}

/// Refuses a call whose body changes the metadata of the field `path` of
/// the struct argument `arg` (`value`) in place when that field is an inner
/// tensor of a subclass: the run-time half of the macro's compile-time
/// check, for a value whose type the macro did not see.
pub(crate) fn refuse_metadata_mutation(func: &str, arg: &str, path: &str, value: &dyn TensorTree) -> Result<()> {
    let Some(k) = value.flatten().iter().position(|l| l.path == path) else { return Ok(()) };
    let metas = create_subclass_meta(value);
    let Some(owner) = metas.iter().find(|m| (m.flat_tensor_start_idx..m.flat_tensor_start_idx + m.arg_count).contains(&k)) else {
        return Ok(());
    };
    let name = crate::tree::join(arg, path);
    Err(AotError::InFunction {
        func: func.to_string(),
        arg: Some(name.clone()),
        source: Box::new(AotError::Unsupported {
            op: "metadata mutation",
            msg: format!(
                "`{name}` is an inner tensor of `{}`, a tensor subclass (`{}`), and the body changes its metadata in place; as in PyTorch's AOTAutograd, a subclass input's metadata cannot be mutated",
                crate::tree::join(arg, &owner.path),
                owner.type_name
            ),
        }),
    })
}

/// For the derive: the creation metadata of a subclass value at `prefix`,
/// whose inner tensors start at `*start`.
#[doc(hidden)]
pub fn __subclass_meta(
    type_name: &str,
    prefix: &str,
    start: &mut usize,
    inner: &[&str],
    meta: Vec<(String, String)>,
    outer: (Option<&Tensor>, Option<&Tensor>),
) -> SubclassCreationMeta {
    let m = SubclassCreationMeta {
        type_name: type_name.to_string(),
        path: prefix.to_string(),
        flat_tensor_start_idx: *start,
        arg_count: inner.len(),
        inner: inner.iter().map(|s| s.to_string()).collect(),
        meta,
        outer_size: outer.0.map(|t| t.shape().to_vec()),
        outer_stride: outer.0.map(|t| t.stride().to_vec()),
        outer_dtype: outer.1.map(Tensor::dtype),
    };
    *start += inner.len();
    m
}
