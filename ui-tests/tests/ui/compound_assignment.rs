use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    let mut h = x.sin();
    h += y;
    h
}

fn main() {}
