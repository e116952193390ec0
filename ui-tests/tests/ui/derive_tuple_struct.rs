use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Pair(Tensor, Tensor);

fn main() {}
