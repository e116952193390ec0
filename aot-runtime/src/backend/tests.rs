//! The CPU backend driven only through the [`Backend`] trait (a generic
//! caller, as the storage dispatch is), and the storage-level dispatch.

use super::{Backend, Distribution};
use crate::backend::CpuStorage;
use crate::backend::Rng;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::Storage;
use aot_ir::OpKind;

const F64: DType = DType::F64;

/// A buffer of f64 values on the backend's device, made through the trait.
fn upload<B: Backend>(dev: &Device, vals: &[f64]) -> B {
    let host = CpuStorage::from_f64s("test", F64, vals.iter().copied()).unwrap();
    B::from_host("test", dev, host).unwrap()
}

/// The elements of `l` as f64 on the host, read through the trait.
fn download<B: Backend>(s: &B, l: &Layout) -> Vec<f64> {
    let h = s.to_host("test", l, F64).unwrap();
    (0..h.len()).map(|i| h.get_f64(i)).collect()
}

fn all<B: Backend>(s: &B) -> Vec<f64> {
    download(s, &Layout::contiguous(&[s.len()]))
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{got:?} vs {want:?}");
    }
}

/// Every primitive of a backend, on small inputs with known results.
fn exercise<B: Backend>(dev: &Device) {
    let c23 = Layout::contiguous(&[2, 3]);
    // a = [[1, 2, 3], [4, 5, 6]]; its transpose read as [3, 2]
    let a: B = upload(dev, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!((a.device(), a.dtype(), a.len(), a.is_empty()), (*dev, F64, 6, false));
    let at = c23.t("test").unwrap();
    assert_eq!(download(&a, &at), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);

    let z = B::full("test", dev, DType::F32, 4, 2.5).unwrap();
    assert_eq!((z.dtype(), all(&z)), (DType::F32, vec![2.5; 4]));

    let sq = a.unary(OpKind::Square, &at, &Layout::contiguous(&[3, 2])).unwrap();
    assert_eq!(all(&sq), [1.0, 16.0, 4.0, 25.0, 9.0, 36.0]);
    let cl = a.clamp("clamp", &c23, Some(2.0), Some(5.0), &c23).unwrap();
    assert_eq!(all(&cl), [2.0, 2.0, 3.0, 4.0, 5.0, 5.0]);

    // a + b with b = [10, 20, 30] broadcast over rows (stride 0)
    let b: B = upload(dev, &[10.0, 20.0, 30.0]);
    let bb = Layout::new(vec![2, 3], vec![0, 1], 0);
    let sum = a.binary(OpKind::Add, &c23, &b, &bb, &c23).unwrap();
    assert_eq!(all(&sum), [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    // The dense primitives: runs of one length, checked by the caller; a
    // run past the buffer, or an op they do not serve, is an error.
    let d = a.binary_dense(OpKind::Mul, 1..4, &b, 0..3).unwrap();
    assert_eq!(all(&d), [20.0, 60.0, 120.0]);
    assert!(a.binary_dense(OpKind::Add, 4..7, &b, 0..3).is_err(), "a run past the buffer");
    assert!(a.binary_dense(OpKind::Pow, 0..3, &b, 0..3).is_err(), "not a dense op");
    let mut acc: B = upload(dev, &[1.0, 1.0, 1.0, 1.0]);
    acc.binary_assign_dense(OpKind::Sub, 1..3, &b, 1..3).unwrap();
    assert_eq!(all(&acc), [1.0, -19.0, -29.0, 1.0]);
    assert!(acc.binary_assign_dense(OpKind::Div, 0..2, &b, 0..3).is_err(), "runs of two lengths");
    assert_eq!(all(&acc), [1.0, -19.0, -29.0, 1.0], "a refused write writes nothing");
    let rs = a.binary_scalar(OpKind::Sub, &c23, 10.0, true, &c23).unwrap();
    assert_eq!(all(&rs), [9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
    let gt = a.binary_scalar(OpKind::Gt, &c23, 3.0, false, &c23).unwrap();
    assert_eq!(gt.dtype(), DType::Bool);
    let w = gt.where_cond("where", &c23, &a, &c23, &sum, &c23, &c23).unwrap();
    assert_eq!(all(&w), [11.0, 22.0, 33.0, 4.0, 5.0, 6.0]);
    let i = a.cast("to_dtype", &at, DType::I64, &Layout::contiguous(&[3, 2])).unwrap();
    assert_eq!((i.dtype(), all(&i)), (DType::I64, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));

    // Writes: `a` into a column-major destination, then an overlapping
    // scatter-add (both rows of `a` into the first three places), then a fill.
    let mut d = B::full("test", dev, F64, 6, 0.0).unwrap();
    a.copy_strided("copy_", &c23, &mut d, &Layout::contiguous(&[3, 2]).t("test").unwrap()).unwrap();
    assert_eq!(all(&d), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let twice = Layout::new(vec![2, 3], vec![0, 1], 0);
    a.scatter_add("view_backward", &c23, &mut d, &twice).unwrap();
    assert_eq!(all(&d), [6.0, 11.0, 11.0, 5.0, 3.0, 6.0]);
    d.fill("fill_", &Layout::new(vec![3], vec![1], 3), -1.0).unwrap();
    assert_eq!(all(&d), [6.0, 11.0, 11.0, -1.0, -1.0, -1.0]);
    assert!(d.fill("fill_", &Layout::new(vec![3], vec![1], 4), 0.0).is_err(), "a layout past the buffer is refused");

    let rows = a.reduce(OpKind::SumDim, &c23, &[1], false).unwrap();
    assert_eq!(all(&rows), [6.0, 15.0]);
    let mx = a.reduce(OpKind::AmaxDim, &at, &[], true).unwrap();
    assert_eq!(all(&mx), [6.0]);
    let v = a.var("var_dim", &c23, &[1], 1, false).unwrap();
    close(&all(&v), &[1.0, 1.0]);
    let sm = a.softmax("softmax", &c23, 1, false).unwrap();
    let e = [1f64.exp(), 2f64.exp(), 3f64.exp()];
    let den: f64 = e.iter().sum();
    let row: Vec<f64> = e.iter().map(|x| x / den).collect();
    close(&all(&sm), &[row.clone(), row].concat());

    // [1, 2, 3] x [3, 2]: a times its own transpose
    let m = a.matmul("matmul", &Layout::new(vec![1, 2, 3], vec![0, 3, 1], 0), &a, &Layout::new(vec![1, 3, 2], vec![0, 1, 3], 0)).unwrap();
    assert_eq!(all(&m), [14.0, 32.0, 32.0, 77.0]);

    let r1 = B::random("rand", dev, Distribution::Uniform, F64, 5, &mut Rng::new(9)).unwrap();
    let r2 = B::random("rand", dev, Distribution::Uniform, F64, 5, &mut Rng::new(9)).unwrap();
    assert_eq!(all(&r1), all(&r2));
    assert!(all(&r1).iter().all(|x| (0.0..1.0).contains(x)));
    let n = B::random("randn", dev, Distribution::Normal, DType::F32, 1000, &mut Rng::new(9)).unwrap();
    assert!(all(&n).iter().any(|&x| x < 0.0) && all(&n).iter().any(|&x| x > 0.0));
    let mask = B::random("dropout", dev, Distribution::Dropout { p: 0.5, scale: 2.0 }, F64, 1000, &mut Rng::new(3)).unwrap();
    let kept = all(&mask).iter().filter(|&&x| x == 2.0).count();
    assert!(all(&mask).iter().all(|&x| x == 0.0 || x == 2.0));
    assert!((400..600).contains(&kept), "{kept} of 1000 kept at p = 0.5");
}

#[test]
fn cpu_backend_through_the_trait() {
    exercise::<CpuStorage>(&Device::Cpu);
}

#[test]
fn cpu_constructors_refuse_another_device() {
    let e = <CpuStorage as Backend>::full("zeros", &Device::Cuda(0), F64, 2, 0.0).unwrap_err();
    assert!(matches!(e, AotError::Internal { op: "zeros", .. }), "{e}");
}

fn host(vals: &[f64]) -> Storage {
    Storage::from_host("test", &Device::Cpu, CpuStorage::from_f64s("test", F64, vals.iter().copied()).unwrap()).unwrap()
}

fn read(s: &Storage, l: &Layout) -> Vec<f64> {
    let h = s.to_host("test", l, F64).unwrap();
    (0..h.len()).map(|i| h.get_f64(i)).collect()
}

#[test]
fn storage_dispatch_reads_an_operand_named_twice() -> Result<()> {
    let l = Layout::contiguous(&[3]);
    let a = host(&[1.0, 2.0, 3.0]);
    // one storage as both operands, and as all three operands of where
    assert_eq!(read(&a.binary(OpKind::Mul, &l, &a, &l, &l)?, &l), [1.0, 4.0, 9.0]);
    assert_eq!(
        read(
            &a.matmul("matmul", &Layout::new(vec![1, 1, 3], vec![0, 3, 1], 0), &a, &Layout::new(vec![1, 3, 1], vec![0, 1, 1], 0))?,
            &Layout::contiguous(&[1])
        ),
        [14.0]
    );
    let c = a.cast("to_dtype", &l, DType::Bool, &l)?;
    assert_eq!(read(&c.where_cond("where", &l, &a, &l, &a, &l, &l)?, &l), [1.0, 2.0, 3.0]);
    // a copy within one storage reads its source first: shift right by one
    a.copy_into("copy_", &Layout::new(vec![2], vec![1], 0), &a, &Layout::new(vec![2], vec![1], 1))?;
    assert_eq!(read(&a, &l), [1.0, 1.0, 2.0]);
    let e = a.scatter_add_into("view_backward", &l, &a, &l).unwrap_err();
    assert!(matches!(e, AotError::Internal { .. }), "{e}");
    Ok(())
}

#[test]
fn storage_to_device_on_the_same_backend_is_a_contiguous_copy() -> Result<()> {
    let a = host(&[1.0, 2.0, 3.0, 4.0]);
    let t = Layout::contiguous(&[2, 2]).t("t")?;
    let b = a.to_device("to_device", &t, &Device::Cpu)?;
    assert_ne!(a.id(), b.id());
    assert_eq!(read(&b, &Layout::contiguous(&[4])), [1.0, 3.0, 2.0, 4.0]);
    Ok(())
}
