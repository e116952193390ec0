use aot_runtime::prelude::*;

#[aot_fn]
fn clear_first_row(a: &Tensor) {
    let row = a.select(0, 0);
    row.zero_();
}

fn main() {}
