use aot_runtime::prelude::*;

#[aot_fn]
fn sgd(p: &mut Tensor, g: &Tensor, lr: f64) {
    p.sub_(&(g * lr));
}

#[aot_fn]
fn row(x: &Tensor, k: i64) -> Tensor {
    x.select(0, k)
}

#[aot_fn]
fn split2(x: &Tensor) -> (Tensor, Tensor) {
    (x * 1.0, x * 2.0)
}

#[aot_fn]
fn f(p: &mut Tensor, g: &Tensor) -> Tensor {
    // `&` where `sgd` takes `&mut`, a tensor where it takes a float.
    sgd(&p, &g, &g);
    // A float where `row` takes an integer.
    let r = row(&g, 0.5);
    // A pair bound to one name.
    let y = split2(&r);
    y
}

fn main() {}
