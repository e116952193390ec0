//! [`Storage::fused_over`]: a fused kernel written over the buffer of an
//! input that dies at it (`executor/reuse.rs`); [`Storage::fused_in_place`]:
//! one stored over a written argument's own buffer (reinplacing).

use super::{CpuStorage, Storage, StorageData};
use crate::backend::FusedProgram;
use crate::device::Device;
use crate::error::Result;
use crate::layout::Layout;
use std::sync::RwLockReadGuard;

impl Storage {
    /// [`Storage::fused`] computed over the buffer of input `k`, which the
    /// caller vouches no other tensor holds and nothing reads after this
    /// kernel, laid out exactly as `out` (dense, offset 0, the storage's
    /// whole length): the result is a new storage that takes the buffer,
    /// and `inputs[k]`'s storage is left empty, to be dropped. `None`:
    /// declined (not all CPU buffers of one float dtype, the layout or
    /// length differs, or the buffer is also another input's); nothing
    /// changed.
    pub(crate) fn fused_over(
        name: &'static str,
        p: &FusedProgram<'_>,
        inputs: &[(&Storage, Layout)],
        k: usize,
        out: &Layout,
    ) -> Option<Result<Storage>> {
        let (donor, layout) = inputs.get(k)?;
        let others_cpu = inputs.iter().enumerate().all(|(i, (s, _))| s.device == Device::Cpu && (i == k || !std::ptr::eq(*s, *donor)));
        if !others_cpu || *layout != *out || !crate::layout::is_dense_output(out) || donor.len != out.numel() {
            return None;
        }
        let mut held = donor.write();
        let StorageData::Cpu(own) = &mut *held else { return None };
        let dst = std::mem::replace(own, CpuStorage::Bool(Vec::new()));
        // The donor's entry stands for it and is not read.
        let hole = CpuStorage::Bool(Vec::new());
        let mut distinct: Vec<(&Storage, RwLockReadGuard<'_, StorageData>)> = Vec::new();
        for (i, (s, _)) in inputs.iter().enumerate() {
            if i != k && !distinct.iter().any(|(d, _)| std::ptr::eq(*d, *s)) {
                distinct.push((s, s.read()));
            }
        }
        let cpu: Vec<(&CpuStorage, Layout)> = inputs
            .iter()
            .enumerate()
            .map(|(i, (s, l))| {
                let data = distinct.iter().find(|(d, _)| i != k && std::ptr::eq(*d, *s)).map(|(_, g)| &**g);
                match data {
                    Some(StorageData::Cpu(c)) => (c, l.clone()),
                    _ => (&hole, l.clone()),
                }
            })
            .collect();
        match crate::cpu::fused::fused_over(name, p, &cpu, k, dst, out) {
            Ok(r) => {
                crate::executor::reuse::counted();
                Some(r.map(|d| Storage::new(StorageData::Cpu(d))))
            }
            Err(dst) => {
                *own = dst;
                None
            }
        }
    }

    /// The length of the buffer itself (a storage written over by
    /// [`Storage::fused_over`] holds none).
    #[cfg(test)]
    pub(crate) fn read_len(&self) -> usize {
        self.read().len()
    }
}

impl Storage {
    /// The elementwise kernel `p` (`call` on CUDA) stored over input `k`'s
    /// own buffer, in place (reinplacing, `executor/kernel/inplace.rs`):
    /// input `k` is laid out exactly as `out` (dense, offset 0, the
    /// storage's whole length) and no other input is its storage, so each
    /// element is read before the same position is written. `None`:
    /// declined, nothing written.
    pub(crate) fn fused_in_place(
        name: &'static str,
        p: &FusedProgram<'_>,
        call: &crate::backend::KernelCall<'_>,
        inputs: &[(&Storage, Layout)],
        k: usize,
        out: &Layout,
    ) -> Option<Result<()>> {
        let (dst, layout) = inputs.get(k)?;
        let distinct = inputs.iter().enumerate().all(|(i, (s, _))| i == k || !std::ptr::eq(*s, *dst));
        let one_device = inputs.iter().all(|(s, _)| s.device == dst.device);
        if !distinct || !one_device || *layout != *out || !crate::layout::is_dense_output(out) || dst.len != out.numel() {
            return None;
        }
        let mut held = dst.write();
        let mut others: Vec<(&Storage, RwLockReadGuard<'_, StorageData>)> = Vec::new();
        for (i, (s, _)) in inputs.iter().enumerate() {
            if i != k && !others.iter().any(|(d, _)| std::ptr::eq(*d, *s)) {
                others.push((s, s.read()));
            }
        }
        let guard = |i: usize| others.iter().find(|(d, _)| i != k && std::ptr::eq(*d, inputs[i].0)).map(|(_, g)| &**g);
        match &mut *held {
            StorageData::Cpu(own) => {
                // The destination's entry stands for it and is not read.
                let hole = CpuStorage::Bool(Vec::new());
                let cpu = (0..inputs.len())
                    .map(|i| match guard(i) {
                        Some(StorageData::Cpu(c)) => Some((c, inputs[i].1.clone())),
                        None if i == k => Some((&hole, inputs[i].1.clone())),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                crate::cpu::fused::fused_in_place(name, p, &cpu, k, own, out)
            }
            StorageData::Cuda(own) => {
                let own: &crate::cuda::CudaStorage = own;
                let cuda = (0..inputs.len())
                    .map(|i| match guard(i) {
                        Some(StorageData::Cuda(c)) => Some((c, inputs[i].1.clone())),
                        None if i == k => Some((own, inputs[i].1.clone())),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                own.fused_in_place(name, p, call, &cuda, k, out)
            }
        }
    }
}
