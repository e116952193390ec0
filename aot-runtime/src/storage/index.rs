//! Gathers and scatters by an index buffer on a storage's backend:
//! [`Storage::gather`] and [`Storage::scatter_into`] (see
//! [`Backend::gather`] and [`Backend::scatter`]).

use super::{mismatch, same_device, Storage, StorageData};
use crate::backend::{Backend, Indexed};
use crate::error::{AotError, Result};
use crate::layout::Layout;

impl Storage {
    /// The elements of `l` picked along `dim` by `index` (read through
    /// `li`), as a new contiguous buffer of `li`'s shape.
    pub(crate) fn gather(&self, op: &'static str, l: &Layout, dim: usize, index: &Storage, li: &Layout) -> Result<Storage> {
        same_device(op, self, &[index])?;
        super::note(li.numel(), || crate::backend::OpKernels::Gather { dtype: self.dtype() });
        let data = self.read2(index, |s, i| match (s, i) {
            (StorageData::Cpu(s), StorageData::Cpu(i)) => s.gather(op, l, Indexed { index: i, layout: li, dim }).map(StorageData::Cpu),
            (StorageData::Cuda(s), StorageData::Cuda(i)) => s.gather(op, l, Indexed { index: i, layout: li, dim }).map(StorageData::Cuda),
            (s, i) => Err(mismatch(op, s.device(), i.device())),
        })?;
        Ok(Storage::new(data))
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
