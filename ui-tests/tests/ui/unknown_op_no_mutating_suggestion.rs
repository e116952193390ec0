use aot_runtime::prelude::*;

// A functional name is pointed at the functional `clamp`, never at the
// in-place `clamp_`.
#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    x.clamp_min(0.0)
}

fn main() {}
