use aot_runtime::prelude::*;

#[aot_fn]
fn layer(x: &Tensor, w: &Tensor, s: f64) -> Tensor {
    x.matmul(&w) * s
}

#[aot_fn]
fn f(x: &Tensor, w: &Tensor) -> Tensor {
    layer(&x, &w)
}

fn main() {}
