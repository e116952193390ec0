//! The view primitives of `aot_ir`'s gradient rules (`view_grad`,
//! `view_of`, `view_scatter`), which move a gradient between a view region
//! and its root, evaluated on tensors. Shared by the eager engine and the
//! compiled executor. Both replay view chains with the dispatcher
//! ([`super::dispatch::replay`]), but with their own geometry and scalars
//! (the compiled one reads the call's), so the replay is a parameter.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use aot_ir::transform::grad_rules::{needs_geometry, Prim};
use aot_ir::transform::ChainStep;

/// Replays a view chain on a tensor.
pub(crate) type Replay<'r> = &'r dyn Fn(&Tensor, &[ChainStep]) -> Result<Tensor>;

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "view gradient", msg }
}

fn i64s(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// Evaluates a view primitive; `tensors[i]` is the tensor of argument `i`.
pub(crate) fn eval_view_prim(p: &Prim, tensors: &[Option<Tensor>], replay: Replay) -> Result<Tensor> {
    let tensor = |i: usize| -> Result<&Tensor> {
        tensors.get(i).and_then(Option::as_ref).ok_or_else(|| internal(format!("argument {i} of {} is not a tensor", p.name())))
    };
    match p {
        Prim::ViewGrad(chain) => {
            let (root, g) = (tensor(0)?, tensor(1)?);
            let zeros = || Tensor::zeros(&root.shape(), root.dtype(), &g.device());
            if let Some(t) = write_through_view(zeros, chain, replay, g)? {
                return Ok(t);
            }
            let m = mirror_view(root, chain, replay)?;
            let mut buf = vec![0f64; m.len];
            scatter_add(&mut buf, &m.view, g)?;
            gather_root(&buf, &m.root, &root.shape(), root.dtype(), &g.device())
        }
        Prim::ViewOf(chain) => {
            let (root, g) = (tensor(0)?, tensor(1)?);
            let m = mirror_view(root, chain, replay)?;
            if !m.by_storage {
                // `g` has `root`'s logical elements but its own strides, on
                // which a `view` made on `root` can fail (a value transposed
                // in place after the view, a transposed input transposed
                // back). A `view` that succeeded selects what `reshape`
                // selects, so the chain is replayed with `reshape`s.
                return replay(g, &logical_chain(chain))?.contiguous();
            }
            let mut buf = vec![0f64; m.len];
            scatter_add(&mut buf, &m.root, g)?;
            gather(&buf, &m.view, &m.view_shape, g.dtype(), &g.device())
        }
        Prim::ViewScatter(chain) => {
            let (root, g, src) = (tensor(0)?, tensor(1)?, tensor(2)?);
            let copy_of_g = || Tensor::zeros(&g.shape(), g.dtype(), &g.device())?.copy_(g);
            if let Some(t) = write_through_view(copy_of_g, chain, replay, src)? {
                return Ok(t);
            }
            let m = mirror_view(root, chain, replay)?;
            let mut buf = vec![0f64; m.len];
            scatter_add(&mut buf, &m.root, g)?;
            let src = src.expand(&i64s(&m.view_shape))?.to_dtype(DType::F64)?.to_vec::<f64>()?;
            for (&o, v) in m.view.iter().zip(src) {
                *buf.get_mut(o).ok_or_else(|| internal(format!("offset {o} outside the mirror")))? = v;
            }
            gather_root(&buf, &m.root, &g.shape(), g.dtype(), &g.device())
        }
        _ => Err(internal(format!("{} is not a view primitive", p.name()))),
    }
}

/// The fast road for chains of plain views (narrow, transpose, reshape of
/// a contiguous buffer, ...): `base()`, a fresh contiguous tensor of root's
/// shape, with `src` copied through `chain`'s view of it, as PyTorch's
/// `slice_backward` writes into zeros. `None` where the chain addresses
/// storage itself, or its replay on `base()` copies or overlaps (an
/// `expand`): the mirror then sums per element. Runs without grad, as the
/// mirror does, so both roads give the same detached result.
fn write_through_view(base: impl FnOnce() -> Result<Tensor>, chain: &[ChainStep], replay: Replay, src: &Tensor) -> Result<Option<Tensor>> {
    if needs_geometry(chain) {
        return Ok(None);
    }
    crate::tensor::no_grad(|| {
        let base = base()?;
        let view = replay(&base, &logical_chain(chain))?;
        if !view.shares_storage_with(&base) || !view.layout().is_non_overlapping() {
            return Ok(None);
        }
        // The mirror expands `src` to the view's shape; a shape it cannot
        // take goes there too, for the mirror's own error.
        let Ok(src) = src.expand(&i64s(&view.shape())) else { return Ok(None) };
        view.copy_(&src)?;
        Ok(Some(base))
    })
}

/// `chain` with each `view` replaced by `reshape`: the same elements,
/// whatever the strides of the tensor it is replayed on.
fn logical_chain(chain: &[ChainStep]) -> Vec<ChainStep> {
    chain
        .iter()
        .map(|step| match step {
            ChainStep::View { op: aot_ir::OpKind::View, args } => ChainStep::View { op: aot_ir::OpKind::Reshape, args: args.clone() },
            other => other.clone(),
        })
        .collect()
}

/// A buffer standing for `root`, with the positions of root's elements and
/// of `chain`'s view in it (both in row-major element order).
struct Mirror {
    /// The buffer is root's storage (not its elements in order).
    by_storage: bool,
    len: usize,
    root: Vec<usize>,
    view: Vec<usize>,
    view_shape: Vec<usize>,
}

/// Where `root` and `chain`'s view lie in a buffer.
///
/// The buffer mirrors root's storage when the chain addresses the storage
/// itself (`as_strided`); gradients are then summed per storage element.
/// Otherwise root is a metadata stand-in (`Prim::MetaOf`), whose elements
/// do not overlap (training calls that write an argument whose elements
/// overlap run eagerly, see `call_refusal`), and the buffer holds root's
/// elements in row-major order. The view's positions are found by
/// replaying the chain on those indices: a `view` that succeeded on root's
/// real strides may not be a view of a contiguous layout, so it is
/// replayed as `reshape`.
fn mirror_view(root: &Tensor, chain: &[ChainStep], replay: Replay) -> Result<Mirror> {
    if needs_geometry(chain) {
        let (layout, len) = (root.layout(), root.storage_len());
        let dummy = Tensor::zeros(&[len], DType::Bool, &root.device())?.alias_with_layout(layout.clone());
        let view = replay(&dummy, chain)?.layout();
        let root = layout.offsets().collect();
        return Ok(Mirror { by_storage: true, len, root, view: view.offsets().collect(), view_shape: view.shape().to_vec() });
    }
    let n = root.numel();
    let indices = Tensor::from_vec((0..n as i64).collect::<Vec<i64>>(), &root.shape(), &root.device())?;
    let view = replay(&indices, &logical_chain(chain))?;
    let positions = view.contiguous()?.to_vec::<i64>()?;
    Ok(Mirror {
        by_storage: false,
        len: n,
        root: (0..n).collect(),
        view: positions.into_iter().map(|i| i as usize).collect(),
        view_shape: view.shape().to_vec(),
    })
}

/// Adds `t`'s values at `positions` of `buf`.
fn scatter_add(buf: &mut [f64], positions: &[usize], t: &Tensor) -> Result<()> {
    for (&o, v) in positions.iter().zip(t.to_dtype(DType::F64)?.to_vec::<f64>()?) {
        *buf.get_mut(o).ok_or_else(|| internal(format!("offset {o} outside the mirror")))? += v;
    }
    Ok(())
}

/// The values at `positions` of `buf`, as a contiguous tensor of `shape`
/// on `device` (the mirror is host memory, whatever the operands' device).
fn gather(buf: &[f64], positions: &[usize], shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
    let vals = positions.iter().map(|&o| buf.get(o).copied().ok_or_else(|| internal(format!("offset {o} outside the mirror"))));
    let vals = vals.collect::<Result<Vec<f64>>>()?;
    Tensor::from_vec(vals, shape, device)?.to_dtype(dtype)
}

/// A gradient for root from a per-storage-element gradient `buf`: each
/// storage element's gradient goes to the first of root's elements at it,
/// and the others get zero, so that summing over the elements that share a
/// storage element (as the backward of `expand` does) counts it once.
fn gather_root(buf: &[f64], positions: &[usize], shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
    let mut taken = vec![false; buf.len()];
    let mut vals = Vec::with_capacity(positions.len());
    for &o in positions {
        let v = *buf.get(o).ok_or_else(|| internal(format!("offset {o} outside the mirror")))?;
        vals.push(if std::mem::replace(&mut taken[o], true) { 0.0 } else { v });
    }
    Tensor::from_vec(vals, shape, device)?.to_dtype(dtype)
}
