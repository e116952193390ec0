//! `Tensor::arange` inside `#[aot_fn]` bodies (issue 16).
use aot_runtime::prelude::*;
use aot_runtime::Arg;

#[aot_fn]
fn positions(x: &Tensor) -> Tensor {
    Tensor::arange(0, x.size(1))
}

#[test]
fn smoke() -> Result<()> {
    let x = Tensor::zeros(&[2, 5], DType::F32, &Device::Cpu)?;
    let p = positions(&x)?;
    assert_eq!(p.to_vec::<i64>()?, vec![0, 1, 2, 3, 4]);
    println!("{}", positions::compiled().graph());
    println!("{}", serde_json::to_string(&positions::compiled().explain(&[Arg::from(&x)])?).unwrap());
    Ok(())
}
