use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &mut Tensor) {
    while true {
        x.mul_(2.0);
    }
}

fn main() {}
