use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &mut Tensor, n: i64) {
    for _ in 0..n {
        x.mul_(2.0);
    }
}

fn main() {}
