use aot_runtime::prelude::*;

#[aot_fn]
struct Model {
    w: Tensor,
}

fn main() {}
