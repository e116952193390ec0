use aot_runtime::prelude::*;

#[aot_fn]
fn sgd(p: &mut Tensor, g: &Tensor, lr: f64) {
    p.sub_(&(g * lr));
}

#[aot_fn]
fn step(p: &Tensor, g: &Tensor, lr: f64) {
    sgd(&mut p, &g, lr);
}

fn main() {}
