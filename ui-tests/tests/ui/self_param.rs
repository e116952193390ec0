use aot_runtime::prelude::*;

#[aot_fn]
fn f(self, x: &Tensor) -> Tensor {
    x.sin()
}

fn main() {}
