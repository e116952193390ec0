//! Layout: shape, strides (in elements) and storage offset, and the pure
//! geometry of every view op. Nothing here touches data. `iter` holds the
//! layouts PyTorch gives computed tensors, `index` the row-major walk over
//! a layout's storage indices, `overlap` whether elements share storage,
//! `checked` the element limit and the checked arithmetic below.
//!
//! Geometry is checked where it is made from user numbers: every shape a
//! constructor, view op or broadcast produces passes [`checked_numel`]
//! (at most [`MAX_NUMEL`] elements, so a tensor's byte size in any dtype
//! fits in `isize`), and offsets and strides are computed with checked
//! arithmetic, so overflow is an [`AotError::Overflow`] naming the op.
//! A layout reached through a tensor therefore has a storage extent that
//! fits, and code that walks it needs no checks of its own. The queries
//! ([`Layout::numel`], [`Layout::storage_extent`]) saturate instead of
//! wrapping, so even a hand-made `Layout::new` never makes them panic.

mod checked;
mod dims;
mod index;
mod iter;
mod overlap;

use checked::mul_add;
pub use checked::{check_layout, checked_numel, MAX_NUMEL};
pub use dims::{Dims, IntoIter as DimsIntoIter, INLINE_DIMS};
pub use index::StridedIndex;
pub use iter::{elementwise_layout, is_dense_output, preserve_layout};
pub use overlap::Overlap;

use crate::error::{AotError, Result};

/// Shape, strides in elements and storage offset of a tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub(crate) shape: Dims,
    pub(crate) stride: Dims,
    pub(crate) offset: usize,
}

/// Normalise a possibly negative dim against a rank (PyTorch's `maybe_wrap_dim`).
/// A scalar (rank 0) accepts -1 and 0, as in PyTorch.
pub fn wrap_dim(op: &'static str, dim: i64, rank: usize) -> Result<usize> {
    let r = rank.max(1) as i64;
    if dim < -r || dim >= r {
        return Err(AotError::DimOutOfRange { op, dim, min: -r, max: r - 1 });
    }
    Ok(if dim < 0 { (dim + r) as usize } else { dim as usize })
}

/// Contiguous (row-major) strides of a shape. Exact for every shape that
/// passes [`checked_numel`]; larger products saturate rather than wrap.
pub fn contiguous_strides(shape: &[usize]) -> Dims {
    let mut stride = Dims::zeros(shape.len());
    let mut acc = 1usize;
    for i in (0..shape.len()).rev() {
        stride[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    stride
}

/// `torch.broadcast_shapes`.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Dims> {
    let n = a.len().max(b.len());
    let mut out = Dims::zeros(n);
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(AotError::shape(
                op,
                format!(
                    "the size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i} (shapes {a:?} and {b:?})"
                ),
            ));
        };
    }
    checked_numel(op, &out)?;
    Ok(out)
}

impl Layout {
    /// A contiguous layout of `shape` at offset 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout { shape: Dims::from_slice(shape), stride: contiguous_strides(shape), offset: 0 }
    }
    /// A layout of these sizes, strides and offset (a `Vec`, a slice or
    /// [`Dims`] each).
    pub fn new(shape: impl Into<Dims>, stride: impl Into<Dims>, offset: usize) -> Layout {
        Layout { shape: shape.into(), stride: stride.into(), offset }
    }
    /// The size of each dim.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The stride of each dim, in elements.
    #[inline]
    pub fn stride(&self) -> &[usize] {
        &self.stride
    }
    /// The position of the first element in the storage, in elements.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// The number of dims.
    #[inline]
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The number of elements; saturates at `usize::MAX` for a shape no
    /// checked constructor lets through (a zero size still gives 0).
    #[inline]
    pub fn numel(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &n| a.saturating_mul(n))
    }

    /// PyTorch's `is_contiguous`: strides of size-1 dims don't matter.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        match (self.shape.as_slice(), self.stride.as_slice()) {
            // The commonest case, asked several times by every small op.
            ([n], [s]) => *n <= 1 || *s == 1,
            (shape, stride) => Self::contiguous_dims(shape, stride),
        }
    }

    fn contiguous_dims(shape: &[usize], stride: &[usize]) -> bool {
        let mut expected = 1usize;
        for (&n, &s) in shape.iter().zip(stride).rev() {
            if n == 0 {
                return true;
            }
            if n != 1 {
                if s != expected {
                    // Still contiguous if an outer dim is empty.
                    return shape.contains(&0);
                }
                expected = expected.saturating_mul(n);
            }
        }
        true
    }

    /// One past the largest storage index this layout touches (its offset
    /// if empty), or None if that does not fit in usize.
    pub fn checked_storage_extent(&self) -> Option<usize> {
        if self.numel() == 0 {
            return Some(self.offset);
        }
        let mut last = self.offset;
        for (&n, &s) in self.shape.as_slice().iter().zip(self.stride.as_slice()) {
            last = last.checked_add((n - 1).checked_mul(s)?)?;
        }
        last.checked_add(1)
    }

    /// [`Self::checked_storage_extent`], saturating at `usize::MAX` (which no
    /// storage reaches, so bounds checks against it fail as they should).
    pub fn storage_extent(&self) -> usize {
        self.checked_storage_extent().unwrap_or(usize::MAX)
    }

    /// Storage index of each element, in row-major logical order.
    pub fn offsets(&self) -> StridedIndex<'_> {
        StridedIndex::new(self)
    }

    // ---- view geometry --------------------------------------------------

    /// Resolve a shape that may hold one -1 against `numel`.
    pub fn infer_shape(op: &'static str, shape: &[i64], numel: usize) -> Result<Dims> {
        let mut infer = None;
        let mut known = 1usize;
        for (i, &d) in shape.iter().enumerate() {
            if d == -1 {
                if infer.is_some() {
                    return Err(AotError::shape(op, "only one dimension can be inferred"));
                }
                infer = Some(i);
            } else if d < 0 {
                return Err(AotError::shape(op, format!("invalid shape dimension {d}")));
            } else {
                known = known
                    .checked_mul(d as usize)
                    .ok_or_else(|| AotError::overflow(op, format!("the sizes of shape {shape:?} multiply past usize")))?;
            }
        }
        let mut out: Dims = shape.iter().map(|&d| d.max(0) as usize).collect();
        match infer {
            Some(i) => {
                if known == 0 || !numel.is_multiple_of(known) {
                    return Err(AotError::shape(op, format!("shape '{shape:?}' is invalid for input of size {numel}")));
                }
                out[i] = numel / known;
            }
            None => {
                if known != numel {
                    return Err(AotError::shape(op, format!("shape '{shape:?}' is invalid for input of size {numel}")));
                }
            }
        }
        // Equal element counts, but zero sizes can hide huge other dims.
        checked_numel(op, &out)?;
        Ok(out)
    }

    /// Strides for viewing this layout as `new_shape` without a copy, or None
    /// if impossible (PyTorch's `computeStride`).
    pub fn view_strides(&self, new_shape: &[usize]) -> Option<Dims> {
        let old_shape = &self.shape;
        let old_stride = &self.stride;
        let numel = self.numel();
        if old_shape.is_empty() {
            return Some(new_shape.iter().map(|_| 1).collect());
        }
        if numel == 0 {
            if old_shape == new_shape {
                return Some(old_stride.clone());
            }
            return Some(contiguous_strides(new_shape));
        }
        let mut new_stride = Dims::zeros(new_shape.len());
        let mut view_d = new_shape.len() as i64 - 1;
        let mut chunk_base_stride = *old_stride.last().unwrap_or(&1);
        let mut tensor_numel = 1usize;
        let mut view_numel = 1usize;
        for tensor_d in (0..old_shape.len()).rev() {
            // Products are bounded by numel and the validated extent; they
            // are checked only so that a hand-made layout cannot panic here.
            tensor_numel = tensor_numel.checked_mul(old_shape[tensor_d])?;
            if tensor_d == 0
                || (old_shape[tensor_d - 1] != 1 && Some(old_stride[tensor_d - 1]) != tensor_numel.checked_mul(chunk_base_stride))
            {
                while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                    new_stride[view_d as usize] = view_numel.checked_mul(chunk_base_stride)?;
                    view_numel = view_numel.checked_mul(new_shape[view_d as usize])?;
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = old_stride[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(new_stride)
    }

    /// `view(shape)`: the same elements in `shape` (one entry may be -1,
    /// inferred), sharing the storage; an error where the strides cannot express
    /// it (PyTorch's message: use `reshape`).
    pub fn view(&self, op: &'static str, shape: &[i64]) -> Result<Layout> {
        let new_shape = Layout::infer_shape(op, shape, self.numel())?;
        match self.view_strides(&new_shape) {
            Some(stride) => Ok(Layout { shape: new_shape, stride, offset: self.offset }),
            None => Err(AotError::shape(
                op,
                format!(
                    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead. (shape {:?}, stride {:?}, requested {:?})",
                    self.shape, self.stride, shape
                ),
            )),
        }
    }

    /// `transpose(d0, d1)`: dims `d0` and `d1` swapped (negative dims count
    /// from the end).
    pub fn transpose(&self, op: &'static str, d0: i64, d1: i64) -> Result<Layout> {
        let r = self.rank();
        let (a, b) = (wrap_dim(op, d0, r)?, wrap_dim(op, d1, r)?);
        let mut l = self.clone();
        if r > 0 {
            l.shape.swap(a, b);
            l.stride.swap(a, b);
        }
        Ok(l)
    }

    /// `t()`: transpose of a tensor with at most 2 dims.
    pub fn t(&self, op: &'static str) -> Result<Layout> {
        match self.rank() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose(op, 0, 1),
            n => Err(AotError::shape(op, format!("t() expects a tensor with <= 2 dimensions, but self is {n}D"))),
        }
    }

    /// `permute(dims)`: the dims reordered, dim `i` of the result being dim
    /// `dims[i]` of this one.
    pub fn permute(&self, op: &'static str, dims: &[i64]) -> Result<Layout> {
        let r = self.rank();
        if dims.len() != r {
            return Err(AotError::shape(
                op,
                format!("number of dims don't match in permute: input has {r} dims, permutation has {}", dims.len()),
            ));
        }
        let mut seen = vec![false; r];
        let mut l = Layout { shape: Dims::new(), stride: Dims::new(), offset: self.offset };
        for &d in dims {
            let d = wrap_dim(op, d, r)?;
            if seen[d] {
                return Err(AotError::shape(op, "repeated dim in permute"));
            }
            seen[d] = true;
            l.shape.push(self.shape[d]);
            l.stride.push(self.stride[d]);
        }
        Ok(l)
    }

    /// `unsqueeze(dim)`: a size-1 dim inserted at `dim`.
    pub fn unsqueeze(&self, op: &'static str, dim: i64) -> Result<Layout> {
        let d = wrap_dim(op, dim, self.rank() + 1)?;
        let mut l = self.clone();
        let st = if d < self.rank() { mul_add(op, self.shape[d], self.stride[d], 0)? } else { 1 };
        l.shape.insert(d, 1);
        l.stride.insert(d, st);
        Ok(l)
    }

    /// `squeeze(d)`: removes dim d if it has size 1, else returns the same geometry.
    pub fn squeeze(&self, op: &'static str, dim: i64) -> Result<Layout> {
        if self.rank() == 0 {
            wrap_dim(op, dim, 0)?;
            return Ok(self.clone());
        }
        let d = wrap_dim(op, dim, self.rank())?;
        let mut l = self.clone();
        if self.shape[d] == 1 {
            l.shape.remove(d);
            l.stride.remove(d);
        }
        Ok(l)
    }

    /// `squeeze()` with no dim: removes every size-1 dim.
    pub fn squeeze_all(&self) -> Layout {
        let mut l = Layout { shape: Dims::new(), stride: Dims::new(), offset: self.offset };
        for (&n, &s) in self.shape.iter().zip(&self.stride) {
            if n != 1 {
                l.shape.push(n);
                l.stride.push(s);
            }
        }
        l
    }

    /// `expand(shape)`: size-1 dims broadcast to `shape` with stride 0 (-1
    /// keeps a dim's size; new leading dims may be added).
    pub fn expand(&self, op: &'static str, shape: &[i64]) -> Result<Layout> {
        let r = self.rank();
        if shape.len() < r {
            return Err(AotError::shape(
                op,
                format!(
                    "the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({r})",
                    shape.len()
                ),
            ));
        }
        let lead = shape.len() - r;
        let mut l = Layout { shape: Dims::zeros(shape.len()), stride: Dims::zeros(shape.len()), offset: self.offset };
        for (i, &want) in shape.iter().enumerate() {
            if i < lead {
                if want < 0 {
                    return Err(AotError::shape(
                        op,
                        format!("the expanded size {want} is not allowed in a leading, non-existing dimension"),
                    ));
                }
                l.shape[i] = want as usize;
                l.stride[i] = 0;
            } else {
                let (have, st) = (self.shape[i - lead], self.stride[i - lead]);
                if want == -1 || want as usize == have {
                    l.shape[i] = have;
                    l.stride[i] = st;
                } else if have == 1 && want >= 0 {
                    l.shape[i] = want as usize;
                    l.stride[i] = 0;
                } else {
                    return Err(AotError::shape(
                        op,
                        format!(
                            "the expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton dimension {i}. Target sizes: {shape:?}. Tensor sizes: {:?}",
                            self.shape
                        ),
                    ));
                }
            }
        }
        checked_numel(op, &l.shape)?;
        Ok(l)
    }

    /// `select(dim, index)`: the slice at `index` along `dim`, with `dim`
    /// removed.
    pub fn select(&self, op: &'static str, dim: i64, index: i64) -> Result<Layout> {
        if self.rank() == 0 {
            return Err(AotError::shape(op, "select() cannot be applied to a 0-dim tensor."));
        }
        let d = wrap_dim(op, dim, self.rank())?;
        let n = self.shape[d] as i64;
        if index < -n || index >= n {
            return Err(AotError::IndexOutOfRange { op, index, dim: d, size: n as usize });
        }
        let i = if index < 0 { index + n } else { index } as usize;
        let mut l = self.clone();
        l.offset = mul_add(op, i, self.stride[d], self.offset)?;
        l.shape.remove(d);
        l.stride.remove(d);
        Ok(l)
    }

    /// `slice(dim, start, end, step)` with PyTorch's clamping of start/end.
    pub fn slice(&self, op: &'static str, dim: i64, start: i64, end: i64, step: i64) -> Result<Layout> {
        if self.rank() == 0 {
            return Err(AotError::shape(op, "slice() cannot be applied to a 0-dim tensor."));
        }
        if step <= 0 {
            return Err(AotError::shape(op, "slice step must be positive"));
        }
        let d = wrap_dim(op, dim, self.rank())?;
        let n = self.shape[d] as i64;
        let clamp = |v: i64| -> i64 {
            let v = if v < 0 { v + n } else { v };
            v.clamp(0, n)
        };
        let s = clamp(start);
        let e = clamp(end).max(s);
        // ceil((e - s) / step) without forming e - s + step, which can overflow.
        let len = if e == s { 0 } else { (e - s - 1) / step + 1 };
        let mut l = self.clone();
        l.offset = mul_add(op, s as usize, self.stride[d], self.offset)?;
        l.shape[d] = len as usize;
        l.stride[d] = mul_add(op, self.stride[d], step as usize, 0)?;
        Ok(l)
    }

    /// `narrow(dim, start, length)`: `length` elements of `dim` from
    /// `start`.
    pub fn narrow(&self, op: &'static str, dim: i64, start: i64, length: i64) -> Result<Layout> {
        if self.rank() == 0 {
            return Err(AotError::shape(op, "narrow() cannot be applied to a 0-dim tensor."));
        }
        let d = wrap_dim(op, dim, self.rank())?;
        let n = self.shape[d] as i64;
        let s = if start < 0 { start + n } else { start };
        if s < 0 || s > n {
            return Err(AotError::IndexOutOfRange { op, index: start, dim: d, size: n as usize });
        }
        if length < 0 || length > n - s {
            return Err(AotError::shape(op, format!("start ({s}) + length ({length}) exceeds dimension size ({n}).")));
        }
        self.slice(op, d as i64, s, s + length, 1)
    }

    /// `diagonal(offset, dim1, dim2)`; the diagonal becomes the last dim.
    pub fn diagonal(&self, op: &'static str, offset: i64, dim1: i64, dim2: i64) -> Result<Layout> {
        let r = self.rank();
        if r < 2 {
            return Err(AotError::shape(op, format!("diagonal() expects a tensor with at least 2 dimensions, got {r}")));
        }
        let (d1, d2) = (wrap_dim(op, dim1, r)?, wrap_dim(op, dim2, r)?);
        if d1 == d2 {
            return Err(AotError::shape(op, format!("diagonal dimensions cannot be identical {dim1}, {dim2}")));
        }
        let (n1, n2) = (self.shape[d1] as i64, self.shape[d2] as i64);
        // Saturating: an offset beyond either size gives an empty diagonal.
        let (len, off) = if offset >= 0 {
            let len = n1.min(n2.saturating_sub(offset)).max(0);
            (len, if len > 0 { mul_add(op, offset as usize, self.stride[d2], 0)? } else { 0 })
        } else {
            let len = n1.saturating_add(offset).min(n2).max(0);
            (len, if len > 0 { mul_add(op, offset.unsigned_abs() as usize, self.stride[d1], 0)? } else { 0 })
        };
        let mut l = Layout {
            shape: Dims::new(),
            stride: Dims::new(),
            offset: self
                .offset
                .checked_add(off)
                .ok_or_else(|| AotError::overflow(op, format!("storage offset {} + {off} does not fit in usize", self.offset)))?,
        };
        for i in 0..r {
            if i != d1 && i != d2 {
                l.shape.push(self.shape[i]);
                l.stride.push(self.stride[i]);
            }
        }
        l.shape.push(len as usize);
        l.stride.push(self.stride[d1].checked_add(self.stride[d2]).ok_or_else(|| {
            AotError::overflow(op, format!("diagonal stride {} + {} does not fit in usize", self.stride[d1], self.stride[d2]))
        })?);
        Ok(l)
    }

    /// `as_strided(size, stride, offset)`: absolute geometry on the storage,
    /// checked against the storage's length.
    pub fn as_strided(op: &'static str, size: &[usize], stride: &[usize], offset: usize, storage_len: usize) -> Result<Layout> {
        if size.len() != stride.len() {
            return Err(AotError::shape(op, format!("mismatch in length of strides and shape ({} vs {})", stride.len(), size.len())));
        }
        checked_numel(op, size)?;
        let l = Layout { shape: Dims::from_slice(size), stride: Dims::from_slice(stride), offset };
        // An empty tensor needs no storage, wherever its offset points (as in PyTorch).
        if l.numel() == 0 {
            return Ok(l);
        }
        let Some(extent) = l.checked_storage_extent() else {
            return Err(AotError::overflow(
                op,
                format!("sizes {size:?}, strides {stride:?} and storage offset {offset} reach past usize::MAX"),
            ));
        };
        if extent > storage_len {
            return Err(AotError::shape(
                op,
                format!(
                    "setStorage: sizes {size:?}, strides {stride:?}, storage offset {offset} requiring a storage size of {extent} are out of bounds for storage of size {storage_len}"
                ),
            ));
        }
        Ok(l)
    }
}

/// `(outer, len, inner)` of `shape` around `dim`: element `(o, k, n)` is
/// at `(o * len + k) * inner + n` in row-major order.
pub fn split(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    let outer = shape[..dim].iter().product();
    let inner = shape[dim + 1..].iter().product();
    (outer, shape[dim], inner)
}

#[cfg(test)]
mod tests;
