//! A stream of random choices that generators consume, Hypothesis-style.
//!
//! Property tests hand a generator a `Vec<u32>` drawn by proptest; every
//! decision of the generator reads the next number. Past the end of the
//! vector every choice is 0, and choice 0 is always the simplest option
//! (the first alternative, the smallest size, "no"), so proptest's
//! shrinking (shorter vectors, smaller numbers) shrinks the generated
//! program too. The same vector always generates the same program, which
//! makes every failure replayable from the vector alone.

/// Choices read from a fixed vector of numbers.
#[derive(Clone, Debug)]
pub struct Choices<'a> {
    data: &'a [u32],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(data: &'a [u32]) -> Self {
        Choices { data, pos: 0 }
    }

    /// How many numbers were read so far.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    fn next(&mut self) -> u32 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }

    /// A number in `0..n` (0 when `n <= 1`, without reading).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.next() as usize % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    /// True with probability `num / den`; choice 0 gives `false`.
    pub fn chance(&mut self, num: u32, den: u32) -> bool {
        let v = self.below(den as usize) as u32;
        v >= den - num
    }

    /// An index into `weights`, drawn in proportion to the weights. Zero
    /// weights are never drawn; choice 0 gives the first nonzero weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        if total == 0 {
            return 0;
        }
        let mut v = self.below(total as usize) as u32;
        for (i, &w) in weights.iter().enumerate() {
            if v < w {
                return i;
            }
            v -= w;
        }
        weights.len() - 1
    }

    /// One element of a non-empty slice.
    pub fn pick<'s, T>(&mut self, xs: &'s [T]) -> &'s T {
        &xs[self.below(xs.len())]
    }

    /// A random permutation of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            // choice 0 swaps nothing
            let j = i - self.below(i + 1);
            p.swap(i, j);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_the_simplest_choice() {
        let mut c = Choices::new(&[]);
        assert_eq!(c.below(5), 0);
        assert!(!c.chance(1, 2));
        assert_eq!(c.weighted(&[0, 3, 1]), 1);
        assert_eq!(c.permutation(3), vec![0, 1, 2]);
    }

    #[test]
    fn weighted_follows_the_weights() {
        let data: Vec<u32> = (0..4).collect();
        let mut c = Choices::new(&data);
        let got: Vec<usize> = (0..4).map(|_| c.weighted(&[1, 0, 3])).collect();
        assert_eq!(got, vec![0, 2, 2, 2]);
    }
}
