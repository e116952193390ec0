//! Element types of tensors ([`DType`]): their sizes, names, and PyTorch's
//! promotion between them.
//!
//! The one dtype of the workspace: the IR's `to_dtype` arguments, the
//! kernel stage's C types (an `impl DType` block of the renderer) and the
//! runtime's tensors all use it. Its serialised form is the variant name
//! (`"F32"`), as the macro embeds it in graphs the runtime deserialises.

use serde::{Deserialize, Serialize};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit IEEE float (`torch.float32`).
    F32,
    /// 64-bit IEEE float (`torch.float64`).
    F64,
    /// 16-bit IEEE half (`torch.float16`); computes in f32.
    F16,
    /// bfloat16 (`torch.bfloat16`); computes in f32.
    BF16,
    /// 64-bit signed integer (`torch.int64`).
    I64,
    /// One byte per element, 0 or 1 (`torch.bool`).
    Bool,
}

/// The three categories PyTorch promotes between, in their order:
/// bool < integer < floating. An operand of a higher category decides the
/// result's dtype ([`DType::promote`]); a Python-number scalar takes part
/// only when its category is higher than the tensor's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// `Bool`.
    Bool,
    /// `I64`.
    Int,
    /// The floating dtypes.
    Float,
}

impl DType {
    /// All dtypes, in a stable order.
    pub const ALL: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];
    /// The floating dtypes.
    pub const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

    /// Whether this is a floating dtype (the dtypes that carry gradients).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// The dtype math on this one is done in (PyTorch's opmath type): f32
    /// for f16/bf16, else itself.
    pub fn opmath(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        }
    }

    /// The bytes of one element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Bool => 1,
        }
    }

    /// PyTorch's name, as in `torch.float32` (what `Display` writes).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }

    /// The variant name, as the user writes it after `DType::` (and as
    /// serde writes it).
    pub fn variant_name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I64 => "I64",
            DType::Bool => "Bool",
        }
    }

    /// Parses a variant name ([`DType::variant_name`]).
    pub fn from_variant_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.variant_name() == name)
    }

    /// The promotion category of this dtype.
    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::I64 => Category::Int,
            _ => Category::Float,
        }
    }

    /// `torch.promote_types` for two tensor dtypes of the same priority.
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        match (a.category(), b.category()) {
            (ca, cb) if ca != cb => {
                if ca > cb {
                    a
                } else {
                    b
                }
            }
            _ => match (a, b) {
                (F64, _) | (_, F64) => F64,
                // f16 with bf16, or either with f32, promotes to f32.
                _ => F32,
            },
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_follows_torch() {
        use DType::*;
        assert_eq!(DType::promote(F16, BF16), F32);
        assert_eq!(DType::promote(F16, F32), F32);
        assert_eq!(DType::promote(F32, F64), F64);
        assert_eq!(DType::promote(I64, F16), F16);
        assert_eq!(DType::promote(Bool, I64), I64);
    }

    #[test]
    fn serde_and_parsing_use_the_variant_name() {
        for d in DType::ALL {
            let json = serde_json::to_string(&d).expect("serialise");
            assert_eq!(json, format!("\"{}\"", d.variant_name()));
            assert_eq!(serde_json::from_str::<DType>(&json).expect("deserialise"), d);
            assert_eq!(DType::from_variant_name(d.variant_name()), Some(d));
        }
        assert_eq!(DType::from_variant_name("float32"), None);
        assert_eq!(DType::F32.to_string(), "float32");
    }
}
