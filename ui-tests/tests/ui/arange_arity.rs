use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    Tensor::arange(0, 3, 1, DType::I64, &x.device(), 0)
}

fn main() {}
