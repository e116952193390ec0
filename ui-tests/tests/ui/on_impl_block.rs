use aot_runtime::prelude::*;

struct Model;

#[aot_fn]
impl Model {
    fn forward(x: &Tensor) -> Tensor {
        x.exp()
    }
}

fn main() {}
