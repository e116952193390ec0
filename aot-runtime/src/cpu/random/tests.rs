use super::*;

fn f64s(s: &CpuStorage) -> Vec<f64> {
    (0..s.len()).map(|i| s.get_f64(i)).collect()
}

#[test]
fn deterministic_per_seed_and_offset() {
    assert_eq!(randn(DType::F32, 10, &mut Rng::new(1)).unwrap(), randn(DType::F32, 10, &mut Rng::new(1)).unwrap());
    assert_eq!(rand_uniform(DType::F64, 10, &mut Rng::new(1)).unwrap(), rand_uniform(DType::F64, 10, &mut Rng::new(1)).unwrap());
    assert_ne!(rand_uniform(DType::F64, 10, &mut Rng::new(1)).unwrap(), rand_uniform(DType::F64, 10, &mut Rng::new(2)).unwrap());
    let mut r = Rng::new(5);
    rand_uniform(DType::F32, 10, &mut r).unwrap();
    assert_eq!(r.state(), (5, 3), "10 f32 values take 3 blocks");
    rand_uniform(DType::F64, 3, &mut r).unwrap();
    assert_eq!(r.state(), (5, 5), "3 f64 values take 2 blocks");
    randn(DType::F64, 4, &mut r).unwrap();
    assert_eq!(r.state(), (5, 6));
}

#[test]
fn a_draw_continues_where_the_last_one_ended_and_parallel_draws_match() {
    // One draw of n equals two draws split at a block boundary, across the
    // parallel threshold.
    let n = PAR_MIN * 3 + 5;
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let per = if dtype == DType::F64 { 2 } else { 4 };
        let whole = f64s(&rand_uniform(dtype, n, &mut Rng::new(9)).unwrap());
        let mut r = Rng::new(9);
        let mut parts = f64s(&rand_uniform(dtype, per * 1001, &mut r).unwrap());
        parts.extend(f64s(&rand_uniform(dtype, n - per * 1001, &mut r).unwrap()));
        assert_eq!(whole, parts, "{dtype}");
        let whole = f64s(&randn(dtype, n, &mut Rng::new(4)).unwrap());
        let mut r = Rng::new(4);
        let mut parts = f64s(&randn(dtype, 4 * 7, &mut r).unwrap());
        parts.extend(f64s(&randn(dtype, n - 28, &mut r).unwrap()));
        assert_eq!(whole, parts, "{dtype}");
    }
}

#[test]
fn a_refused_allocation_draws_nothing() {
    let mut r = Rng::new(3);
    assert!(rand_uniform(DType::F64, usize::MAX / 4, &mut r).is_err());
    assert_eq!(r.state(), (3, 0));
}

#[test]
fn widened_normals_are_the_f32_stream() {
    let a = f64s(&randn(DType::F32, 50, &mut Rng::new(8)).unwrap());
    let b = f64s(&randn(DType::F64, 50, &mut Rng::new(8)).unwrap());
    assert_eq!(a, b);
}

#[test]
fn uniform_is_in_range_with_the_right_moments() {
    for dtype in DType::FLOATS {
        let s = rand_uniform(dtype, 100_000, &mut Rng::new(7)).unwrap();
        assert_eq!(s.dtype(), dtype);
        let v = f64s(&s);
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}");
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{dtype}: {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.01, "{dtype}: {var}");
    }
}

#[test]
fn normal_has_the_right_moments() {
    let n = 200_000;
    let v = f64s(&randn(DType::F64, n, &mut Rng::new(3)).unwrap());
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    assert!(mean.abs() < 0.01, "{mean}");
    assert!((var - 1.0).abs() < 0.02, "{var}");
    assert!(v.iter().all(|x| x.is_finite() && x.abs() < 5.8));
    let within1 = v.iter().filter(|x| x.abs() < 1.0).count() as f64 / n as f64;
    assert!((within1 - 0.6827).abs() < 0.01, "{within1}");
    let s = randn(DType::BF16, 1000, &mut Rng::new(5)).unwrap();
    assert_eq!((s.dtype(), s.len()), (DType::BF16, 1000));
}

#[test]
fn dropout_keeps_about_one_minus_p() {
    let s = f64s(&dropout_mask(DType::F32, 100_000, 0.3, 2.0, &mut Rng::new(1)).unwrap());
    assert!(s.iter().all(|&x| x == 0.0 || x == 2.0));
    let kept = s.iter().filter(|&&x| x == 2.0).count() as f64 / s.len() as f64;
    assert!((kept - 0.7).abs() < 0.01, "{kept}");
    assert!(f64s(&dropout_mask(DType::F64, 100, 0.0, 1.0, &mut Rng::new(1)).unwrap()).iter().all(|&x| x == 1.0));
    assert!(f64s(&dropout_mask(DType::F64, 100, 1.0, 0.0, &mut Rng::new(1)).unwrap()).iter().all(|&x| x == 0.0));
}
