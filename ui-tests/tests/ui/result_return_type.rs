use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Result<Tensor> {
    x.sin()
}

fn main() {}
