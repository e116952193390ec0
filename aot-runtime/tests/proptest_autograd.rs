//! Property test: random chains of views, in-place ops on those views (and
//! on the base) and metadata mutations on a non-leaf base `b = x * 1`;
//! the gradients of a loss over every live handle must match central finite
//! differences (the `gradcheck` of tests/common). This exercises PyTorch's
//! CopySlices and the regeneration of a view's history after its base changed.

mod common;

use aot_runtime::prelude::*;
use common::{gradcheck, TestRng};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Narrow {
        h: usize,
        dim: i64,
        start: i64,
        len: i64,
    },
    Select {
        h: usize,
        dim: i64,
        index: i64,
    },
    Transpose {
        h: usize,
        d0: i64,
        d1: i64,
    },
    Unsqueeze {
        h: usize,
        dim: i64,
    },
    Diagonal {
        h: usize,
    },
    Expand {
        h: usize,
        n: usize,
    },
    /// `handle.mul_(y)` with a fresh leaf `y` of the handle's shape.
    MulY {
        h: usize,
    },
    /// `handle.add_(y)` with a fresh leaf `y` of the handle's shape.
    AddY {
        h: usize,
    },
    /// `handle.copy_(y)` with a fresh leaf `y` of the handle's shape.
    CopyY {
        h: usize,
    },
    /// `handle.add_(other handle)` (refused if they partly overlap).
    AddHandle {
        h: usize,
        other: usize,
    },
    MulScalar {
        h: usize,
        v: i8,
    },
    Sigmoid {
        h: usize,
    },
    Fill {
        h: usize,
        v: i8,
    },
    TInplace {
        h: usize,
    },
    UnsqueezeInplace {
        h: usize,
        dim: i64,
    },
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let h = any::<usize>();
    let d = -3i64..3;
    prop_oneof![
        (h, d.clone(), -2i64..3, 0i64..3).prop_map(|(h, dim, start, len)| Step::Narrow { h, dim, start, len }),
        (h, d.clone(), -2i64..3).prop_map(|(h, dim, index)| Step::Select { h, dim, index }),
        (h, d.clone(), d.clone()).prop_map(|(h, d0, d1)| Step::Transpose { h, d0, d1 }),
        (h, d.clone()).prop_map(|(h, dim)| Step::Unsqueeze { h, dim }),
        h.prop_map(|h| Step::Diagonal { h }),
        (h, 1usize..3).prop_map(|(h, n)| Step::Expand { h, n }),
        h.prop_map(|h| Step::MulY { h }),
        h.prop_map(|h| Step::AddY { h }),
        h.prop_map(|h| Step::CopyY { h }),
        (h, any::<usize>()).prop_map(|(h, other)| Step::AddHandle { h, other }),
        (h, -2i8..3).prop_map(|(h, v)| Step::MulScalar { h, v }),
        h.prop_map(|h| Step::Sigmoid { h }),
        (h, -2i8..3).prop_map(|(h, v)| Step::Fill { h, v }),
        h.prop_map(|h| Step::TInplace { h }),
        (h, d).prop_map(|(h, dim)| Step::UnsqueezeInplace { h, dim }),
    ]
}

/// True if some element is reached twice through a stride-0 dim.
fn overlaps(t: &Tensor) -> bool {
    t.shape().iter().zip(t.stride()).any(|(&n, s)| n > 1 && s == 0)
}

/// Replays `steps` on `b = x * 1`. `y(shape)` supplies the next leaf operand.
/// Returns `sum_h (handle_h * W_h).sum()` over every live handle.
fn replay(steps: &[Step], x: &Tensor, y: &mut dyn FnMut(&[usize]) -> Result<Tensor>) -> Result<Tensor> {
    let b = x.mul(1.0)?;
    let mut hs: Vec<Tensor> = vec![b];
    for step in steps {
        let n = hs.len();
        let pick = |h: &usize| h % n;
        match step {
            Step::Narrow { h, dim, start, len } => {
                if let Ok(v) = hs[pick(h)].narrow(*dim, *start, *len) {
                    hs.push(v);
                }
            }
            Step::Select { h, dim, index } => {
                if let Ok(v) = hs[pick(h)].select(*dim, *index) {
                    hs.push(v);
                }
            }
            Step::Transpose { h, d0, d1 } => {
                if let Ok(v) = hs[pick(h)].transpose(*d0, *d1) {
                    hs.push(v);
                }
            }
            Step::Unsqueeze { h, dim } => {
                if let Ok(v) = hs[pick(h)].unsqueeze(*dim) {
                    hs.push(v);
                }
            }
            Step::Diagonal { h } => {
                if let Ok(v) = hs[pick(h)].diagonal() {
                    hs.push(v);
                }
            }
            Step::Expand { h, n } => {
                let t = &hs[pick(h)];
                let mut shape: Vec<i64> = vec![*n as i64];
                shape.extend(t.shape().iter().map(|&d| d as i64));
                hs.push(t.expand(&shape)?);
            }
            Step::MulY { h } | Step::AddY { h } | Step::CopyY { h } => {
                let t = hs[pick(h)].clone();
                if overlaps(&t) {
                    continue;
                }
                let yv = y(&t.shape())?;
                match step {
                    Step::MulY { .. } => t.mul_(&yv)?,
                    Step::AddY { .. } => t.add_(&yv)?,
                    _ => t.copy_(&yv)?,
                };
            }
            Step::AddHandle { h, other } => {
                let t = hs[pick(h)].clone();
                let o = hs[pick(other)].clone();
                if overlaps(&t) {
                    continue;
                }
                // Refused (a shape mismatch, or a partial overlap) is fine: skip.
                let _ = t.add_(&o);
            }
            Step::MulScalar { h, v } => {
                let t = hs[pick(h)].clone();
                if !overlaps(&t) {
                    t.mul_(*v as f64)?;
                }
            }
            Step::Sigmoid { h } => {
                let t = hs[pick(h)].clone();
                if !overlaps(&t) {
                    // Not `sigmoid_`: it saves its result, which a later step's
                    // write to the same storage would make the backward refuse
                    // (as PyTorch's does); the tests of `sigmoid_` are elsewhere.
                    t.copy_(&t.sigmoid()?)?;
                }
            }
            Step::Fill { h, v } => {
                let t = hs[pick(h)].clone();
                if !overlaps(&t) {
                    t.fill_(*v as f64)?;
                }
            }
            Step::TInplace { h } => {
                let _ = hs[pick(h)].t_();
            }
            Step::UnsqueezeInplace { h, dim } => {
                let _ = hs[pick(h)].unsqueeze_(*dim);
            }
        }
    }
    let mut loss = Tensor::zeros(&[], DType::F64, &Device::Cpu)?;
    for (i, t) in hs.iter().enumerate() {
        let mut rng = TestRng::new(1000 + i as u64);
        let w = Tensor::from_vec(rng.vec(t.numel(), -1.0, 1.0), &t.shape(), &Device::Cpu)?;
        loss = loss.add(&t.mul(&w)?.sum()?)?;
    }
    Ok(loss)
}

fn check(base_shape: &[usize], steps: &[Step]) -> Result<()> {
    let n: usize = base_shape.iter().product();
    let x = Tensor::from_vec(TestRng::new(7).vec(n, -1.0, 1.0), base_shape, &Device::Cpu)?;
    // Dry run: which leaf operands (shapes) the chain needs.
    let mut shapes: Vec<Vec<usize>> = vec![];
    aot_runtime::no_grad(|| {
        replay(steps, &x, &mut |s: &[usize]| {
            shapes.push(s.to_vec());
            Tensor::zeros(s, DType::F64, &Device::Cpu)
        })
    })?;
    let mut inputs = vec![x];
    for (i, s) in shapes.iter().enumerate() {
        let k: usize = s.iter().product();
        inputs.push(Tensor::from_vec(TestRng::new(100 + i as u64).vec(k, -1.0, 1.0), s, &Device::Cpu)?);
    }
    let steps = steps.to_vec();
    gradcheck(
        move |ins: &[Tensor]| {
            let mut k = 1;
            replay(&steps, &ins[0], &mut |s: &[usize]| {
                let t = ins[k].clone();
                k += 1;
                assert_eq!(t.shape(), s.to_vec(), "replay asked for a different operand");
                Ok(t)
            })
        },
        &inputs,
    )
}

proptest! {
    // 64 cases by default (each is a full finite-difference check);
    // PROPTEST_CASES=N explores more.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn gradients_through_views_and_inplace_ops_match_finite_differences(
        base_shape in proptest::collection::vec(1usize..4, 1..4),
        steps in proptest::collection::vec(step_strategy(), 1..9),
    ) {
        let r = check(&base_shape, &steps);
        prop_assert!(r.is_ok(), "runtime error: {:?}", r.err());
    }
}
