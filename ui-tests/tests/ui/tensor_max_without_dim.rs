use aot_runtime::prelude::*;

// `f64::max` takes one argument; on a tensor `max()` is no arity mistake
// but an op of another name, and only that is reported.
#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    x.abs().max()
}

fn main() {}
