//! [`StridedIndex`]: the storage index of every element of a layout.

use super::Layout;

/// Iterates the storage index of every element of a layout in row-major order.
pub struct StridedIndex<'a> {
    layout: &'a Layout,
    index: Vec<usize>,
    next: Option<usize>,
    contiguous: bool,
    remaining: usize,
}

impl<'a> StridedIndex<'a> {
    pub(super) fn new(layout: &'a Layout) -> Self {
        let n = layout.numel();
        StridedIndex {
            layout,
            index: vec![0; layout.rank()],
            next: if n == 0 { None } else { Some(layout.offset) },
            contiguous: layout.is_contiguous(),
            remaining: n,
        }
    }
}

impl Iterator for StridedIndex<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        let cur = self.next?;
        self.remaining -= 1;
        if self.remaining == 0 {
            self.next = None;
            return Some(cur);
        }
        if self.contiguous {
            self.next = Some(cur + 1);
            return Some(cur);
        }
        // Wrapping: exact for layouts whose extent was checked, and a
        // hand-made layout gives wrong indices rather than a panic.
        let mut off = cur;
        for d in (0..self.index.len()).rev() {
            self.index[d] += 1;
            off = off.wrapping_add(self.layout.stride[d]);
            if self.index[d] < self.layout.shape[d] {
                self.next = Some(off);
                return Some(cur);
            }
            off = off.wrapping_sub(self.layout.stride[d].wrapping_mul(self.index[d]));
            self.index[d] = 0;
        }
        self.next = None;
        Some(cur)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}
impl ExactSizeIterator for StridedIndex<'_> {}
