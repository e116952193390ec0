//! [`Dims`]: the sizes or strides of a layout, held inline up to
//! [`INLINE_DIMS`] dims so that making, cloning and dropping the layout of
//! an ordinary tensor allocates nothing (a tiny op's fixed cost was mostly
//! these allocations). Longer lists spill to a `Vec`. It reads as a
//! `[usize]` (`Deref`), compares, hashes and prints as one, whichever way
//! it is held.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// How many dims a [`Dims`] holds without allocating.
pub const INLINE_DIMS: usize = 6;

/// A list of sizes or strides (see the module doc).
#[derive(Clone)]
pub struct Dims(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [usize; INLINE_DIMS] },
    Heap(Vec<usize>),
}

impl Dims {
    /// No dims (the shape of a scalar).
    pub const fn new() -> Dims {
        Dims(Repr::Inline { len: 0, buf: [0; INLINE_DIMS] })
    }

    /// `n` zeros.
    #[inline]
    pub fn zeros(n: usize) -> Dims {
        if n <= INLINE_DIMS {
            Dims(Repr::Inline { len: n as u8, buf: [0; INLINE_DIMS] })
        } else {
            Dims(Repr::Heap(vec![0; n]))
        }
    }

    /// A copy of `s`.
    #[inline]
    pub fn from_slice(s: &[usize]) -> Dims {
        if s.len() <= INLINE_DIMS {
            let mut buf = [0; INLINE_DIMS];
            buf[..s.len()].copy_from_slice(s);
            Dims(Repr::Inline { len: s.len() as u8, buf })
        } else {
            Dims(Repr::Heap(s.to_vec()))
        }
    }

    /// The dims.
    #[inline]
    pub fn as_slice(&self) -> &[usize] {
        match &self.0 {
            Repr::Inline { len, buf } => &buf[..*len as usize],
            Repr::Heap(v) => v,
        }
    }

    /// The dims, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [usize] {
        match &mut self.0 {
            Repr::Inline { len, buf } => &mut buf[..*len as usize],
            Repr::Heap(v) => v,
        }
    }

    /// The dims as a `Vec` (moved out when held on the heap).
    pub fn into_vec(self) -> Vec<usize> {
        match self.0 {
            Repr::Inline { len, buf } => buf[..len as usize].to_vec(),
            Repr::Heap(v) => v,
        }
    }

    /// The heap form, for the operations that change the length.
    fn spill(&mut self) -> &mut Vec<usize> {
        if let Repr::Inline { len, buf } = &self.0 {
            let mut v = Vec::with_capacity(*len as usize + 1);
            v.extend_from_slice(&buf[..*len as usize]);
            self.0 = Repr::Heap(v);
        }
        match &mut self.0 {
            Repr::Heap(v) => v,
            Repr::Inline { .. } => unreachable!("spilled just above"),
        }
    }

    /// Appends a dim.
    pub fn push(&mut self, x: usize) {
        match &mut self.0 {
            Repr::Inline { len, buf } if (*len as usize) < INLINE_DIMS => {
                buf[*len as usize] = x;
                *len += 1;
            }
            _ => self.spill().push(x),
        }
    }

    /// Inserts `x` at `i` (`i <= len`, as `Vec::insert`).
    pub fn insert(&mut self, i: usize, x: usize) {
        match &mut self.0 {
            Repr::Inline { len, buf } if (*len as usize) < INLINE_DIMS && i <= *len as usize => {
                let n = *len as usize;
                buf.copy_within(i..n, i + 1);
                buf[i] = x;
                *len += 1;
            }
            _ => self.spill().insert(i, x),
        }
    }

    /// Removes and returns the dim at `i` (`i < len`, as `Vec::remove`).
    pub fn remove(&mut self, i: usize) -> usize {
        match &mut self.0 {
            Repr::Inline { len, buf } if i < *len as usize => {
                let (x, n) = (buf[i], *len as usize);
                buf.copy_within(i + 1..n, i);
                *len -= 1;
                x
            }
            _ => self.spill().remove(i),
        }
    }
}

impl Default for Dims {
    fn default() -> Dims {
        Dims::new()
    }
}

impl Deref for Dims {
    type Target = [usize];
    #[inline]
    fn deref(&self) -> &[usize] {
        self.as_slice()
    }
}

impl DerefMut for Dims {
    #[inline]
    fn deref_mut(&mut self) -> &mut [usize] {
        self.as_mut_slice()
    }
}

impl AsRef<[usize]> for Dims {
    fn as_ref(&self) -> &[usize] {
        self.as_slice()
    }
}

impl std::borrow::Borrow<[usize]> for Dims {
    fn borrow(&self) -> &[usize] {
        self.as_slice()
    }
}

impl PartialEq for Dims {
    fn eq(&self, other: &Dims) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for Dims {}

impl PartialEq<[usize]> for Dims {
    fn eq(&self, other: &[usize]) -> bool {
        self.as_slice() == other
    }
}
impl PartialEq<&[usize]> for Dims {
    fn eq(&self, other: &&[usize]) -> bool {
        self.as_slice() == *other
    }
}
impl PartialEq<Vec<usize>> for Dims {
    fn eq(&self, other: &Vec<usize>) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl PartialEq<Dims> for Vec<usize> {
    fn eq(&self, other: &Dims) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl PartialEq<Dims> for [usize] {
    fn eq(&self, other: &Dims) -> bool {
        self == other.as_slice()
    }
}
impl PartialEq<Dims> for &[usize] {
    fn eq(&self, other: &Dims) -> bool {
        *self == other.as_slice()
    }
}

impl Hash for Dims {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl fmt::Debug for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl From<&[usize]> for Dims {
    fn from(s: &[usize]) -> Dims {
        Dims::from_slice(s)
    }
}
impl<const N: usize> From<[usize; N]> for Dims {
    fn from(s: [usize; N]) -> Dims {
        Dims::from_slice(&s)
    }
}
impl From<&Vec<usize>> for Dims {
    fn from(s: &Vec<usize>) -> Dims {
        Dims::from_slice(s)
    }
}
impl From<Vec<usize>> for Dims {
    /// Inline when short (the `Vec` is dropped), else the `Vec` itself.
    fn from(v: Vec<usize>) -> Dims {
        if v.len() <= INLINE_DIMS {
            Dims::from_slice(&v)
        } else {
            Dims(Repr::Heap(v))
        }
    }
}
impl From<Dims> for Vec<usize> {
    fn from(d: Dims) -> Vec<usize> {
        d.into_vec()
    }
}

impl FromIterator<usize> for Dims {
    fn from_iter<I: IntoIterator<Item = usize>>(it: I) -> Dims {
        let mut d = Dims::new();
        for x in it {
            d.push(x);
        }
        d
    }
}

impl Extend<usize> for Dims {
    fn extend<I: IntoIterator<Item = usize>>(&mut self, it: I) {
        for x in it {
            self.push(x);
        }
    }
}

impl<'a> IntoIterator for &'a Dims {
    type Item = &'a usize;
    type IntoIter = std::slice::Iter<'a, usize>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl IntoIterator for Dims {
    type Item = usize;
    type IntoIter = IntoIter;
    fn into_iter(self) -> IntoIter {
        IntoIter { dims: self, next: 0 }
    }
}

/// The dims of a [`Dims`], by value.
pub struct IntoIter {
    dims: Dims,
    next: usize,
}

impl Iterator for IntoIter {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        let x = self.dims.get(self.next).copied();
        self.next += usize::from(x.is_some());
        x
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.dims.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for IntoIter {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation agrees with `Vec<usize>`, across the inline limit.
    #[test]
    fn dims_behave_as_a_vec() {
        for n in 0..=INLINE_DIMS + 2 {
            let v: Vec<usize> = (1..=n).collect();
            let mut d = Dims::from(v.clone());
            assert_eq!(d, v);
            assert_eq!(format!("{d:?}"), format!("{v:?}"));
            let (mut w, mut e) = (v.clone(), d.clone());
            w.push(99);
            e.push(99);
            assert_eq!(e, w);
            for i in 0..=n {
                let (mut w2, mut e2) = (v.clone(), d.clone());
                w2.insert(i, 7);
                e2.insert(i, 7);
                assert_eq!(e2, w2, "insert {i} into {v:?}");
                if i < n {
                    let (mut w3, mut e3) = (v.clone(), d.clone());
                    assert_eq!(e3.remove(i), w3.remove(i));
                    assert_eq!(e3, w3, "remove {i} from {v:?}");
                }
            }
            if n > 1 {
                d.swap(0, n - 1);
                assert_eq!(d[0], n);
            }
            assert_eq!(Dims::zeros(n), vec![0; n]);
            assert_eq!(v.iter().copied().collect::<Dims>(), v);
            assert_eq!(Dims::from_slice(&v).into_vec(), v);
            assert_eq!(Dims::from_slice(&v).into_iter().collect::<Vec<_>>(), v);
        }
        // Equal values hash alike however they are held.
        use std::collections::hash_map::DefaultHasher;
        let h = |d: &Dims| {
            let mut s = DefaultHasher::new();
            d.hash(&mut s);
            s.finish()
        };
        let mut spilled = Dims::from(vec![1; INLINE_DIMS + 1]);
        spilled.remove(0);
        assert_eq!(spilled, Dims::from(vec![1; INLINE_DIMS]));
        assert_eq!(h(&spilled), h(&Dims::from(vec![1; INLINE_DIMS])));
    }
}
