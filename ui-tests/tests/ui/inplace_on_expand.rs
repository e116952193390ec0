use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &mut Tensor) -> Tensor {
    let b = x.expand(&[3, 4]);
    b.add_(1.0);
    b
}

fn main() {}
