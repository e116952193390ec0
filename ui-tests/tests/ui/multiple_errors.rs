use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, w: &Tensor) -> Tensor {
    let y = x.clone();
    let z = y.sofmax(1);
    z.sum_dim(&[0])
}

fn main() {
    // Callers still type-check: only the errors above are reported.
    let x = Tensor::ones(&[2], DType::F32, &Device::Cpu).unwrap();
    let _ = f(&x, &x);
    let _ = f::compiled();
}
