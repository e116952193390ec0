use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Vec<Tensor> {
    (x.exp(), x.sin())
}

fn main() {}
