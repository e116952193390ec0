use aot_runtime::prelude::*;

#[aot_fn(fast)]
fn f(x: &Tensor) -> Tensor {
    x.exp()
}

fn main() {}
