//! Whether a layout's elements, or two layouts on one storage, share
//! storage positions.

use super::Layout;

/// How two layouts on one storage overlap (PyTorch's `get_overlap_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// No storage position is shared.
    No,
    /// The same positions, in the same order.
    Full,
    /// Some positions are shared.
    Partial,
    /// Not decided: too costly to work out for these layouts.
    TooHard,
}

impl Layout {
    /// True if some memory location is reached by two indices through a
    /// stride-0 dim (PyTorch's `has_internal_overlap` returning YES).
    pub fn has_internal_overlap(&self) -> bool {
        self.shape.iter().zip(&self.stride).any(|(&n, &s)| n > 1 && s == 0)
    }

    /// True when no two elements share a storage position, judged from
    /// the strides alone: ordered by stride, each dimension of two or more
    /// elements steps past everything the smaller dimensions reach. Exact
    /// for the layouts views make; a layout it cannot prove (some
    /// `as_strided` interleavings) counts as overlapping.
    pub fn is_non_overlapping(&self) -> bool {
        if self.shape.contains(&0) {
            return true;
        }
        let dims = || self.shape.iter().zip(&self.stride).enumerate().filter(|(_, (&n, _))| n > 1);
        dims().all(|(i, (_, &si))| {
            let before = dims().filter(|&(j, (_, &sj))| (sj, j) < (si, i));
            let reach = before.fold(0usize, |acc, (_, (&n, &s))| acc.saturating_add((n - 1).saturating_mul(s)));
            si > reach
        })
    }

    /// PyTorch's `is_non_overlapping_and_dense` (true for every contiguous
    /// layout, empty ones included).
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        if self.is_contiguous() {
            return true;
        }
        let n = self.rank();
        if n == 1 {
            return self.shape[0] < 2 || self.stride[0] == 1;
        }
        let mut perm: super::Dims = (0..n).collect();
        perm.sort_by(|&a, &b| {
            let (sa, sb) = (self.shape[a] < 2, self.shape[b] < 2);
            match (sa, sb) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                _ => self.stride[a].cmp(&self.stride[b]),
            }
        });
        let mut require = 1;
        for &i in &perm {
            if self.shape[i] < 2 {
                return true;
            }
            if self.stride[i] != require {
                return false;
            }
            require = require.saturating_mul(self.shape[i]);
        }
        true
    }

    /// PyTorch's `get_overlap_status` for two layouts on the same storage.
    pub fn overlap(&self, other: &Layout) -> Overlap {
        if self.numel() == 0 || other.numel() == 0 {
            return Overlap::No;
        }
        if !self.is_non_overlapping_and_dense() || !other.is_non_overlapping_and_dense() {
            return Overlap::TooHard;
        }
        let (ab, ae) = (self.offset, self.offset.saturating_add(self.numel()));
        let (bb, be) = (other.offset, other.offset.saturating_add(other.numel()));
        if ab == bb && ae == be {
            return if self.stride == other.stride { Overlap::Full } else { Overlap::Partial };
        }
        if ab < be && bb < ae {
            return Overlap::Partial;
        }
        Overlap::No
    }

    /// True if some storage index is touched by both layouts. Exact but
    /// O(numel); used by analyses that must not guess.
    pub fn shares_elements_with(&self, other: &Layout) -> bool {
        if self.numel() == 0 || other.numel() == 0 {
            return false;
        }
        let (a0, a1) = (self.offset, self.storage_extent());
        let (b0, b1) = (other.offset, other.storage_extent());
        if a1 <= b0 || b1 <= a0 {
            return false;
        }
        let mut seen = std::collections::HashSet::new();
        for o in self.offsets() {
            seen.insert(o);
        }
        other.offsets().any(|o| seen.contains(&o))
    }
}
