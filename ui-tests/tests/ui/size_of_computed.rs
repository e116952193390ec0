use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    let h = x.exp();
    h.view(&[h.size(0), -1])
}

fn main() {}
