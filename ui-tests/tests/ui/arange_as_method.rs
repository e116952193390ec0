use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    x.arange(0, 3, 1, DType::I64)
}

fn main() {}
