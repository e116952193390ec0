use aot_runtime::prelude::*;

#[aot_fn]
fn f(a: &mut Tensor) {
    a.copy_(&a.t());
}

fn main() {}
