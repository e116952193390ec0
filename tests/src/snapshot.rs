//! Bit-exact snapshots of tensors (to prove a call left its inputs alone),
//! deep copies of argument sets that keep their alias structure, and the
//! tolerant value comparison of the differential tests.

use aot_runtime::{DType, Device, Result, Tensor};
use std::collections::HashMap;

/// Everything observable about one tensor object, values as bits.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSnapshot {
    pub shape: Vec<usize>,
    pub stride: Vec<usize>,
    pub offset: usize,
    pub dtype: DType,
    pub version: u64,
    pub requires_grad: bool,
    pub is_leaf: bool,
    /// The tensor's values (row-major), widened to f64, as bits.
    pub values: Vec<u64>,
    /// The whole storage's values, widened to f64, as bits.
    pub storage: Vec<u64>,
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>().map(|v| v.into_iter().map(f64::to_bits).collect()).unwrap_or_default()
}

impl TensorSnapshot {
    pub fn take(t: &Tensor) -> TensorSnapshot {
        TensorSnapshot {
            shape: t.shape(),
            stride: t.stride(),
            offset: t.storage_offset(),
            dtype: t.dtype(),
            version: t.version(),
            requires_grad: t.requires_grad(),
            is_leaf: t.is_leaf(),
            values: bits(t),
            storage: bits(&t.storage_as_1d()),
        }
    }

    /// What differs from `before`, one phrase per field; empty when identical.
    pub fn diff(&self, before: &TensorSnapshot) -> Vec<String> {
        let mut d = vec![];
        let mut field = |name: &str, same: bool, got: String, want: String| {
            if !same {
                d.push(format!("{name}: {want} -> {got}"));
            }
        };
        field("shape", self.shape == before.shape, format!("{:?}", self.shape), format!("{:?}", before.shape));
        field("stride", self.stride == before.stride, format!("{:?}", self.stride), format!("{:?}", before.stride));
        field("storage_offset", self.offset == before.offset, self.offset.to_string(), before.offset.to_string());
        field("dtype", self.dtype == before.dtype, format!("{:?}", self.dtype), format!("{:?}", before.dtype));
        field("version", self.version == before.version, self.version.to_string(), before.version.to_string());
        field(
            "requires_grad",
            self.requires_grad == before.requires_grad,
            self.requires_grad.to_string(),
            before.requires_grad.to_string(),
        );
        field("is_leaf", self.is_leaf == before.is_leaf, self.is_leaf.to_string(), before.is_leaf.to_string());
        let f = |v: &[u64]| format!("{:?}", v.iter().map(|b| f64::from_bits(*b)).collect::<Vec<_>>());
        field("values", self.values == before.values, f(&self.values), f(&before.values));
        field("storage", self.storage == before.storage, f(&self.storage), f(&before.storage));
        d
    }
}

/// Snapshots of the tensors of an argument list (`None` for scalars).
pub fn snapshot_all(ts: &[Option<Tensor>]) -> Vec<Option<TensorSnapshot>> {
    ts.iter().map(|t| t.as_ref().map(TensorSnapshot::take)).collect()
}

/// Deep copies of `ts` with the same values, sizes, strides and offsets, and
/// the same sharing: arguments that are the same tensor stay one tensor, and
/// arguments that share a storage share one fresh storage. A tensor that
/// covers its whole storage contiguously becomes that storage's base; every
/// other tensor is an `as_strided` view of its storage's (new) base.
/// Autograd state is not copied.
pub fn clone_preserving_aliasing(ts: &[Tensor]) -> Result<Vec<Tensor>> {
    let mut bases: HashMap<usize, Tensor> = HashMap::new();
    // First the tensors that can be bases, so views of them come from them.
    for t in ts {
        let whole = t.storage_offset() == 0 && t.is_contiguous() && t.numel() == t.storage_len();
        if whole && !bases.contains_key(&t.storage_id()) {
            let fresh = fresh_like(&t.storage_as_1d(), &t.shape())?;
            bases.insert(t.storage_id(), fresh);
        }
    }
    let mut out: Vec<Tensor> = Vec::with_capacity(ts.len());
    for (k, t) in ts.iter().enumerate() {
        if let Some(j) = ts[..k].iter().position(|u| u.same_tensor(t)) {
            out.push(out[j].clone());
            continue;
        }
        let base = match bases.get(&t.storage_id()) {
            Some(b) => b.clone(),
            None => {
                let b = fresh_like(&t.storage_as_1d(), &[t.storage_len()])?;
                bases.insert(t.storage_id(), b.clone());
                b
            }
        };
        let whole = t.storage_offset() == 0 && t.is_contiguous() && t.numel() == t.storage_len() && base.shape() == t.shape();
        let taken = out.iter().any(|o| o.same_tensor(&base));
        out.push(if whole && !taken { base } else { base.as_strided(&t.shape(), &t.stride(), t.storage_offset())? });
    }
    Ok(out)
}

/// A plain (non-view) tensor of `shape` holding `flat`'s values in `flat`'s dtype.
fn fresh_like(flat: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let dev = Device::Cpu;
    Ok(match flat.dtype() {
        DType::F32 => Tensor::from_vec(flat.to_vec::<f32>()?, shape, &dev)?,
        DType::F64 => Tensor::from_vec(flat.to_vec::<f64>()?, shape, &dev)?,
        DType::I64 => Tensor::from_vec(flat.to_vec::<i64>()?, shape, &dev)?,
        // f16, bf16 and bool go through f64 exactly.
        other => Tensor::from_vec(flat.to_vec::<f64>()?, shape, &dev)?.to_dtype(other)?,
    })
}

/// Elementwise closeness for the differential tests: `|a - b| <= tol * (1 +
/// |b|)`, NaN equal to NaN, and two values beyond `1e30` of the same sign
/// equal (an `exp` chain that overflows in one evaluation order and lands
/// just below the limit in another).
pub fn values_close(got: &[f64], want: &[f64], tol: f64) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(&a, &b)| {
            if a == b || (a.is_nan() && b.is_nan()) {
                true
            } else if a.is_nan() || b.is_nan() || a.abs() > 1e30 || b.abs() > 1e30 {
                a.abs() > 1e30 && b.abs() > 1e30 && a.signum() == b.signum()
            } else {
                (a - b).abs() <= tol * (1.0 + b.abs())
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_keep_the_alias_structure() -> Result<()> {
        let root = Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<f32>>(), &[3, 4], &Device::Cpu)?;
        let row = root.narrow(0, 1, 2)?;
        let col = root.select(1, 2)?;
        let other = Tensor::ones(&[2], DType::F64, &Device::Cpu)?;
        let ts = vec![root.clone(), row.clone(), col.clone(), root.clone(), other.clone()];
        let cl = clone_preserving_aliasing(&ts)?;
        for (a, b) in ts.iter().zip(&cl) {
            assert_eq!(a.shape(), b.shape());
            assert_eq!(a.stride(), b.stride());
            assert_eq!(a.storage_offset(), b.storage_offset());
            assert_eq!(a.to_vec::<f64>()?, b.to_vec::<f64>()?);
            assert!(!a.shares_storage_with(b));
        }
        assert!(cl[0].same_tensor(&cl[3]) && cl[0].shares_storage_with(&cl[2]) && !cl[0].shares_storage_with(&cl[4]));
        assert!(cl[1].view_base().is_some() && !cl[1].same_tensor(&cl[0]));
        assert_eq!(cl[4].dtype(), DType::F64);
        Ok(())
    }

    #[test]
    fn closeness() {
        assert!(values_close(&[1.0, f64::NAN, f64::INFINITY], &[1.0 + 1e-12, f64::NAN, 3e38], 1e-9));
        assert!(!values_close(&[f64::NAN], &[1.0], 1e-9));
        assert!(!values_close(&[f64::INFINITY], &[1.0], 1e-9));
        assert!(!values_close(&[1.0], &[1.1], 1e-9));
        assert!(!values_close(&[f64::INFINITY], &[f64::NEG_INFINITY], 1e-9));
    }
}
