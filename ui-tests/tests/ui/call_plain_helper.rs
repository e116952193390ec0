use aot_runtime::prelude::*;

fn helper(x: &Tensor) -> Tensor {
    x.clone()
}

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    helper(&x) * 2.0
}

fn main() {}
