//! Composite tensor arguments: structs of tensors that a `#[aot_fn]`
//! function takes as one parameter (PyTorch's pytrees of parameters and
//! buffers, as in `create_functional_call`).
//!
//! A [`TensorTree`] lists its tensors as [`Leaf`]s: each with its field path
//! (`l1.w`, `layers.0`), whether it is a parameter or a buffer, and the
//! tensor handle itself (the caller's tensor, not a copy, so an in-place
//! update of a `&mut` struct's field writes the caller's tensor).
//! A function may also return a struct of tensors that its body builds
//! with a struct literal (`-> Mlp`, ending in `Mlp { w1: .., b1: .. }`):
//! the literal's tensors are the graph's outputs, and the generated
//! function builds the struct from them (so it needs no `TensorTree`).
//!
//! `#[derive(TensorTree)]` writes the impl for a struct with named fields:
//!
//! - a `Tensor` field is a parameter, a `#[buffer]` field a buffer (on a
//!   nested struct or a `Vec`, `#[buffer]` makes every tensor in it one);
//! - a field of a type that derives `TensorTree` nests (`outer.inner.w`);
//! - a `Vec<T>` of tensors or trees numbers its elements (`layers.0`);
//! - every other field must be marked `#[skip]`: the derive does not guess,
//!   so an unmarked `f64` field is a compile error at its type ("the trait
//!   `TensorTree` is not implemented for `f64`"). A skipped field is not a
//!   leaf, and [`TensorTree::rebuild`] clones it from the template.
//!
//! `#[tensor_subclass]` on the struct makes it a tensor subclass: one
//! tensor made of its inner (`Tensor`) fields and non-tensor attributes
//! (its `#[skip]` fields, which must implement `Debug`). It flattens as
//! any struct, and [`TensorTree::subclass_metas_into`] records how to
//! rebuild it (PyTorch's [`SubclassCreationMeta`], `subclass_meta.rs`);
//! see `aot_runtime::subclass` for what `#[aot_fn]` does with it.
//!
//! ```
//! use aot_runtime::prelude::*;
//! use aot_runtime::tree::LeafKind;
//!
//! #[derive(TensorTree)]
//! struct Norm {
//!     weight: Tensor,
//!     #[buffer]
//!     running_mean: Tensor,
//!     #[skip]
//!     eps: f64,
//! }
//!
//! #[derive(TensorTree)]
//! struct Net {
//!     layers: Vec<Tensor>,
//!     norm: Norm,
//! }
//!
//! let t = |v: f64| Tensor::full(&[2], v, DType::F32, &Device::Cpu);
//! let net = Net { layers: vec![t(1.0)?, t(2.0)?], norm: Norm { weight: t(3.0)?, running_mean: t(4.0)?, eps: 1e-5 } };
//! let leaves = net.flatten();
//! let paths: Vec<&str> = leaves.iter().map(|l| l.path.as_str()).collect();
//! assert_eq!(paths, ["layers.0", "layers.1", "norm.weight", "norm.running_mean"]);
//! assert_eq!(leaves[3].kind, LeafKind::Buffer);
//! assert!(leaves[0].tensor.same_tensor(&net.layers[0]));
//!
//! // The same structure over other tensors (PyTorch's `tree_unflatten`).
//! let doubled: Vec<Tensor> = leaves.iter().map(|l| l.tensor.mul(2.0)).collect::<Result<_>>()?;
//! let net2 = net.rebuild_from(doubled)?;
//! assert_eq!(net2.norm.running_mean.to_vec::<f32>()?, [8.0, 8.0]);
//! assert_eq!(net2.norm.eps, 1e-5);
//! # Ok::<(), AotError>(())
//! ```

mod subclass_meta;

use crate::error::{AotError, Result};
use crate::tensor::Tensor;

pub use aot_macros::TensorTree;
#[doc(hidden)]
pub use subclass_meta::__subclass_meta;
pub use subclass_meta::SubclassCreationMeta;

/// Whether a leaf is a parameter (trained) or a buffer (state such as
/// running statistics), as PyTorch's `named_parameters` and
/// `named_buffers` tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeafKind {
    /// A trained parameter.
    Parameter,
    /// A `#[buffer]` field.
    Buffer,
}

/// One tensor of a [`TensorTree`].
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The field path from the root, `.`-separated (`l1.w`, `layers.0`).
    pub path: String,
    /// Parameter or buffer.
    pub kind: LeafKind,
    /// The tree's own tensor handle (the same tensor, not a copy).
    pub tensor: Tensor,
}

/// A value made of tensors, flattened into leaves in declaration order and
/// rebuilt from them. Usually derived: see the [module docs](self).
pub trait TensorTree {
    /// Appends the leaves under `prefix` (the path of this value, `""` at
    /// the root); `buffer` marks every leaf a buffer (`#[buffer]` on an
    /// enclosing field).
    fn flatten_into(&self, prefix: &str, buffer: bool, out: &mut Vec<Leaf>);

    /// A value of the same structure as `self` with the tensors taken, in
    /// [`flatten`](Self::flatten) order, from `leaves`; non-tensor fields
    /// are cloned from `self`.
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self>
    where
        Self: Sized;

    /// Appends the [`SubclassCreationMeta`] of every tensor subclass in
    /// this value (at `prefix`), its inner tensors numbered from `*start`
    /// among the leaves; advances `*start` past this value's leaves. The
    /// default is for a value that holds no subclass.
    fn subclass_metas_into(&self, prefix: &str, start: &mut usize, out: &mut Vec<SubclassCreationMeta>) {
        let _ = (prefix, out);
        *start += self.flatten().len();
    }

    /// The leaves in declaration order.
    fn flatten(&self) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.flatten_into("", false, &mut out);
        out
    }

    /// [`rebuild`](Self::rebuild) from exactly as many tensors as `self`
    /// has leaves.
    fn rebuild_from(&self, leaves: Vec<Tensor>) -> Result<Self>
    where
        Self: Sized,
    {
        let (want, got) = (self.flatten().len(), leaves.len());
        if want != got {
            return Err(AotError::Unsupported { op: "TensorTree::rebuild", msg: format!("expected {want} tensors, got {got}") });
        }
        self.rebuild(&mut leaves.into_iter())
    }
}

/// `prefix.name`, or `name` at the root: the path of a field.
#[doc(hidden)]
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The next tensor of a rebuild, or the error that the leaves ran out.
#[doc(hidden)]
pub fn next_leaf(leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Tensor> {
    leaves.next().ok_or_else(|| AotError::Unsupported { op: "TensorTree::rebuild", msg: "too few tensors for the structure".into() })
}

impl TensorTree for Tensor {
    fn flatten_into(&self, prefix: &str, buffer: bool, out: &mut Vec<Leaf>) {
        let kind = if buffer { LeafKind::Buffer } else { LeafKind::Parameter };
        out.push(Leaf { path: prefix.to_string(), kind, tensor: self.clone() });
    }

    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        next_leaf(leaves)
    }

    fn subclass_metas_into(&self, _: &str, start: &mut usize, _: &mut Vec<SubclassCreationMeta>) {
        *start += 1;
    }
}

impl<T: TensorTree> TensorTree for Vec<T> {
    fn flatten_into(&self, prefix: &str, buffer: bool, out: &mut Vec<Leaf>) {
        for (i, item) in self.iter().enumerate() {
            item.flatten_into(&join(prefix, &i.to_string()), buffer, out);
        }
    }

    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        self.iter().map(|item| item.rebuild(leaves)).collect()
    }

    fn subclass_metas_into(&self, prefix: &str, start: &mut usize, out: &mut Vec<SubclassCreationMeta>) {
        for (i, item) in self.iter().enumerate() {
            item.subclass_metas_into(&join(prefix, &i.to_string()), start, out);
        }
    }
}

impl<T: TensorTree> TensorTree for Box<T> {
    fn flatten_into(&self, prefix: &str, buffer: bool, out: &mut Vec<Leaf>) {
        (**self).flatten_into(prefix, buffer, out);
    }

    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        (**self).rebuild(leaves).map(Box::new)
    }

    fn subclass_metas_into(&self, prefix: &str, start: &mut usize, out: &mut Vec<SubclassCreationMeta>) {
        (**self).subclass_metas_into(prefix, start, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Device};

    #[test]
    fn vec_paths_and_rebuild_count() {
        let t = |v: f64| Tensor::full(&[1], v, DType::F32, &Device::Cpu).unwrap();
        let v = vec![vec![t(1.0)], vec![t(2.0), t(3.0)]];
        let leaves = v.flatten();
        let paths: Vec<_> = leaves.iter().map(|l| l.path.clone()).collect();
        assert_eq!(paths, ["0.0", "1.0", "1.1"]);
        assert!(leaves.iter().all(|l| l.kind == LeafKind::Parameter));
        let mut buf = Vec::new();
        v.flatten_into("b", true, &mut buf);
        assert_eq!(buf[2].path, "b.1.1");
        assert!(buf.iter().all(|l| l.kind == LeafKind::Buffer));
        assert!(v.rebuild_from(vec![t(0.0)]).is_err());
        let r = v.rebuild_from(vec![t(4.0), t(5.0), t(6.0)]).unwrap();
        assert_eq!(r[1][1].to_vec::<f32>().unwrap(), [6.0]);
    }
}
