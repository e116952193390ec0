use aot_runtime::prelude::*;

// arange takes its device from a tensor argument; here there is none.
#[aot_fn]
fn f(n: i64) -> Tensor {
    Tensor::arange(0, n)
}

fn main() {}
