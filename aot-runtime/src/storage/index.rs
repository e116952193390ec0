//! Gathers and scatters by an index buffer on a storage's backend:
//! [`Storage::gather`] and [`Storage::scatter_into`] (see
//! [`Backend::gather`] and [`Backend::scatter`]).

use super::{elems, made, mismatch, same_device, Storage, StorageData};
use crate::backend::{Backend, Indexed};
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::profile::moved;

impl Storage {
    /// The elements of `l` picked along `dim` by `index` (read through
    /// `li`), as a new contiguous buffer of `li`'s shape.
    pub(crate) fn gather(&self, op: &'static str, l: &Layout, dim: usize, index: &Storage, li: &Layout) -> Result<Storage> {
        same_device(op, self, &[index])?;
        super::note(li.numel(), || crate::backend::OpKernels::Gather { dtype: self.dtype() });
        // The index, and the one element it picks per position.
        let p = crate::profile::span(self.device, op, || moved(&[(li, index.dtype)], &[]).plus(elems(li.numel(), self.dtype)));
        let data = self.read2(index, |s, i| match (s, i) {
            (StorageData::Cpu(s), StorageData::Cpu(i)) => s.gather(op, l, Indexed { index: i, layout: li, dim }).map(StorageData::Cpu),
            (StorageData::Cuda(s), StorageData::Cuda(i)) => s.gather(op, l, Indexed { index: i, layout: li, dim }).map(StorageData::Cuda),
            (s, i) => Err(mismatch(op, s.device(), i.device())),
        });
        made(p, data.map(Storage::new))
    }

    /// Writes (or adds, if `accumulate`) the elements of `ls` in `self`
    /// into `dst` at the positions of `ld` picked along `dim` by `index`
    /// (read through `li`). `dst` is another storage than `self` and
    /// `index`; nothing is written on error. The caller bumps `dst`'s
    /// version.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scatter_into(
        &self,
        op: &'static str,
        ls: &Layout,
        dim: usize,
        index: &Storage,
        li: &Layout,
        dst: &Storage,
        ld: &Layout,
        accumulate: bool,
    ) -> Result<()> {
        same_device(op, self, &[index, dst])?;
        if self.same(dst) || index.same(dst) {
            return Err(AotError::internal(op, "scatter into its own source or index"));
        }
        super::note(li.numel(), || crate::backend::OpKernels::Scatter { dtype: dst.dtype(), accumulate });
        // The source and the index, and per position one destination
        // element written (read first if accumulating).
        let dst_bytes = elems(li.numel() * (1 + usize::from(accumulate)), dst.dtype);
        let _p = crate::profile::span(self.device, op, || moved(&[(ls, self.dtype), (li, index.dtype)], &[]).plus(dst_bytes));
        let mut d = dst.write();
        self.read2(index, |s, i| match (s, i, &mut *d) {
            (StorageData::Cpu(s), StorageData::Cpu(i), StorageData::Cpu(d)) => {
                s.scatter(op, ls, Indexed { index: i, layout: li, dim }, d, ld, accumulate)
            }
            (StorageData::Cuda(s), StorageData::Cuda(i), StorageData::Cuda(d)) => {
                s.scatter(op, ls, Indexed { index: i, layout: li, dim }, d, ld, accumulate)
            }
            (s, _, d) => Err(mismatch(op, s.device(), d.device())),
        })
    }
}
