use aot_runtime::prelude::*;

// The suggestion keeps the user's choice of in place or not.
#[aot_fn]
fn f(x: &mut Tensor) -> Tensor {
    x.clmap_(0.0, 1.0);
    x.clmap(0.0, 1.0)
}

fn main() {}
