use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Stack {
    layers: Vec<Tensor>,
}

#[aot_fn]
fn pick(s: &Stack, k: i64) -> Tensor {
    s.layers[k].sum()
}

fn main() {}
