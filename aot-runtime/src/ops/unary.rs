//! Unary elementwise ops and clamp. Results take PyTorch's layout for one
//! operand (`elementwise_layout`).

use crate::backend::UnaryOp;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::elementwise_layout;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, SavedTensor};

/// Ops that keep integer dtypes; the rest promote integers to f32 like PyTorch.
fn keeps_int(op: UnaryOp) -> bool {
    matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Square | UnaryOp::Relu)
}

pub(crate) fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let name = op.name();
    let input = match x.dtype() {
        DType::Bool => {
            return Err(AotError::dtype(name, format!("{name} is not supported for bool tensors")));
        }
        DType::I64 if !keeps_int(op) => x.to_dtype(DType::F32)?,
        _ => x.clone(),
    };
    let l = input.layout();
    let ol = elementwise_layout(&l.shape, &[&l]);
    let out = Tensor::from_storage(input.storage().unary(op, &l, &ol)?, ol);
    record(&out, &[Some(&input)], || {
        let a = SavedTensor::save(&input);
        let o = SavedTensor::save(&out);
        Ok(match op {
            UnaryOp::Neg => BackwardOp::ScalarAffine { scale: -1.0, a_dtype: input.dtype() },
            UnaryOp::Exp => BackwardOp::Exp { out: o },
            UnaryOp::Log => BackwardOp::Log { a },
            UnaryOp::Sqrt => BackwardOp::Sqrt { out: o },
            UnaryOp::Rsqrt => BackwardOp::Rsqrt { out: o },
            UnaryOp::Abs => BackwardOp::Abs { a },
            UnaryOp::Sin => BackwardOp::Sin { a },
            UnaryOp::Cos => BackwardOp::Cos { a },
            UnaryOp::Tanh => BackwardOp::Tanh { out: o },
            UnaryOp::Sigmoid => BackwardOp::Sigmoid { out: o },
            UnaryOp::Relu => BackwardOp::Relu { out: o },
            UnaryOp::Gelu => BackwardOp::Gelu { a },
            UnaryOp::Silu => BackwardOp::Silu { a },
            UnaryOp::Reciprocal => BackwardOp::Reciprocal { out: o },
            UnaryOp::Square => BackwardOp::Square { a },
            UnaryOp::Log1p => BackwardOp::table(aot_ir::OpKind::Log1p, Some(a), None),
            UnaryOp::Expm1 => BackwardOp::table(aot_ir::OpKind::Expm1, None, Some(o)),
        })
    })?;
    Ok(out)
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("`torch.", stringify!($name), "`, elementwise.")]
                pub fn $name(&self) -> Result<Tensor> {
                    unary(UnaryOp::$op, self)
                }
            )*
        }
    };
}
unary_methods!(
    neg => Neg, exp => Exp, log => Log, sqrt => Sqrt, rsqrt => Rsqrt, abs => Abs,
    sin => Sin, cos => Cos, tanh => Tanh, sigmoid => Sigmoid, relu => Relu,
    gelu => Gelu, silu => Silu, reciprocal => Reciprocal, square => Square,
    log1p => Log1p, expm1 => Expm1,
);

impl Tensor {
    /// `torch.clamp(self, min, max)`; either bound may be absent.
    pub fn clamp_opt(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        let name = "clamp";
        if self.dtype() == DType::Bool {
            return Err(AotError::dtype(name, "clamp is not supported for bool tensors"));
        }
        if min.is_none() && max.is_none() {
            return Err(AotError::unsupported(name, "At least one of 'min' or 'max' must not be None"));
        }
        // float bounds promote an integer tensor to the default float dtype
        if !self.dtype().is_float() {
            return self.to_dtype(DType::F32)?.clamp_opt(min, max);
        }
        let l = self.layout();
        let ol = elementwise_layout(&l.shape, &[&l]);
        let out = Tensor::from_storage(self.storage().clamp(name, &l, min, max, &ol)?, ol);
        record(&out, &[Some(self)], || Ok(BackwardOp::Clamp { a: SavedTensor::save(self), min, max }))?;
        Ok(out)
    }
    /// `torch.clamp(self, min, max)`.
    pub fn clamp(&self, min: f64, max: f64) -> Result<Tensor> {
        self.clamp_opt(Some(min), Some(max))
    }
}
