//! [`Storage::fused_over`]: a fused kernel written over the buffer of an
//! input that dies at it (`executor/reuse.rs`); [`Storage::fused_in_place`]:
//! one stored over written arguments' own buffers (reinplacing).

use super::dtype_view::{DataRead, DataWrite};
use super::fused_dispatch::{kernel_made, kernel_span};
use super::{Storage, StorageData};
use crate::backend::{Backend, CpuStorage, FusedProgram};
use crate::cuda::CudaStorage;
use crate::device::Device;
use crate::error::Result;
use crate::layout::Layout;

impl Storage {
    /// [`Storage::fused`] computed over the buffer of input `k`, which the
    /// caller vouches no other tensor holds and nothing reads after this
    /// kernel, laid out exactly as `out` (dense, offset 0, the storage's
    /// whole length): the result is a new storage that takes the buffer,
    /// and `inputs[k]`'s storage is left empty, to be dropped. `None`:
    /// declined (not all CPU buffers of one float dtype, the layout or
    /// length differs, or the buffer is also another input's); nothing
    /// changed. It is profiled as `row`.
    pub(crate) fn fused_over(
        name: &'static str,
        row: &str,
        p: &FusedProgram<'_>,
        inputs: &[(&Storage, Layout)],
        k: usize,
        out: &Layout,
    ) -> Option<Result<Storage>> {
        let (donor, layout) = inputs.get(k)?;
        // A dtype view's buffer is its root's, and others may read it.
        if inputs.iter().any(|(s, _)| s.is_dtype_view()) {
            return None;
        }
        let others_cpu = inputs.iter().enumerate().all(|(i, (s, _))| s.device == Device::Cpu && (i == k || !std::ptr::eq(*s, *donor)));
        if !others_cpu || *layout != *out || !crate::layout::is_dense_output(out) || donor.len != out.numel() {
            return None;
        }
        let span = kernel_span(row, inputs);
        let mut held = donor.write();
        let StorageData::Cpu(own) = &mut *held else { return kernel_made(span, None) };
        let dst = std::mem::replace(own, CpuStorage::Bool(Vec::new()));
        // The donor's entry stands for it and is not read.
        let hole = CpuStorage::Bool(Vec::new());
        let mut distinct: Vec<(&Storage, DataRead<'_>)> = Vec::new();
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
        match CpuStorage::fused_over(name, p, &cpu, k, dst, out) {
            Ok(r) => {
                crate::counters::bump(crate::counters::Counter::ReusedBuffers);
                kernel_made(span, Some(r.map(|d| Storage::new(StorageData::Cpu(d)))))
            }
            Err(dst) => {
                *own = dst;
                kernel_made(span, None)
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
    /// The elementwise kernel `p` (`call` on CUDA) stored over its
    /// destinations' own buffers, in place (reinplacing,
    /// `executor/kernel/inplace.rs`): `dests` pairs an input with the body
    /// value stored over it; each such input is laid out exactly as `out`
    /// (dense, offset 0, the storage's whole length) and no other input is
    /// its storage, so each element is read before the same position is
    /// written. `None`: declined, nothing written.
    pub(crate) fn fused_in_place(
        name: &'static str,
        p: &FusedProgram<'_>,
        call: &crate::backend::KernelCall<'_>,
        inputs: &[(&Storage, Layout)],
        dests: &[(usize, usize)],
        out: &Layout,
    ) -> Option<Result<()>> {
        if inputs.iter().any(|(s, _)| s.is_dtype_view()) {
            return None;
        }
        let (first, _) = inputs.get(dests.first()?.0)?;
        for &(k, _) in dests {
            let (dst, layout) = inputs.get(k)?;
            let distinct = inputs.iter().enumerate().all(|(i, (s, _))| i == k || !std::ptr::eq(*s, *dst));
            if !distinct || *layout != *out || dst.len != out.numel() {
                return None;
            }
        }
        if !inputs.iter().all(|(s, _)| s.device == first.device) || !crate::layout::is_dense_output(out) {
            return None;
        }
        let mut span = kernel_span(&call.kernel.name, inputs);
        if let Some(s) = &mut span {
            s.add_bytes(dests.iter().map(|&(k, _)| crate::profile::footprint(out, inputs[k].0.dtype)).sum());
        }
        let r = Storage::fused_in_place_on(name, p, call, inputs, dests, out, first.device);
        if r.is_none() {
            if let Some(s) = span {
                s.cancel();
            }
        }
        r
    }

    /// [`Storage::fused_in_place`] once its operands are checked.
    fn fused_in_place_on(
        name: &'static str,
        p: &FusedProgram<'_>,
        call: &crate::backend::KernelCall<'_>,
        inputs: &[(&Storage, Layout)],
        dests: &[(usize, usize)],
        out: &Layout,
        device: Device,
    ) -> Option<Result<()>> {
        let is_dest = |i: usize| dests.iter().any(|&(k, _)| k == i);
        // Locks taken in address order, so calls over the same storages in
        // another order cannot deadlock.
        let mut order: Vec<usize> = (0..inputs.len()).collect();
        order.sort_by_key(|&i| inputs[i].0 as *const Storage as usize);
        let mut written: Vec<(usize, DataWrite<'_>)> = Vec::new();
        let mut others: Vec<(&Storage, DataRead<'_>)> = Vec::new();
        for i in order {
            let s = inputs[i].0;
            if is_dest(i) {
                written.push((i, s.write()));
            } else if !others.iter().any(|(d, _)| std::ptr::eq(*d, s)) {
                others.push((s, s.read()));
            }
        }
        written.sort_by_key(|(i, _)| dests.iter().position(|&(k, _)| k == *i));
        let guard = |i: usize| others.iter().find(|(d, _)| !is_dest(i) && std::ptr::eq(*d, inputs[i].0)).map(|(_, g)| &**g);
        let stored: Vec<(usize, usize)> = dests.to_vec();
        // Each input's buffer on this backend; a destination's is `None`
        // (it is in `own`); an input on another backend declines.
        let layout = |i: usize| inputs[i].1.clone();
        if matches!(device, Device::Cpu) {
            let cpu = (0..inputs.len())
                .map(|i| match guard(i) {
                    Some(StorageData::Cpu(c)) => Some((Some(c), layout(i))),
                    None if is_dest(i) => Some((None, layout(i))),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            let own = written.iter_mut().map(|(_, g)| match &mut **g {
                StorageData::Cpu(c) => Some(c),
                StorageData::Cuda(_) => None,
            });
            return CpuStorage::fused_in_place(name, p, call, &cpu, &stored, own.collect::<Option<_>>()?, out);
        }
        let cuda = (0..inputs.len())
            .map(|i| match guard(i) {
                Some(StorageData::Cuda(c)) => Some((Some(c), layout(i))),
                None if is_dest(i) => Some((None, layout(i))),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let own = written.iter_mut().map(|(_, g)| match &mut **g {
            StorageData::Cuda(c) => Some(c),
            StorageData::Cpu(_) => None,
        });
        CudaStorage::fused_in_place(name, p, call, &cuda, &stored, own.collect::<Option<_>>()?, out)
    }
}
