use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, i: f64) -> Tensor {
    x.select(0, i)
}

fn main() {}
