//! Unary elementwise ops and clamp. Results take PyTorch's layout for one
//! operand (`elementwise_layout`).

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::elementwise_layout;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, SavedTensor};
use aot_ir::OpKind;

/// Ops that keep integer dtypes; the rest promote integers to f32 like PyTorch.
fn keeps_int(op: OpKind) -> bool {
    matches!(op, OpKind::Neg | OpKind::Abs | OpKind::Square | OpKind::Relu)
}

pub(crate) fn unary(op: OpKind, x: &Tensor) -> Result<Tensor> {
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
            OpKind::Neg => BackwardOp::ScalarAffine { scale: -1.0, a_dtype: input.dtype() },
            OpKind::Exp => BackwardOp::Exp { out: o },
            OpKind::Log => BackwardOp::Log { a },
            OpKind::Sqrt => BackwardOp::Sqrt { out: o },
            OpKind::Rsqrt => BackwardOp::Rsqrt { out: o },
            OpKind::Abs => BackwardOp::Abs { a },
            OpKind::Sin => BackwardOp::Sin { a },
            OpKind::Cos => BackwardOp::Cos { a },
            OpKind::Tanh => BackwardOp::Tanh { out: o },
            OpKind::Sigmoid => BackwardOp::Sigmoid { out: o },
            OpKind::Relu => BackwardOp::Relu { out: o },
            OpKind::Gelu => BackwardOp::Gelu { a },
            OpKind::Silu => BackwardOp::Silu { a },
            OpKind::Reciprocal => BackwardOp::Reciprocal { out: o },
            OpKind::Square => BackwardOp::Square { a },
            OpKind::Log1p => BackwardOp::table(aot_ir::OpKind::Log1p, Some(a), None),
            OpKind::Expm1 => BackwardOp::table(aot_ir::OpKind::Expm1, None, Some(o)),
            other => return Err(AotError::internal(name, format!("`{other}` is not a unary elementwise op"))),
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
                    unary(OpKind::$op, self)
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
