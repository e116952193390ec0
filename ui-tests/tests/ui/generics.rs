use aot_runtime::prelude::*;

#[aot_fn]
fn f<T>(x: &Tensor, k: T) -> Tensor {
    x.sin()
}

fn main() {}
