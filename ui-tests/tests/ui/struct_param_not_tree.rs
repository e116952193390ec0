use aot_runtime::prelude::*;

struct Plain {
    w: Tensor,
}

#[aot_fn]
fn f(p: &Plain) -> Tensor {
    p.w.sum()
}

fn main() {}
