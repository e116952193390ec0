// Loops whose bounds are parameters or sizes, unrolled per call.
use aot_runtime::prelude::*;

#[aot_fn]
fn rnn(x: &Tensor, h0: &Tensor, wx: &Tensor, wh: &Tensor) -> Tensor {
    let mut h = h0.copy();
    for t in 0..x.size(1) {
        h = (x.select(1, t).matmul(wx) + h.matmul(wh)).tanh();
    }
    h
}

#[aot_fn]
fn fill(out: &mut Tensor, x: &Tensor, n: usize) {
    for i in 0..n {
        out.select(0, i).copy_(&(x * (i as f64)));
    }
}

fn main() -> Result<()> {
    let x = Tensor::ones(&[2, 3, 4], DType::F32, &Device::Cpu)?;
    let h0 = Tensor::zeros(&[2, 5], DType::F32, &Device::Cpu)?;
    let (wx, wh) = (Tensor::ones(&[4, 5], DType::F32, &Device::Cpu)?, Tensor::ones(&[5, 5], DType::F32, &Device::Cpu)?);
    assert_eq!(rnn(&x, &h0, &wx, &wh)?.shape(), &[2, 5]);
    let mut out = Tensor::zeros(&[3, 4], DType::F32, &Device::Cpu)?;
    fill(&mut out, &x.select(0, 0)?.select(0, 0)?, 3)?;
    assert_eq!(out.select(0, 2)?.to_vec::<f32>()?, vec![2.0; 4]);
    Ok(())
}
