use aot_runtime::prelude::*;

#[aot_fn]
fn countdown(x: &Tensor) -> Tensor {
    countdown(&x) * 2.0
}

fn main() {}
