use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Block {
    w: Tensor,
}

#[derive(TensorTree)]
struct Model {
    blocks: Vec<Block>,
}

// A loop over a parameter is unrolled per call, but a `Vec` field's index
// must be known when the macro expands.
#[aot_fn]
fn blocks(m: &Model, x: &Tensor, n: usize) -> Tensor {
    let mut h = x * 1.0;
    for t in 0..n {
        h = h.matmul(&m.blocks[t].w);
    }
    h
}

// Only tensors are carried from one iteration to the next.
#[aot_fn]
fn scale(x: &mut Tensor, n: i64) {
    let mut s = 1.0;
    for _ in 0..n {
        s = s * 2.0;
    }
    x.mul_(s);
}

// A write to a `&Tensor` input is refused inside such a loop too.
#[aot_fn]
fn bump(x: &Tensor, n: i64) {
    for _ in 0..x.size(0) + n {
        x.add_(1.0);
    }
}

fn main() {}
