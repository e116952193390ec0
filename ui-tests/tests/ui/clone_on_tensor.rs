use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    let y = x.clone();
    y.add_(1.0);
    y
}

fn main() {}
