use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    let g = |t: &Tensor| t.exp();
    x.sin()
}

fn main() {}
