use aot_runtime::prelude::*;

#[aot_fn]
async fn f(x: &Tensor) -> Tensor {
    x.sin()
}

fn main() {}
