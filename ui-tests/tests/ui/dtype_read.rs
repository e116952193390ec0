use aot_runtime::prelude::*;

#[aot_fn]
fn masked_mean(x: &Tensor, mask: &Tensor) -> Tensor {
    let m = mask.to_dtype(x.dtype());
    (x * &m).sum() / m.sum()
}

fn main() {}
