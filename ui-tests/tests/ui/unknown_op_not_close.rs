use aot_runtime::prelude::*;

// PyTorch's `lerp` is not an op of the DSL, and not a misspelling of `le`.
#[aot_fn]
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x.lerp(&y, 0.5)
}

fn main() {}
