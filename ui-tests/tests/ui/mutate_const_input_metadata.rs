use aot_runtime::prelude::*;

#[aot_fn]
fn flip(a: &Tensor) -> Tensor {
    a.t_();
    a * 2.0
}

fn main() {}
