//! Eager tensors with PyTorch's view and in-place semantics: slice
//! assignment with gradients (PyTorch's CopySlices) and an SGD step.

use aot_runtime::prelude::*;

fn main() -> Result<()> {
    let dev = Device::Cpu;
    let x = Tensor::randn(&[4, 3], DType::F32, &dev, 0)?.requires_grad_(true)?;
    let y = Tensor::randn(&[2, 3], DType::F32, &dev, 1)?.requires_grad_(true)?;

    // Slice assignment: rows 1..3 of a buffer take `y`, then the buffer
    // meets `x`. Gradients reach both, through and around the slice.
    let buf = x.mul(2.0)?;
    buf.narrow(0, 1, 2)?.copy_(&y)?;
    let loss = buf.mul(&x)?.sum()?;
    loss.backward()?;
    println!("loss          = {:.4}", loss.item::<f32>()?);
    println!("x.grad        = {:?}", x.grad().map(|g| g.to_vec::<f32>()));
    println!("y.grad        = {:?}", y.grad().map(|g| g.to_vec::<f32>()));

    // An SGD step on the leaf, under no_grad.
    if let Some(g) = x.grad() {
        aot_runtime::no_grad(|| x.sub_(&g.mul(0.1)?))?;
    }
    println!("x after step  = {:?}", x.to_vec::<f32>()?);
    Ok(())
}
