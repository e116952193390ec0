use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Block {
    w: Tensor,
}

impl Block {
    #[aot_fn]
    fn project(&self, x: &Tensor) -> Tensor {
        x.matmul(&self.w)
    }

    #[aot_fn]
    fn decay_(&mut self, s: f64) {
        self.w.mul_(s);
    }

    #[aot_fn]
    fn step(&mut self, x: &Tensor) -> Tensor {
        self.decay_(0.5);
        self.project(x).relu()
    }
}

#[derive(TensorTree)]
struct Model {
    blk: Block,
}

impl Model {
    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        Block::project(&self.blk, x).tanh()
    }
}

fn main() -> Result<()> {
    let mut b = Block { w: Tensor::ones(&[2, 2], DType::F32, &Device::Cpu)? };
    let x = Tensor::ones(&[1, 2], DType::F32, &Device::Cpu)?;
    assert_eq!(b.step(&x)?.to_vec::<f32>()?, vec![1.0, 1.0]);
    let m = Model { blk: b };
    // Compiled equals eager bit for bit; both are within a few ulp of libm.
    let y = m.forward(&x)?.to_vec::<f32>()?;
    assert_eq!(y, Tensor::ones(&[2], DType::F32, &Device::Cpu)?.tanh()?.to_vec::<f32>()?);
    assert!(y.iter().all(|v| (v - 1.0f32.tanh()).abs() < 1e-6), "{y:?}");
    Ok(())
}
