//! The generator's state, [`Rng`]: a Philox4x32-10 key and the next block
//! of its counter-based stream (`aot_ir::kernel::philox`). Backends draw
//! from it (the CPU in `cpu/random.rs`, CUDA on the device), so it sits
//! with the trait.

/// A Philox generator's state: the key, and the next block to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rng {
    pub(crate) seed: u64,
    pub(crate) offset: u64,
}

impl Rng {
    /// A generator seeded with `seed`, at offset 0.
    pub fn new(seed: u64) -> Rng {
        Rng { seed, offset: 0 }
    }

    /// A generator at `offset` blocks into `seed`'s stream.
    pub fn at(seed: u64, offset: u64) -> Rng {
        Rng { seed, offset }
    }

    /// `(seed, offset)`.
    pub fn state(&self) -> (u64, u64) {
        (self.seed, self.offset)
    }

    /// One uniform f64 on [0, 1) (53 bits); takes a block.
    #[cfg(test)]
    pub fn uniform(&mut self) -> f64 {
        let w = aot_ir::kernel::philox::block(self.seed, self.offset);
        self.offset = self.offset.wrapping_add(1);
        aot_ir::kernel::philox::uniform_f64(w[0], w[1])
    }

    /// Takes the blocks of a draw of `n` elements, `per` to a block, that
    /// is computed elsewhere (on a device, or later from the state):
    /// returns `(seed, first block)`.
    pub(crate) fn take(&mut self, n: usize, per: usize) -> (u64, u64) {
        let start = self.offset;
        self.offset = start.wrapping_add(n.div_ceil(per.max(1)) as u64);
        (self.seed, start)
    }
}
