//! [`Storage::fused_over`]: a fused kernel written over the buffer of an
//! input that dies at it (`executor/reuse.rs`).

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
