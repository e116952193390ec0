//! [`Storage::fused_in_place_segments`]: several in-place kernels of one
//! code (an optimizer step over many parameters, reinplaced) launched as
//! one, on a backend that has launches of segments
//! ([`Backend::fused_in_place_segments`]).

use super::dtype_view::{DataRead, DataWrite};
use super::{Storage, StorageData};
use crate::backend::{Backend, InPlaceSegment, KernelCall};
use crate::cuda::CudaStorage;
use crate::device::Device;
use crate::error::Result;
use crate::layout::Layout;

/// One kernel of [`Storage::fused_in_place_segments`], as
/// [`Storage::fused_in_place`] takes one.
pub(crate) struct Segment<'a> {
    /// Which inputs the body reads.
    pub read: &'a [bool],
    pub call: KernelCall<'a>,
    pub inputs: Vec<(&'a Storage, Layout)>,
    /// An input, and the body value stored over it.
    pub dests: Vec<(usize, usize)>,
    pub out: Layout,
}

/// A storage's lock for a launch: written or read.
enum Held<'a> {
    Write(DataWrite<'a>),
    Read(DataRead<'a>),
}

impl Held<'_> {
    fn data(&self) -> &StorageData {
        match self {
            Held::Write(w) => w,
            Held::Read(r) => r,
        }
    }
}

impl Storage {
    /// The kernels `segs` stored over their destinations in one launch:
    /// each as [`Storage::fused_in_place`] stores one (destinations laid
    /// out exactly as `out`, over their whole storage, no other input of
    /// the kernel), and no storage a segment writes is read or written by
    /// another, so the segments may run in any order. `None`: declined
    /// (the backend has no such launches, or the segments do not qualify);
    /// nothing written.
    pub(crate) fn fused_in_place_segments(name: &'static str, segs: &[Segment<'_>]) -> Option<Result<()>> {
        let (first, _) = segs.first()?.inputs.first()?;
        let device = first.device;
        let all = || segs.iter().flat_map(|s| s.inputs.iter().map(|(t, _)| *t));
        if !matches!(device, Device::Cuda(_)) || all().any(|s| s.is_dtype_view() || s.device != device) {
            return None;
        }
        let mut written: Vec<(usize, &Storage)> = Vec::new();
        for (i, seg) in segs.iter().enumerate() {
            for &(k, _) in &seg.dests {
                let (dst, layout) = seg.inputs.get(k)?;
                let distinct = seg.inputs.iter().enumerate().all(|(j, (s, _))| j == k || !s.same(dst));
                if !distinct || *layout != seg.out || dst.len != seg.out.numel() {
                    return None;
                }
                written.push((i, dst));
            }
        }
        let apart = written.iter().all(|(i, w)| segs.iter().enumerate().all(|(j, s)| j == *i || s.inputs.iter().all(|(t, _)| !t.same(w))));
        if !apart {
            return None;
        }
        // Each storage locked once, in address order (as `fused_in_place`).
        let mut distinct: Vec<(&Storage, bool)> = Vec::new();
        for s in all() {
            let writes = written.iter().any(|(_, w)| std::ptr::eq(*w, s));
            if !distinct.iter().any(|(d, _)| std::ptr::eq(*d, s)) {
                distinct.push((s, writes));
            }
        }
        distinct.sort_by_key(|(s, _)| *s as *const Storage as usize);
        let held: Vec<(&Storage, Held<'_>)> =
            distinct.iter().map(|&(s, w)| (s, if w { Held::Write(s.write()) } else { Held::Read(s.read()) })).collect();
        let cuda = |s: &Storage| match held.iter().find(|(d, _)| std::ptr::eq(*d, s)).map(|(_, h)| h.data()) {
            Some(StorageData::Cuda(c)) => Some(c),
            _ => None,
        };
        let on_device = segs
            .iter()
            .map(|seg| {
                let inputs = seg.inputs.iter().map(|(s, l)| Some((cuda(s)?, l.clone()))).collect::<Option<Vec<_>>>()?;
                Some(InPlaceSegment { read: seg.read, call: seg.call, inputs, dests: &seg.dests, out: &seg.out })
            })
            .collect::<Option<Vec<_>>>()?;
        CudaStorage::fused_in_place_segments(name, &on_device)
    }
}
