use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    if x.sum().gt(0.0) { x + y } else { x - y }
}

fn main() {}
