//! PyTorch's aliasing semantics: writes through a view are visible through
//! every alias of the storage, PyTorch's memory-overlap refusals, and the
//! version counter.

mod common;

use aot_runtime::prelude::*;
use common::*;

#[test]
fn writes_through_views_are_visible_in_every_alias() -> Result<()> {
    for dt in DType::FLOATS {
        let x = tdt(&(0..12).map(|v| v as f64).collect::<Vec<_>>(), &[3, 4], dt);
        let handle = x.clone();
        let row = x.select(0, 1)?;
        let col = x.select(1, -1)?;
        let tr = x.t()?;
        let flat = x.view(&[-1])?;
        let diag = x.narrow(1, 0, 3)?.diagonal()?;

        row.mul_(10.0)?; // x[1, :] *= 10
        assert_eq!(vals(&x), vec![0.0, 1.0, 2.0, 3.0, 40.0, 50.0, 60.0, 70.0, 8.0, 9.0, 10.0, 11.0]);
        assert_eq!(vals(&handle), vals(&x));
        assert_eq!(vals(&col), vec![3.0, 70.0, 11.0]);
        assert_eq!(vals(&tr)[..3], [0.0, 40.0, 8.0]);
        assert_eq!(vals(&flat)[4..8], [40.0, 50.0, 60.0, 70.0]);
        assert_eq!(vals(&diag), vec![0.0, 50.0, 10.0]);

        diag.fill_(-1.0)?;
        assert_eq!(vals(&x), vec![-1.0, 1.0, 2.0, 3.0, 40.0, -1.0, 60.0, 70.0, 8.0, 9.0, -1.0, 11.0]);
        assert_eq!(vals(&row), vec![40.0, -1.0, 60.0, 70.0]);

        tr.select(0, 3)?.zero_()?; // column 3
        assert_eq!(vals(&col), vec![0.0, 0.0, 0.0]);
        flat.narrow(0, 0, 2)?.add_(&tdt(&[100.0, 200.0], &[2], dt))?;
        assert_eq!(vals(&x)[..2], [99.0, 201.0]);
        assert_eq!(vals(&tr)[..2], [99.0, 40.0]);
        // A view of a view writes the root storage.
        let vv = x.narrow(0, 1, 2)?.narrow(1, 1, 2)?.t()?;
        vv.copy_(&tdt(&[5.0, 6.0, 7.0, 8.0], &[2, 2], dt))?;
        assert_eq!(vals(&x.narrow(0, 1, 2)?.narrow(1, 1, 2)?), vec![5.0, 7.0, 6.0, 8.0]);
        // detach() shares storage too.
        let d = x.detach()?;
        d.select(0, 0)?.fill_(3.0)?;
        assert_eq!(vals(&x)[..4], [3.0; 4]);
        // A copy does not.
        let c = x.copy()?;
        c.fill_(0.0)?;
        assert_eq!(vals(&x)[..4], [3.0; 4]);
    }
    Ok(())
}

#[test]
fn as_strided_and_expand_views_alias() -> Result<()> {
    let x = iota(&[6]);
    let a = x.as_strided(&[2, 2], &[1, 2], 1)?; // [[1,3],[2,4]]
    assert_eq!(vals(&a), vec![1.0, 3.0, 2.0, 4.0]);
    a.select(0, 0)?.fill_(-5.0)?;
    assert_eq!(vals(&x), vec![0.0, -5.0, 2.0, -5.0, 4.0, 5.0]);
    assert_eq!(vals(&a), vec![-5.0, -5.0, 2.0, 4.0]);
    let e = x.narrow(0, 4, 1)?.expand(&[3])?;
    x.narrow(0, 4, 1)?.fill_(9.0)?;
    assert_eq!(vals(&e), vec![9.0; 3]);
    Ok(())
}

#[test]
fn writing_into_an_expanded_tensor_is_refused() -> Result<()> {
    let x = t64(&[1.0, 2.0], &[2, 1]);
    let e = x.expand(&[2, 3])?;
    let msg = "more than one element of the written-to tensor refers to a single memory location";
    assert_err(e.add_(1.0), &["add_", msg]);
    assert_err(e.add_(&iota(&[2, 3])), &["add_", msg]);
    assert_err(e.mul_(2.0), &["mul_", msg]);
    assert_err(e.sub_(2.0), &["sub_", msg]);
    assert_err(e.div_(2.0), &["div_", msg]);
    assert_err(e.copy_(&iota(&[2, 3])), &["copy_", msg]);
    assert_err(e.exp_(), &["exp_", msg]);
    assert_err(e.neg_(), &["neg_", msg]);
    assert_err(e.relu_(), &["relu_", msg]);
    assert_err(e.sigmoid_(), &["sigmoid_", msg]);
    assert_err(e.clamp_(0.0, 1.0), &["clamp_", msg]);
    assert_eq!(vals(&x), vec![1.0, 2.0], "a refused write changes nothing");
    let v0 = x.version();
    let _ = e.add_(1.0);
    assert_eq!(x.version(), v0, "a refused write does not bump the version");
    // A stride-0 dim of size 1 is fine.
    let ok = x.expand(&[2, 1])?;
    ok.add_(1.0)?;
    assert_eq!(vals(&x), vec![2.0, 3.0]);
    // as_strided with a zero stride is refused too.
    let z = iota(&[3]).as_strided(&[2], &[0], 1)?;
    assert_err(z.mul_(2.0), &["mul_", msg]);
    Ok(())
}

#[test]
fn copy_from_own_transpose_is_refused() -> Result<()> {
    let a = iota(&[3, 3]);
    let msg = "some elements of the input tensor and the written-to tensor refer to a single memory location";
    assert_err(a.copy_(&a.t()?), &["copy_", msg]);
    assert_eq!(vals(&a), (0..9).map(|v| v as f64).collect::<Vec<_>>(), "unchanged");
    assert_err(a.add_(&a.t()?), &["add_", msg]);
    assert_err(a.t()?.mul_(&a), &["mul_", msg]);
    // Fully overlapping (the same elements, same order) is allowed, like PyTorch.
    a.add_(&a)?;
    assert_eq!(vals(&a)[..3], [0.0, 2.0, 4.0]);
    a.copy_(&a.view(&[3, 3])?)?;
    // Overlapping shifted slices of a 1-D tensor are refused.
    let x = iota(&[6]);
    assert_err(x.narrow(0, 0, 4)?.copy_(&x.narrow(0, 1, 4)?), &["copy_", msg]);
    Ok(())
}

#[test]
fn copy_between_disjoint_slices_of_one_storage() -> Result<()> {
    let x = iota(&[6]);
    x.narrow(0, 0, 3)?.copy_(&x.narrow(0, 3, 3)?)?;
    assert_eq!(vals(&x), vec![3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);
    let m = iota(&[4, 3]);
    m.narrow(0, 2, 2)?.copy_(&m.narrow(0, 0, 2)?)?;
    assert_eq!(vals(&m), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    // Rows to rows via select.
    m.select(0, 1)?.copy_(&m.select(0, 3)?.mul(2.0)?)?;
    assert_eq!(vals(&m.select(0, 1)?), vec![6.0, 8.0, 10.0]);
    m.select(0, 0)?.add_(&m.select(0, 2)?)?;
    assert_eq!(vals(&m.select(0, 0)?), vec![0.0, 2.0, 4.0]);
    // Even/odd interleaved slices do not share elements.
    let y = iota(&[6]);
    y.slice(0, 0, 6, 2)?.copy_(&y.slice(0, 1, 6, 2)?)?;
    assert_eq!(vals(&y), vec![1.0, 1.0, 3.0, 3.0, 5.0, 5.0]);
    Ok(())
}

#[test]
fn version_counter() -> Result<()> {
    let x = iota(&[2, 3]);
    let v = x.select(0, 0)?;
    let t = x.t()?;
    let v0 = x.version();
    assert_eq!(v.version(), v0, "views share the version counter");
    x.add_(1.0)?;
    let v1 = x.version();
    assert!(v1 > v0);
    assert_eq!(v.version(), v1);
    assert_eq!(t.version(), v1);
    v.mul_(2.0)?;
    let v2 = x.version();
    assert!(v2 > v1);
    assert_eq!(t.version(), v2);
    t.fill_(0.0)?;
    assert!(x.version() > v2);
    let ops: [fn(&Tensor) -> Result<Tensor>; 9] = [
        |t: &Tensor| t.zero_(),
        |t: &Tensor| t.copy_(&Tensor::ones(&[2, 3], DType::F64, &Device::Cpu)?),
        |t: &Tensor| t.clamp_(0.0, 1.0),
        |t: &Tensor| t.relu_(),
        |t: &Tensor| t.sigmoid_(),
        |t: &Tensor| t.exp_(),
        |t: &Tensor| t.neg_(),
        |t: &Tensor| t.sub_(1.0),
        |t: &Tensor| t.div_(2.0),
    ];
    for f in ops {
        let before = x.version();
        f(&x)?;
        assert_eq!(x.version(), before + 1, "each in-place write bumps the version by one");
    }
    // Out-of-place ops, views and reads do not.
    let before = x.version();
    let _ = x.add(1.0)?;
    let _ = x.t()?.narrow(0, 0, 1)?;
    let _ = vals(&x);
    let _ = x.copy()?;
    let _ = x.contiguous()?;
    assert_eq!(x.version(), before);
    // A copy has its own counter.
    let c = x.copy()?;
    let cv = c.version();
    x.add_(1.0)?;
    assert_eq!(c.version(), cv);
    // detach() shares the counter (and storage).
    let d = x.detach()?;
    d.add_(1.0)?;
    assert_eq!(x.version(), d.version());
    Ok(())
}

#[test]
fn views_of_views_track_the_root_geometry() -> Result<()> {
    let x = iota(&[4, 5]);
    let a = x.narrow(0, 1, 3)?; // rows 1..4
    let b = a.narrow(1, 2, 2)?; // cols 2..4
    assert_eq!(b.storage_offset(), 7);
    assert_eq!(b.stride(), vec![5, 1]);
    let c = b.t()?.select(0, 1)?; // column 3 of rows 1..4
    assert_eq!(c.storage_offset(), 8);
    assert_eq!(c.stride(), vec![5]);
    assert_eq!(vals(&c), vec![8.0, 13.0, 18.0]);
    let d = c.unsqueeze(0)?.expand(&[2, 3])?;
    assert_eq!(d.stride(), vec![0, 5]);
    assert_eq!(vals(&d), vec![8.0, 13.0, 18.0, 8.0, 13.0, 18.0]);
    c.add_(1.0)?;
    assert_eq!(vals(&d), vec![9.0, 14.0, 19.0, 9.0, 14.0, 19.0]);
    assert_eq!(vals(&x.select(1, 3)?), vec![3.0, 9.0, 14.0, 19.0]);
    Ok(())
}

#[test]
fn mixed_dtype_writes_into_views() -> Result<()> {
    let x = Tensor::zeros(&[2, 3], DType::F16, &Device::Cpu)?;
    x.select(0, 1)?.copy_(&t64(&[0.1, 0.2, 0.3], &[3]))?;
    let v = vals(&x);
    assert_close(&v[3..], &[0.1, 0.2, 0.3], 1e-3);
    let b = Tensor::zeros(&[4], DType::BF16, &Device::Cpu)?;
    b.slice(0, 1, 4, 2)?.add_(&tdt(&[1.5, 2.5], &[2], DType::F32))?;
    assert_eq!(vals(&b), vec![0.0, 1.5, 0.0, 2.5]);
    Ok(())
}
