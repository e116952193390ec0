use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Option<Tensor> {
    x.sin()
}

fn main() {}
