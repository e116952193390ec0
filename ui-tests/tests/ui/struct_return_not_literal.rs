use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Linear {
    w: Tensor,
    b: Tensor,
}

#[aot_fn]
fn scaled(l: &Linear, s: f64) -> Linear {
    l.w * s
}

fn main() {}
