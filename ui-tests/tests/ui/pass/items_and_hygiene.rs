//! Attributes, doc comments and visibility are kept; the generated items
//! need nothing in scope but the crate; `NAME::compiled()` lives in the type
//! namespace beside the function; missing docs and other lints stay quiet.
#![deny(warnings, missing_docs)]
//! A crate documenting its items.

mod model {
    /// Doubles the input in place and returns it.
    #[aot_runtime::aot_fn]
    #[inline]
    pub fn double_(x: &mut aot_runtime::Tensor) -> aot_runtime::Tensor {
        x.mul_(2.0);
        x
    }

    /// Visible in the crate only.
    #[aot_runtime::aot_fn]
    pub(crate) fn halves(x: &aot_runtime::Tensor, mut scale: f64) -> (aot_runtime::Tensor, aot_runtime::Tensor) {
        scale = scale * 0.5;
        (x * scale, x / 2)
    }

    /// Compiled only for this cfg.
    #[cfg(not(any()))]
    #[aot_runtime::aot_fn]
    pub fn nothing(x: &aot_runtime::Tensor) {
        let _y = x.sin();
    }
}

/// Parameter names that look like the generated code's own names.
#[aot_runtime::aot_fn]
fn clash(__aot_outputs: &aot_runtime::Tensor, compiled: &aot_runtime::Tensor) -> aot_runtime::Tensor {
    __aot_outputs + compiled
}

fn main() -> aot_runtime::Result<()> {
    use aot_runtime::{Arg, DType, Device, Tensor};
    let mut x = Tensor::ones(&[3], DType::F32, &Device::Cpu)?;
    let y = model::double_(&mut x)?;
    assert!(y.same_tensor(&x), "an input returned is that very tensor");
    let (h, q) = model::halves(&x, 1.0)?;
    assert_eq!(h.to_vec::<f32>()?, q.to_vec::<f32>()?);
    model::nothing(&x)?;
    assert_eq!(clash(&x, &x)?.to_vec::<f32>()?, vec![4.0; 3]);

    let report = model::double_::compiled().explain(&[Arg::from(&x)])?;
    assert!(report.fw_metadata.input_info[0].mutates_data);
    assert!(report.dedupe.is_none());
    let err = model::halves::compiled().explain(&[Arg::from(&x)]).unwrap_err();
    assert!(err.to_string().contains("expected 2 arguments"), "{err}");
    Ok(())
}
