use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, k: f64) -> Tensor {
    x.matmul(k)
}

fn main() {}
