use aot_runtime::prelude::*;

// the device is `&x.device()`, not the tensor itself
#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    Tensor::arange(0, 3, 1, DType::I64, &x)
}

fn main() {}
