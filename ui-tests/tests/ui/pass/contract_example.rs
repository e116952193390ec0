//! The contract's example, used exactly as documented, with warnings denied
//! to prove the generated code is warning-free.
#![deny(warnings)]

use aot_runtime::prelude::*;

#[aot_fn]
fn f(a: &mut Tensor, b: &Tensor, lr: f64) -> (Tensor, Tensor) {
    a.mul_(2.0);
    let c = a + b * lr;
    (c, a.view(&[-1]))
}

fn main() -> Result<()> {
    let dev = Device::Cpu;
    let mut a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev)?;
    let b = Tensor::ones(&[2, 2], DType::F32, &dev)?;
    let (c, v) = f(&mut a, &b, 0.1)?;
    assert_eq!(a.to_vec::<f32>()?, vec![2.0, 4.0, 6.0, 8.0]);
    assert_eq!(c.to_vec::<f32>()?, vec![2.1, 4.1, 6.1, 8.1]);
    assert_eq!(v.shape(), vec![4]);
    assert!(v.shares_storage_with(&a));
    let listing = f::compiled().graph().to_string();
    assert!(listing.contains("mul_(%0, 2.0)"), "{listing}");
    Ok(())
}
