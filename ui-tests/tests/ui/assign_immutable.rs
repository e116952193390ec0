use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    let h = x.sin();
    h = h * 2.0;
    h
}

fn main() {}
