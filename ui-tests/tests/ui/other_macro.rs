use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    println!("tracing");
    x.exp()
}

fn main() {}
