//! Dtype views (`Tensor::view_dtype`, PyTorch's `x.view(dtype)`): one
//! storage's bytes read as another dtype. Bits, layouts and PyTorch's
//! checks; writes through either side seen by the other, with one version
//! counter; ops mixing a storage and its dtype views (one lock, no
//! deadlock); and compiled calls, a dtype view alone and arguments over
//! one storage as different dtypes (a synthetic base of the storage's
//! bytes), with eager's results.

use aot_runtime::prelude::*;
use aot_runtime::testing::num_specializations;
use half::{bf16, f16};

fn cpu() -> Device {
    Device::Cpu
}

#[test]
fn a_view_reads_the_same_bits() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, -2.5, 3.0e-3], &[3], &cpu())?;
    let h = x.view_dtype(DType::F16)?;
    assert_eq!(h.shape(), &[6]);
    let bits: Vec<u16> = [1.0f32, -2.5, 3.0e-3]
        .iter()
        .flat_map(|v| {
            let b = v.to_bits();
            [(b & 0xffff) as u16, (b >> 16) as u16]
        })
        .collect();
    assert_eq!(h.to_vec::<f16>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), bits);
    let d = Tensor::from_vec(vec![1.5f64, -0.0], &[2], &cpu())?;
    assert_eq!(d.view_dtype(DType::I64)?.to_vec::<i64>()?, vec![1.5f64.to_bits() as i64, (-0.0f64).to_bits() as i64]);
    let b = Tensor::from_vec(vec![f16::from_f32(1.0), f16::from_f32(-2.0)], &[2], &cpu())?.view_dtype(DType::BF16)?;
    assert_eq!(b.to_vec::<bf16>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), vec![0x3c00, 0xc000]);
    // Viewing as its own dtype is the tensor itself; back to the root's
    // dtype is the root's bytes again.
    assert!(x.view_dtype(DType::F32)?.same_tensor(&x));
    assert_eq!(h.view_dtype(DType::F32)?.to_vec::<f32>()?, vec![1.0, -2.5, 3.0e-3]);
    Ok(())
}

#[test]
fn writes_go_both_ways_with_one_version_counter() -> Result<()> {
    let x = Tensor::zeros(&[2], DType::F32, &cpu())?;
    let h = x.view_dtype(DType::F16)?;
    assert!(x.shares_storage_with(&h) && h.shares_storage_with(&x));
    let v0 = x.version();
    h.narrow(0, 1, 1)?.fill_(1.0)?; // the high half of x[0]
    assert_eq!(x.to_vec::<f32>()?, vec![f32::from_bits(0x3c00_0000), 0.0]);
    assert!(x.version() > v0 && x.version() == h.version());
    x.fill_(1.0)?; // 0x3f800000: halves 0x0000 and 0x3f80
    assert_eq!(h.to_vec::<f16>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), vec![0, 0x3f80, 0, 0x3f80]);
    // Out-of-place ops read the current bytes.
    let y = h.add(1.0)?;
    assert_eq!(y.dtype(), DType::F16);
    assert!(!y.shares_storage_with(&x));
    Ok(())
}

#[test]
fn layouts_follow_pytorch() -> Result<()> {
    let x = Tensor::zeros(&[2, 4], DType::F16, &cpu())?;
    let f = x.view_dtype(DType::F32)?;
    assert_eq!((f.shape().to_vec(), f.stride().to_vec()), (vec![2, 2], vec![2, 1]));
    let row = x.narrow(0, 1, 1)?.view_dtype(DType::F32)?;
    assert_eq!((row.shape().to_vec(), row.storage_offset()), (vec![1, 2], 2));
    let wide = Tensor::zeros(&[3, 2], DType::F64, &cpu())?.view_dtype(DType::F16)?;
    assert_eq!((wide.shape().to_vec(), wide.stride().to_vec()), (vec![3, 8], vec![8, 1]));
    // PyTorch's refusals, each a shape error naming the op.
    let refused = |r: Result<Tensor>, what: &str| match r {
        Err(AotError::ShapeMismatch { op, msg }) => assert!(op == "view_dtype" && msg.contains(what), "{msg}"),
        other => panic!("expected a shape error with `{what}`, got {other:?}"),
    };
    refused(x.t()?.view_dtype(DType::F32), "stride(-1) must be 1");
    refused(x.narrow(1, 0, 3)?.view_dtype(DType::F32), "size(-1) must be divisible by 2");
    refused(x.narrow(1, 1, 2)?.view_dtype(DType::F32), "storage_offset() must be divisible by 2");
    refused(x.select(1, 0)?.select(0, 0)?.view_dtype(DType::F32), "dim() cannot be 0");
    assert!(matches!(x.view_dtype(DType::Bool), Err(AotError::DTypeMismatch { .. })));
    Ok(())
}

#[test]
fn ops_mixing_a_storage_and_its_views_lock_once() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &cpu())?;
    let (a, b) = (x.view_dtype(DType::F16)?, x.view_dtype(DType::F16)?);
    // Two storages over one buffer, read together.
    assert_eq!(a.mul(&b)?.to_vec::<f32>()?.len(), 4);
    assert_eq!(a.where_(&a.eq(&b)?, &b)?.to_vec::<f16>()?, a.to_vec::<f16>()?);
    // Written from a view of its own buffer: read out first, as eager
    // does for any overlapping copy.
    let bf = a.view_dtype(DType::BF16)?;
    let want: Vec<bf16> = a.to_vec::<f16>()?.iter().map(|v| bf16::from_f32(v.to_f32())).collect();
    bf.copy_(&a)?;
    assert_eq!(bf.to_vec::<bf16>()?, want);
    a.add_(&b)?;
    Ok(())
}

#[aot_fn]
fn scale_in_place(x: &mut Tensor, s: f64) {
    x.mul_(s);
}

#[aot_fn]
fn kv_write(cache: &mut Tensor, bits: &Tensor, k: &Tensor) -> Tensor {
    cache.narrow(0, 0, 2).copy_(k);
    bits.sum()
}

#[test]
fn compiled_calls_on_dtype_views() -> Result<()> {
    // One dtype view alone is an ordinary argument: compiled.
    let root = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4], &cpu())?;
    let mut h = root.view_dtype(DType::F16)?;
    let want = h.to_vec::<f16>()?.iter().map(|v| f16::from_f32(v.to_f32() * 2.0)).collect::<Vec<_>>();
    assert_eq!(scale_in_place::compiled().call_path(&[Arg::from(&h), Arg::from(2.0)])?, "inference");
    scale_in_place(&mut h, 2.0)?;
    assert_eq!(root.view_dtype(DType::F16)?.to_vec::<f16>()?, want);
    assert!(num_specializations(scale_in_place::compiled()) >= 1);

    // A KV cache as f16 and its bytes as f64, passed together: one input
    // group whose base is the storage's bytes, each argument regenerated as
    // a view of its dtype; eager's results.
    let run = |compiled: bool| -> Result<(Vec<f64>, Vec<f32>)> {
        let raw = Tensor::zeros(&[8], DType::F32, &cpu())?;
        let mut cache = raw.view_dtype(DType::F16)?.view(&[4, 4])?;
        let bits = raw.view_dtype(DType::F64)?;
        let k = Tensor::from_vec((0..8).map(|i| f16::from_f32(i as f32 + 0.5)).collect(), &[2, 4], &cpu())?;
        let out = if compiled {
            let path = kv_write::compiled().call_path(&[Arg::from(&cache), Arg::from(&bits), Arg::from(&k)])?;
            assert_eq!(path, "inference");
            // PyTorch refuses such calls; ours reports one synthetic base.
            let report = kv_write::compiled().explain(&[Arg::from(&cache), Arg::from(&bits), Arg::from(&k)])?;
            assert!(report.synthetic_base_info.is_some(), "{report:?}");
            kv_write(&mut cache, &bits, &k)?
        } else {
            kv_write::compiled().run_eager(&[Arg::from(&cache), Arg::from(&bits), Arg::from(&k)])?.remove(0)
        };
        Ok((out.to_vec::<f64>()?, raw.to_vec::<f32>()?))
    };
    let (got, want) = (run(true)?, run(false)?);
    assert_eq!(got.1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.1.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert_eq!(got.0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.0.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert!(got.1.iter().any(|&v| v != 0.0), "the cache write reached the shared bytes");
    Ok(())
}

#[aot_fn]
fn halves_then_view(h: &mut Tensor, whole: &Tensor) -> (Tensor, Tensor) {
    h.add_(1.0);
    (whole.narrow(0, 1, 2), whole * 2.0)
}

/// A write through the f16 view is seen by the f32 argument over the same
/// bytes, in the outputs computed after it and in the output that is a
/// view of it (regenerated as an f32 view of the group's bytes).
#[test]
fn cross_dtype_group_outputs_and_views() -> Result<()> {
    let run = |compiled: bool| -> Result<Vec<Vec<u32>>> {
        let whole = Tensor::from_vec(vec![1.0f32, 2.0, -3.0, 0.25], &[4], &cpu())?;
        let mut h = whole.view_dtype(DType::F16)?.narrow(0, 2, 4)?;
        let outs = if compiled {
            let (a, b) = halves_then_view(&mut h, &whole)?;
            assert!(a.shares_storage_with(&whole) && a.dtype() == DType::F32);
            vec![a, b]
        } else {
            halves_then_view::compiled().run_eager(&[Arg::from(&h), Arg::from(&whole)])?
        };
        let bits = |t: &Tensor| -> Result<Vec<u32>> { Ok(t.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect()) };
        Ok(vec![bits(&outs[0])?, bits(&outs[1])?, bits(&whole)?])
    };
    assert_eq!(run(true)?, run(false)?);
    Ok(())
}

/// A call that records gradients over such a group (written, so the
/// arguments form one input group) runs the eager reference: a dtype view
/// has no gradient, so the group has no differentiable base.
#[test]
fn cross_dtype_training_runs_the_eager_reference() -> Result<()> {
    let leaf = Tensor::from_vec(vec![1.0f32, 2.0, -3.0, 0.25], &[4], &cpu())?.requires_grad_(true)?;
    let w = leaf.mul(1.0)?;
    let mut h = w.view_dtype(DType::F16)?;
    assert!(!h.requires_grad());
    let path = scale_both::compiled().call_path(&[Arg::from(&w), Arg::from(&h)])?;
    assert!(path.starts_with("eager reference"), "{path}");
    let y = scale_both(&w, &mut h)?;
    y.backward()?;
    assert_eq!(leaf.grad().expect("a gradient").to_vec::<f32>()?, vec![2.0; 4]);
    Ok(())
}

#[aot_fn]
fn scale_both(w: &Tensor, h: &mut Tensor) -> Tensor {
    h.mul_(1.0);
    (w * 2.0).sum()
}

/// The differential tests' findings, kept: a write through one argument
/// read back through another of a different dtype; an `as_strided` view of
/// a dtype-view argument (its chain keeps the argument's dtype); a call
/// whose `reshape` aliases otherwise than assumed, which reruns on shadows
/// (one copy of the buffer, each argument a view of it as its own dtype).
#[aot_fn]
fn write_then_read_other_dtype(a: &Tensor, b: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    let r = a + 2.0;
    b.zero_();
    b.add_(2.0);
    let q = a.select(0, -3);
    b.add_(2.0);
    (r, q, a.neg())
}

#[aot_fn]
fn strided_view_of_dtype_view(a: &Tensor, c: &mut Tensor) -> Tensor {
    let v = c.as_strided(&[1, 1], &[1, 1], 0);
    c.relu_();
    v.div_(2.0);
    let x = a + 2.0;
    v.zero_();
    x
}

#[aot_fn]
fn reshape_surprise_over_dtype_views(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    let r = b.reshape(&[1]);
    r.div_(2.0);
    let t4 = a.t();
    r.copy_(&r);
    let r5 = t4.reshape(&[1]);
    r.transpose_(0, 0);
    a.transpose_(0, 0);
    a.zero_();
    r5 * 1.0
}

/// Runs `f` compiled and eagerly on fresh (a, b) from `mk`; the outputs
/// and both arguments agree bit for bit.
fn agrees(f: &aot_runtime::CompiledFn, mk: &dyn Fn() -> Result<(Tensor, Tensor)>) -> Result<()> {
    let bits = |t: &Tensor| -> Result<Vec<u64>> { Ok(t.to_dtype(DType::F64)?.to_vec::<f64>()?.iter().map(|v| v.to_bits()).collect()) };
    let (a, b) = mk()?;
    let got = f.__call(&[Arg::from(&a), Arg::from(&b)])?;
    let (ea, eb) = mk()?;
    let want = f.run_eager(&[Arg::from(&ea), Arg::from(&eb)])?;
    assert_eq!((bits(&a)?, bits(&b)?), (bits(&ea)?, bits(&eb)?), "{}: arguments", f.name());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(bits(g)?, bits(w)?, "{}: outputs", f.name());
    }
    Ok(())
}

#[test]
fn differential_findings_over_dtype_views() -> Result<()> {
    let f64s = |n: usize, shape: &[usize]| {
        Tensor::from_vec((0..n).map(|i| 1.7 * (0.37 * i as f64 + 0.1).sin()).collect::<Vec<f64>>(), shape, &cpu())
    };
    agrees(write_then_read_other_dtype::compiled(), &|| {
        let s1 = f64s(2, &[1, 2])?;
        Ok((s1.storage_as_1d().view_dtype(DType::F32)?.as_strided(&[3, 1], &[1, 1], 0)?, s1))
    })?;
    agrees(strided_view_of_dtype_view::compiled(), &|| {
        let s0 = f64s(6, &[1, 3, 2])?;
        Ok((s0.clone(), s0.storage_as_1d().view_dtype(DType::F32)?.as_strided(&[1, 3, 2], &[6, 2, 1], 0)?))
    })?;
    agrees(reshape_surprise_over_dtype_views::compiled(), &|| {
        let s1 = f64s(1, &[1, 1])?;
        Ok((s1.storage_as_1d().view_dtype(DType::F32)?.as_strided(&[1, 1], &[1, 1], 0)?, s1))
    })?;
    Ok(())
}
