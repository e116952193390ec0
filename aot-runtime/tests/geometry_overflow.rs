//! Regression tests: shape, stride and offset
//! arithmetic that overflows, and shapes too large to allocate. Each
//! reproducer must give an `Err` of the right variant, never a panic (these
//! run as a debug build, with overflow checks on) and never an abort.
//!
//! Allocation tests use byte sizes of 2^48 and more: beyond the 47-bit
//! user address space of x86-64 Linux, so the allocator refuses them
//! whatever the overcommit setting (a few GiB could succeed lazily).

use aot_runtime::layout::MAX_NUMEL;
use aot_runtime::prelude::*;

const CPU: Device = Device::Cpu;

fn is_overflow(r: &Result<Tensor>, op: &str) -> bool {
    matches!(r, Err(AotError::Overflow { op: o, .. }) if *o == op)
}

fn is_oom(r: &Result<Tensor>, op: &str) -> bool {
    matches!(r, Err(AotError::OutOfMemory { op: o, bytes }) if *o == op && *bytes >= 1 << 48)
}

#[test]
fn narrow_with_a_huge_length_is_an_error_not_an_empty_view() -> Result<()> {
    let t = Tensor::zeros(&[2, 4], DType::F32, &CPU)?;
    let r = t.narrow(1, 2, i64::MAX);
    assert!(matches!(&r, Err(AotError::ShapeMismatch { op: "narrow", msg }) if msg.contains("9223372036854775807")), "{r:?}");
    assert!(t.narrow(1, i64::MIN, 1).is_err());
    assert!(t.narrow(1, 4, 0)?.shape() == vec![2, 0]);
    Ok(())
}

#[test]
fn zeros_whose_element_count_overflows_is_an_error() {
    let r = Tensor::zeros(&[1 << 32, 1 << 32], DType::F32, &CPU);
    assert!(is_overflow(&r, "full"), "{r:?}");
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("4294967296"), "{msg}");
    // Zero sizes do not hide huge ones: the strides would still overflow.
    assert!(is_overflow(&Tensor::zeros(&[0, 1 << 40, 1 << 40], DType::F32, &CPU), "full"));
    assert!(is_overflow(&Tensor::ones(&[MAX_NUMEL + 1], DType::Bool, &CPU), "full"));
}

#[test]
fn expand_past_the_element_limit_is_an_error() -> Result<()> {
    let t = Tensor::ones(&[1, 1], DType::F32, &CPU)?;
    let r = t.expand(&[1 << 62, 4]);
    assert!(is_overflow(&r, "expand"), "{r:?}");
    // A large but describable expand is a view; its sum is not attempted here.
    assert_eq!(t.expand(&[1 << 40, 4])?.numel(), 1 << 42);
    Ok(())
}

#[test]
fn as_strided_with_an_overflowing_extent_is_an_error_and_returns() -> Result<()> {
    let t = Tensor::zeros(&[4], DType::F32, &CPU)?;
    let r = t.as_strided(&[2, usize::MAX], &[1, 0], 0);
    assert!(is_overflow(&r, "as_strided"), "{r:?}");
    // The extent sum overflows although numel is small.
    let r = t.as_strided(&[2, 2], &[usize::MAX, 1], 0);
    assert!(is_overflow(&r, "as_strided"), "{r:?}");
    let r = t.as_strided(&[2], &[1], usize::MAX);
    assert!(is_overflow(&r, "as_strided"), "{r:?}");
    // In range but past the storage: the bounds error it always was.
    assert!(matches!(t.as_strided(&[2], &[3], 2), Err(AotError::ShapeMismatch { op: "as_strided", .. })));
    // An empty view may point anywhere, and ops on it must not overflow.
    let e = t.as_strided(&[0, 2], &[1, usize::MAX], usize::MAX)?;
    assert_eq!((e.numel(), e.storage_offset()), (0, usize::MAX));
    Ok(())
}

#[test]
fn view_geometry_near_usize_max_is_checked() -> Result<()> {
    let t = Tensor::zeros(&[4], DType::F32, &CPU)?;
    // Size-1 dims may carry any stride; stepping over them must not wrap.
    let s = t.as_strided(&[1, 2], &[usize::MAX, 1], 0)?;
    assert!(is_overflow(&s.slice(0, 0, 1, 2), "slice"));
    let d = t.as_strided(&[1, 1], &[usize::MAX, usize::MAX], 0)?;
    assert!(is_overflow(&d.diagonal(), "diagonal"));
    // An empty view at the end of the address space.
    let e = t.as_strided(&[0, 2], &[1, usize::MAX / 2 + 1], usize::MAX)?;
    assert!(is_overflow(&e.unsqueeze(1), "unsqueeze"));
    assert!(is_overflow(&e.select(1, 1), "select"));
    assert!(is_overflow(&e.narrow(1, 1, 1), "narrow"));
    assert_eq!(e.sum()?.item::<f32>()?, 0.0);
    // Extreme but valid slice arguments clamp as in PyTorch.
    assert_eq!(t.slice(0, 0, i64::MAX, i64::MAX)?.shape(), vec![1]);
    assert_eq!(t.slice(0, i64::MIN, i64::MAX, 1)?.shape(), vec![4]);
    assert!(matches!(t.select(0, i64::MIN), Err(AotError::IndexOutOfRange { op: "select", .. })));
    // Shapes whose products overflow.
    assert!(is_overflow(&t.view(&[-1, 1 << 62, 4]), "view"));
    let e0 = Tensor::zeros(&[0], DType::F32, &CPU)?;
    assert!(is_overflow(&e0.view(&[0, 1 << 62, 1 << 62]), "view"));
    assert!(is_overflow(&e0.reshape(&[1 << 62, 1 << 62, 0]), "reshape"));
    let a = Tensor::ones(&[1, 1], DType::F32, &CPU)?;
    let r = &a.expand(&[1 << 40, 1])? + &a.expand(&[1, 1 << 40])?;
    assert!(is_overflow(&r, "add"), "{r:?}");
    Ok(())
}

#[test]
fn layout_queries_saturate_instead_of_panicking() {
    use aot_runtime::layout::{checked_numel, Layout};
    let l = Layout::new(vec![1 << 40, 1 << 40], vec![1, 1], 0);
    assert_eq!(l.numel(), usize::MAX);
    assert_eq!(l.checked_storage_extent(), Some((1 << 41) - 1));
    assert_eq!(Layout::new(vec![1 << 40, 1 << 40, 0], vec![0, 0, 0], 0).numel(), 0);
    assert_eq!(Layout::new(vec![3], vec![usize::MAX], 0).checked_storage_extent(), None);
    assert_eq!(Layout::new(vec![3], vec![usize::MAX], 0).storage_extent(), usize::MAX);
    assert!(matches!(checked_numel("x", &[1 << 31, 1 << 31]), Err(AotError::Overflow { op: "x", .. })));
    assert_eq!(checked_numel("x", &[MAX_NUMEL]).unwrap(), MAX_NUMEL);
    assert!(checked_numel("x", &[MAX_NUMEL, 2]).is_err());
    assert_eq!(checked_numel("x", &[3, 0, 5]).unwrap(), 0);
}

#[test]
fn huge_legal_shapes_are_out_of_memory_errors() -> Result<()> {
    // 2^46 f32 elements: 2^48 bytes.
    let r = Tensor::zeros(&[1 << 46], DType::F32, &CPU);
    assert!(is_oom(&r, "full"), "{r:?}");
    assert!(is_oom(&Tensor::full(&[1 << 45], 2.0, DType::F64, &CPU), "full"));
    assert!(is_oom(&Tensor::randn(&[1 << 46], DType::F32, &CPU, 0), "randn"));
    assert!(is_oom(&Tensor::rand(&[1 << 46], DType::F32, &CPU, 0), "rand"));
    // Views of that size are fine; what they compute is refused.
    let big = Tensor::ones(&[1], DType::F32, &CPU)?.expand(&[1 << 46])?;
    assert!(is_oom(&big.exp(), "exp"), "{:?}", big.exp());
    assert!(is_oom(&big.contiguous(), "cast"));
    assert!(is_oom(&big.zeros_like(), "full_like"));
    assert!(is_oom(&(&big + 1.0), "add"));
    Ok(())
}

#[test]
fn matmul_with_a_huge_output_is_out_of_memory() -> Result<()> {
    let one = Tensor::ones(&[1, 1], DType::F32, &CPU)?;
    let (a, b) = (one.expand(&[1 << 23, 1])?, one.expand(&[1, 1 << 23])?);
    let r = a.matmul(&b); // [2^23, 2^23] f32: 2^48 bytes
    assert!(is_oom(&r, "matmul"), "{r:?}");
    let h = Tensor::ones(&[1, 1], DType::F16, &CPU)?;
    let r = h.expand(&[1 << 24, 1])?.matmul(&h.expand(&[1, 1 << 24])?);
    assert!(is_oom(&r, "matmul"), "{r:?}");
    // An output that cannot even be described is an overflow.
    let r = one.expand(&[1 << 31, 1])?.matmul(&one.expand(&[1, 1 << 31])?);
    assert!(is_overflow(&r, "matmul"), "{r:?}");
    Ok(())
}

#[test]
fn reductions_with_a_huge_output_are_out_of_memory() -> Result<()> {
    let x = Tensor::ones(&[1, 1], DType::F32, &CPU)?.expand(&[1 << 46, 2])?;
    let r = x.var_dim(&[1], 1, false);
    assert!(is_oom(&r, "var"), "{r:?}");
    assert!(is_oom(&x.sum_dim(&[1], false), "sum"));
    assert!(is_oom(&x.amax_dim(&[1], true), "amax"));
    assert!(is_oom(&x.softmax(1), "softmax"));
    Ok(())
}

#[test]
fn randn_and_arange_with_too_many_elements_are_errors() -> Result<()> {
    let r = Tensor::randn(&[1 << 61], DType::F32, &CPU, 0);
    assert!(is_overflow(&r, "randn"), "{r:?}");
    let r = Tensor::arange(0.0, 1e300, 1.0, DType::F32, &CPU);
    assert!(is_overflow(&r, "arange"), "{r:?}");
    for (start, end, step) in [(0.0, 1.0, 0.0), (0.0, 1.0, f64::NAN), (0.0, f64::INFINITY, 1.0), (f64::NAN, 1.0, 1.0), (0.0, 5.0, -1.0)] {
        let r = Tensor::arange(start, end, step, DType::F32, &CPU);
        assert!(matches!(r, Err(AotError::Unsupported { op: "arange", .. })), "arange({start}, {end}, {step}): {r:?}");
    }
    assert_eq!(Tensor::arange(0.0, 5.0, 2.0, DType::I64, &CPU)?.to_vec::<i64>()?, vec![0, 2, 4]);
    assert_eq!(Tensor::arange(5.0, 0.0, -2.5, DType::F64, &CPU)?.to_vec::<f64>()?, vec![5.0, 2.5]);
    Ok(())
}

#[test]
fn oom_in_dropout_leaves_the_generator_untouched() -> Result<()> {
    aot_runtime::manual_seed(7);
    let big = Tensor::ones(&[1], DType::F32, &CPU)?.expand(&[1 << 46])?;
    assert!(is_oom(&big.dropout(0.5), "dropout"));
    let after_err = Tensor::ones(&[8], DType::F32, &CPU)?.dropout(0.5)?.to_vec::<f32>()?;
    aot_runtime::manual_seed(7);
    let fresh = Tensor::ones(&[8], DType::F32, &CPU)?.dropout(0.5)?.to_vec::<f32>()?;
    assert_eq!(after_err, fresh);
    Ok(())
}

#[aot_fn]
fn narrow_add(x: &mut Tensor, start: i64, len: i64) -> Tensor {
    let v = x.narrow(0, start, len);
    v.add_(1.0);
    v.sum()
}

#[test]
fn aot_fn_with_huge_integer_arguments_fails_without_touching_its_input() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4], &CPU)?;
    let version = x.version();
    for (start, len) in [(2, i64::MAX), (i64::MAX, 1), (i64::MIN, 2), (1, i64::MIN), (-1, i64::MAX)] {
        let r = narrow_add(&mut x.clone(), start, len);
        assert!(r.is_err(), "narrow_add(x, {start}, {len}) = {r:?}");
        assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!((x.shape(), x.stride(), x.storage_offset(), x.version()), (vec![4], vec![1], 0, version));
    }
    // The same function with good arguments still works (and writes).
    assert_eq!(narrow_add(&mut x.clone(), 1, 2)?.item::<f32>()?, 7.0);
    assert_eq!(x.to_vec::<f32>()?, vec![1.0, 3.0, 4.0, 4.0]);
    Ok(())
}
