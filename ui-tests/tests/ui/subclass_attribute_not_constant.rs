use aot_runtime::prelude::*;

#[derive(TensorTree)]
#[tensor_subclass]
struct Int8Weight {
    q: Tensor,
    scale: Tensor,
    #[skip]
    bits: u8,
}

#[aot_fn]
fn make(q: &Tensor, s: &Tensor, bits: i64) -> Int8Weight {
    Int8Weight { q: q.to_dtype(DType::I64), scale: s * 1.0, bits: bits + 0 }
}

fn main() {}
