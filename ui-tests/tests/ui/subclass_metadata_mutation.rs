use aot_runtime::prelude::*;

#[derive(TensorTree)]
#[tensor_subclass]
struct Int8Weight {
    q: Tensor,
    scale: Tensor,
    #[skip]
    bits: u8,
}

#[derive(TensorTree)]
struct Layer {
    w: Int8Weight,
    b: Tensor,
}

#[aot_fn]
fn flip(w: &mut Int8Weight, x: &Tensor) -> Tensor {
    w.scale.unsqueeze_(0);
    x * w.scale
}

#[aot_fn]
fn nested(l: &mut Layer, x: &Tensor) -> Tensor {
    l.w.q.t_();
    x + l.b
}

fn main() {}
