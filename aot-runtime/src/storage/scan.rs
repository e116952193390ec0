//! Scans, index reductions and the classification loss on a storage's
//! backend: [`Storage::cumsum`], [`Storage::extreme`],
//! [`Storage::nll_loss`] and [`Storage::nll_loss_backward`] (see the
//! [`Backend`] methods of the same names). Each is noted for
//! `kernels_for`'s listing ([`OpKernels`]).

use super::{elems, made, mismatch, note, same_device, Storage, StorageData};
use crate::backend::{Backend, OpKernels, Targets};
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
use crate::profile::{moved, span};

/// [`Targets`] over a storage, for [`Storage::nll_loss`].
#[derive(Clone, Copy)]
pub(crate) struct LossTargets<'a> {
    pub index: &'a Storage,
    pub layout: &'a Layout,
    pub classes: usize,
    pub ignore: i64,
    pub count: usize,
}

impl LossTargets<'_> {
    fn on<'a, S>(&self, index: &'a S) -> Targets<'a, S>
    where
        Self: 'a,
    {
        Targets { index, layout: self.layout, classes: self.classes, ignore: self.ignore, count: self.count }
    }
}

impl Storage {
    /// The cumulative sum of `l` along `dim` (from the end if `reverse`),
    /// contiguous with `l`'s shape.
    pub(crate) fn cumsum(&self, op: &'static str, l: &Layout, dim: usize, reverse: bool) -> Result<Storage> {
        note(l.numel(), || OpKernels::Cumsum { dtype: self.dtype() });
        let p = span(self.device, op, || moved(&[(l, self.dtype)], &[]));
        let data = match &*self.read() {
            StorageData::Cpu(s) => s.cumsum(op, l, dim, reverse).map(StorageData::Cpu),
            StorageData::Cuda(s) => s.cumsum(op, l, dim, reverse).map(StorageData::Cuda),
        };
        made(p, data.map(Storage::new))
    }

    /// `(values, indices)` of the extremes along `dim` of `l` (see
    /// [`Backend::extreme`]), contiguous.
    pub(crate) fn extreme(&self, op: &'static str, l: &Layout, dim: usize, max: bool) -> Result<(Storage, Storage)> {
        note(l.numel(), || OpKernels::Extreme { dtype: self.dtype(), max });
        // The values, and an i64 index per value.
        let out = l.numel() / l.shape.get(dim).copied().unwrap_or(1).max(1);
        let written = elems(out, self.dtype).plus(elems(out, DType::I64));
        let _p = span(self.device, op, || moved(&[(l, self.dtype)], &[]).plus(written));
        let (v, i) = match &*self.read() {
            StorageData::Cpu(s) => s.extreme(op, l, dim, max).map(|(v, i)| (StorageData::Cpu(v), StorageData::Cpu(i)))?,
            StorageData::Cuda(s) => s.extreme(op, l, dim, max).map(|(v, i)| (StorageData::Cuda(v), StorageData::Cuda(i)))?,
        };
        Ok((Storage::new(v), Storage::new(i)))
    }

    /// `nll_loss` of the `[N, C]` input `l` with targets `t`: one element.
    pub(crate) fn nll_loss(&self, op: &'static str, l: &Layout, t: LossTargets<'_>) -> Result<Storage> {
        same_device(op, self, &[t.index])?;
        note(1, || OpKernels::NllLoss { dtype: self.dtype() });
        // The targets, and the one element each picks.
        let picked = elems(t.layout.numel(), self.dtype);
        let p = span(self.device, op, || moved(&[(t.layout, t.index.dtype)], &[]).plus(picked));
        let r = self.read2(t.index, |x, i| match (x, i) {
            (StorageData::Cpu(x), StorageData::Cpu(i)) => x.nll_loss(op, l, t.on(i)).map(StorageData::Cpu),
            (StorageData::Cuda(x), StorageData::Cuda(i)) => x.nll_loss(op, l, t.on(i)).map(StorageData::Cuda),
            (x, i) => Err(mismatch(op, x.device(), i.device())),
        });
        made(p, r.map(Storage::new))
    }

    /// `nll_loss`'s gradient for the output gradient `self` (read through
    /// `lg`): `[N, C]` of `dtype`.
    pub(crate) fn nll_loss_backward(&self, op: &'static str, lg: &Layout, t: LossTargets<'_>, dtype: DType) -> Result<Storage> {
        same_device(op, self, &[t.index])?;
        note(t.layout.numel() * t.classes, || OpKernels::NllLossBackward { grad: self.dtype(), dtype });
        let p = span(self.device, op, || moved(&[(lg, self.dtype), (t.layout, t.index.dtype)], &[]));
        let r = self.read2(t.index, |g, i| match (g, i) {
            (StorageData::Cpu(g), StorageData::Cpu(i)) => g.nll_loss_backward(op, lg, t.on(i), dtype).map(StorageData::Cpu),
            (StorageData::Cuda(g), StorageData::Cuda(i)) => g.nll_loss_backward(op, lg, t.on(i), dtype).map(StorageData::Cuda),
            (g, i) => Err(mismatch(op, g.device(), i.device())),
        });
        made(p, r.map(Storage::new))
    }
}
