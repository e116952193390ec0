use aot_runtime::prelude::*;

#[derive(TensorTree)]
#[tensor_subclass(size = q)]
struct Blocked {
    q: Tensor,
    blocks: Vec<Tensor>,
    #[skip]
    bits: u8,
}

#[derive(TensorTree)]
#[tensor_subclass(size = bits)]
struct SizeFromAttribute {
    q: Tensor,
    #[skip]
    bits: u8,
}

fn main() {}
