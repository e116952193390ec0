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
//! returned value). Its type, [`SubclassCreationMeta`], is the tree
//! layer's (`tree/subclass_meta.rs`: a `TensorTree` records it), re-exported
//! here.
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

use crate::error::{AotError, Result};
use crate::tensor::Tensor;
#[doc(hidden)]
pub use crate::tree::__subclass_meta;
pub use crate::tree::SubclassCreationMeta;
use crate::tree::TensorTree;

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
