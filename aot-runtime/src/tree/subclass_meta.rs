//! [`SubclassCreationMeta`]: how to rebuild a tensor subclass value from
//! its inner tensors, as [`TensorTree::subclass_metas_into`](super::TensorTree::subclass_metas_into)
//! records it for the wrappers that unwrap and rewrap subclasses.

use crate::dtype::DType;
use crate::tensor::Tensor;
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
