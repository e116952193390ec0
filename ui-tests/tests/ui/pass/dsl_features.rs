//! The DSL features compile: scalar methods and constants,
//! `if` on a `bool` parameter, sizes, `Vec<Tensor>` returns, methods on a
//! `TensorTree` struct, and `#[aot_fn(crate = ..)]`.
use aot_runtime::prelude::*;

#[aot_fn]
fn adam_like(p: &mut Tensor, m: &Tensor, v: &Tensor, lr: f64, b1: f64, b2: f64, t: i64) {
    let bc1 = 1.0 - b1.powi(t);
    let bc2 = 1.0 - b2.powi(t as i32);
    p.sub_(&(m / (v.sqrt() / bc2.sqrt() + f64::EPSILON) * (lr / bc1)));
}

#[aot_fn]
fn layer(x: &Tensor, training: bool) -> Vec<Tensor> {
    let h = if training { x.dropout(0.1) } else { x.relu() };
    let heads = x.size(-1) / 2;
    vec![h.view(&[x.shape()[0], 2, heads]), h * std::f64::consts::PI]
}

#[derive(TensorTree)]
struct Lin {
    w: Tensor,
}

impl Lin {
    #[aot_fn]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.matmul(&self.w)
    }
}

mod other {
    pub use aot_runtime as rt;
}

#[aot_fn(crate = "other::rt")]
fn renamed(x: &Tensor) -> Tensor {
    x.exp()
}

fn main() {
    let _ = (adam_like::compiled(), layer::compiled(), Lin::forward_compiled(), renamed::compiled());
}
