//! The evaluator against a per-element reference built from the same op
//! definition: bit for bit, on strided, broadcast and permuted layouts,
//! across block and task boundaries.

use super::*;
use aot_ir::kernel::elementwise::{with_op, OpVisitor};

/// `f(a, b)` for one element.
struct One<C>(C, C);

impl<C: Compute> OpVisitor<C> for One<C> {
    type Out = C;
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) -> C {
        f(self.0, self.1)
    }
}

/// Every value of an f32 program at one position, from its loads `v`:
/// each step by its op's definition, in order.
fn per_element(steps: &[Step], mut v: Vec<f32>) -> Vec<f32> {
    for s in steps {
        let rhs = match s.rhs {
            Rhs::None => v[s.a],
            Rhs::Value(k) => v[k],
            Rhs::Scalar(x) => x as f32,
        };
        v.push(with_op(s.op, One(v[s.a], rhs)).unwrap());
    }
    v
}

/// Pseudo-random values with NaN, infinities, zeros and large magnitudes.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| match i.wrapping_mul(2_654_435_761).wrapping_add(seed) % 97 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => -0.0,
            3 => 1e4,
            k => (k as f32 - 48.0) / 7.0,
        })
        .collect()
}

/// Element `idx` (row-major over `shape`) of a layout.
fn at(l: &Layout, idx: &[usize]) -> usize {
    l.offset + idx.iter().zip(l.stride.iter()).map(|(i, s)| i * s).sum::<usize>()
}

fn check(shape: &[usize], a: Layout, b: Layout, out: Layout) {
    let f = DType::F32;
    let steps = [
        Step::new(OpKind::Mul, 0, Rhs::Value(1), 2, f),
        Step::new(OpKind::Add, 2, Rhs::Scalar(0.5), 3, f),
        Step::new(OpKind::Tanh, 3, Rhs::None, 4, f),
        Step::new(OpKind::Maximum, 4, Rhs::Value(0), 5, f),
        Step::new(OpKind::Sin, 5, Rhs::None, 6, f),
    ];
    let p = Program { steps: &steps, num_values: 7, stored: 6, dtypes: &[f; 7], read: &[true, true] };
    let (va, vb) = (values(a.storage_extent(), 1), values(b.storage_extent(), 2));
    let (sa, sb) = (CpuStorage::F32(va.clone()), CpuStorage::F32(vb.clone()));
    let got = fused("test", &p, &[(&sa, a.clone()), (&sb, b.clone())], &out).expect("f32 runs fused").expect("no error");
    let CpuStorage::F32(got) = got else { panic!("an f32 result") };
    let n: usize = shape.iter().product();
    let mut idx = vec![0; shape.len()];
    for _ in 0..n {
        let v = per_element(&steps, vec![va[at(&a, &idx)], vb[at(&b, &idx)]]);
        let (want, have) = (v[6], got[at(&out, &idx)]);
        assert!(want.to_bits() == have.to_bits() || (want.is_nan() && have.is_nan()), "at {idx:?}: {want} vs {have}");
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[test]
fn strided_broadcast_and_permuted_layouts_match_the_op_definition() {
    // Small: transposed input, broadcast row, permuted output.
    let shape = [5, 7];
    check(&shape, Layout::new(vec![5, 7], vec![1, 5], 3), Layout::new(vec![5, 7], vec![0, 1], 0), Layout::new(vec![5, 7], vec![1, 5], 0));
    // Rank 3 with a size-1 dim and a sliced input (step 2).
    let shape = [3, 1, 9];
    check(&shape, Layout::new(vec![3, 1, 9], vec![18, 4, 2], 1), Layout::contiguous(&shape), Layout::contiguous(&shape));
    // Large enough for several blocks and rayon tasks, with inner rows that
    // do not divide the block size.
    let shape = [97, 1531];
    let t = Layout::new(vec![97, 1531], vec![1, 97], 0);
    check(&shape, t, Layout::new(vec![97, 1531], vec![1, 0], 0), Layout::contiguous(&shape));
    // Rows longer than a block (the shared buffers' blocks are 1664 here),
    // split across rayon tasks.
    let shape = [5, 9001];
    check(&shape, Layout::contiguous(&shape), Layout::new(vec![5, 9001], vec![0, 1], 0), Layout::contiguous(&shape));
    // A scalar (rank 0) and an empty tensor.
    check(&[], Layout::new(vec![], vec![], 2), Layout::new(vec![], vec![], 0), Layout::contiguous(&[]));
    check(&[0, 4], Layout::contiguous(&[0, 4]), Layout::contiguous(&[0, 4]), Layout::contiguous(&[0, 4]));
}

/// Outputs past `block::STREAM_MIN_BYTES` are written with non-temporal
/// stores: the same bits, rows that do not divide into 16-byte units, and
/// every alignment of the destination.
#[test]
fn streamed_outputs_match_the_op_definition() {
    let shape = [4099, 2049];
    assert!(shape.iter().product::<usize>() * 4 >= block::STREAM_MIN_BYTES);
    check(&shape, Layout::contiguous(&shape), Layout::new(vec![4099, 2049], vec![0, 1], 0), Layout::contiguous(&shape));
    let v: Vec<f32> = (0..37).map(|i| i as f32 * 0.25 - 3.0).collect();
    for skip in 0..4 {
        for len in [0, 1, 3, 4, 5, 17, 33] {
            let mut o = [MaybeUninit::new(f32::NAN); 40];
            block::stream_f32(&v[..len], &mut o[skip..skip + len]);
            // SAFETY: every slot was initialised above.
            let got: Vec<f32> = o[skip..skip + len].iter().map(|x| unsafe { x.assume_init() }).collect();
            assert_eq!(got, v[..len], "offset {skip}, {len} elements");
        }
    }
}

#[test]
fn unfit_programs_decline_and_bad_layouts_are_errors() {
    let steps = [Step::new(OpKind::Neg, 0, Rhs::None, 1, DType::F32)];
    let p = Program { steps: &steps, num_values: 2, stored: 1, dtypes: &[DType::F32; 2], read: &[true] };
    let l = Layout::contiguous(&[3]);
    let ints = CpuStorage::I64(vec![1, 2, 3]);
    assert!(fused("test", &p, &[(&ints, l.clone())], &l).is_none(), "an input of another dtype than the program's declines");
    let exp = [Step::new(OpKind::Exp, 0, Rhs::None, 1, DType::I64)];
    let p_int = Program { steps: &exp, num_values: 2, stored: 1, dtypes: &[DType::I64; 2], read: &[true] };
    assert!(fused("test", &p_int, &[(&ints, l.clone())], &l).is_none(), "a float function computed in i64 declines");
    let short = CpuStorage::F32(vec![1.0, 2.0]);
    assert!(matches!(fused("test", &p, &[(&short, l.clone())], &l), Some(Err(_))), "a layout past the buffer is an error, not a panic");
}

/// A bool mask, casts, `where` with a scalar and i64 arithmetic over f16
/// inputs (one transposed), large enough for rayon tasks: the bits eager's
/// ops give one by one.
#[test]
fn mixed_dtype_programs_match_eager_ops() {
    use crate::dtype::DType as D;
    use crate::tensor::Tensor;
    let (rows, cols) = (300, 400);
    let dev = crate::device::Device::Cpu;
    let f16s = |seed| values(rows * cols, seed).into_iter().map(half::f16::from_f32).collect::<Vec<_>>();
    let (vg, vh) = (f16s(3), f16s(4));
    let g = Tensor::from_vec(vg.clone(), &[rows, cols], &dev).unwrap();
    let h = Tensor::from_vec(vh.clone(), &[cols, rows], &dev).unwrap().t().unwrap();
    let m = h.gt(0.0).unwrap();
    let p = g.mul(&m.to_dtype(D::F16).unwrap()).unwrap();
    let want = p.where_(&m, -1.5).unwrap().to_dtype(D::I64).unwrap().maximum(-1i64).unwrap();
    let steps = [
        Step::new(OpKind::Gt, 1, Rhs::Scalar(0.0), 2, D::F16),
        Step::new(OpKind::ToDtype, 2, Rhs::None, 3, D::F16),
        Step::new(OpKind::Mul, 0, Rhs::Value(3), 4, D::F16),
        Step { cond: Some(2), ..Step::new(OpKind::Where, 4, Rhs::Scalar(-1.5), 5, D::F16) },
        Step::new(OpKind::ToDtype, 5, Rhs::None, 6, D::I64),
        Step::new(OpKind::Maximum, 6, Rhs::Scalar(-1.0), 7, D::I64),
    ];
    let dtypes = [D::F16, D::F16, D::Bool, D::F16, D::F16, D::F16, D::I64, D::I64];
    let p = Program { steps: &steps, num_values: 8, stored: 7, dtypes: &dtypes, read: &[true, true] };
    let (sg, sh) = (CpuStorage::F16(vg), CpuStorage::F16(vh));
    let out = Layout::contiguous(&[rows, cols]);
    let inputs = [(&sg, Layout::contiguous(&[rows, cols])), (&sh, Layout::new(vec![rows, cols], vec![1, rows], 0))];
    let got = fused("test", &p, &inputs, &out).expect("runs fused").expect("no error");
    let CpuStorage::I64(got) = got else { panic!("an i64 result") };
    assert_eq!(got, want.to_vec::<i64>().unwrap());
    // A program whose value dtypes disagree with its steps declines.
    let mut wrong = dtypes;
    wrong[2] = D::F16;
    let p = Program { dtypes: &wrong, ..p };
    assert!(fused("test", &p, &inputs, &out).is_none());
}

/// Values share buffers once their last reader has run: a chain needs two
/// (so W2's runs in blocks of 3072), a one-op kernel keeps [`BLOCK`], a
/// value read again later keeps its buffer until then, and a program that
/// defines a value twice keeps one buffer per value.
#[test]
fn buffers_are_shared_by_liveness() {
    let f = DType::F32;
    let chain: Vec<Step> = (0..6).map(|i| Step::new(OpKind::Tanh, i, Rhs::None, i + 1, f)).collect();
    let p = Program { steps: &chain, num_values: 7, stored: 6, dtypes: &[f; 7], read: &[true] };
    let s = slots::plan(&p, 1, &[6]);
    assert_eq!((s.buffers.len(), s.block), (2, 3072));
    assert!(chain.iter().all(|st| s.slot[st.a] != s.slot[st.out]), "a step never writes the buffer it reads");
    let one = [Step::new(OpKind::Exp, 0, Rhs::None, 1, f)];
    let p1 = Program { steps: &one, num_values: 2, stored: 1, dtypes: &[f; 2], read: &[true] };
    assert_eq!(slots::plan(&p1, 1, &[1]).block, BLOCK);
    let add = [Step::new(OpKind::Add, 0, Rhs::Value(1), 2, f)];
    let p_add = Program { steps: &add, num_values: 3, stored: 2, dtypes: &[f; 3], read: &[true, true] };
    assert_eq!(slots::plan(&p_add, 2, &[2]).block, BLOCK, "never shorter than unshared buffers' blocks");
    // Input 0 is read by the last step, so it keeps its buffer; the stored
    // value 1 of a multi-output kernel too.
    let reread = [
        Step::new(OpKind::Neg, 0, Rhs::None, 1, f),
        Step::new(OpKind::Exp, 1, Rhs::None, 2, f),
        Step::new(OpKind::Sin, 2, Rhs::None, 3, f),
        Step::new(OpKind::Add, 3, Rhs::Value(0), 4, f),
    ];
    let p2 = Program { steps: &reread, num_values: 5, stored: 4, dtypes: &[f; 5], read: &[true] };
    let s2 = slots::plan(&p2, 1, &[4, 1]);
    let distinct = |vs: &[usize]| vs.iter().all(|&a| vs.iter().filter(|&&b| s2.slot[a] == s2.slot[b]).count() == 1);
    assert!(distinct(&[0, 1, 2]) && distinct(&[0, 1, 3]) && distinct(&[0, 1, 4]));
    // Defined twice: one buffer per value.
    let twice = [Step::new(OpKind::Neg, 0, Rhs::None, 1, f), Step::new(OpKind::Exp, 0, Rhs::None, 1, f)];
    let p3 = Program { steps: &twice, num_values: 2, stored: 1, dtypes: &[f; 2], read: &[true] };
    assert_eq!(slots::plan(&p3, 1, &[1]).slot, vec![0, 1]);
    // Buffers hold one representation: a bool value never takes an f32's.
    let mixed = [Step::new(OpKind::Gt, 0, Rhs::Scalar(0.0), 1, f), Step::new(OpKind::ToDtype, 1, Rhs::None, 2, f)];
    let p4 = Program { steps: &mixed, num_values: 3, stored: 2, dtypes: &[f, DType::Bool, f], read: &[true] };
    let s4 = slots::plan(&p4, 1, &[2]);
    assert_eq!(s4.buffers.len(), 2);
    assert_eq!(s4.slot[0], s4.slot[2], "the cast's result takes the input's f32 buffer");
}

/// One random body op: `(op, a, rhs)` with operands picked among the
/// values before it (as fractions, so any earlier value can be read again
/// many steps later), `rhs` a value, a scalar or none.
fn random_step() -> impl proptest::strategy::Strategy<Value = (usize, f64, Option<f64>, f32)> {
    (0usize..9, 0.0f64..1.0, proptest::option::of(0.0f64..1.0), -2.0f32..2.0)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
    /// Random f32 programs over one or two inputs, lengths across blocks and
    /// rayon tasks, any earlier value read again and one or two values
    /// stored (a multi-output kernel over its own buffers): the bits of the
    /// per-element evaluation of the same op definitions, whatever buffers
    /// the liveness plan shares.
    #[test]
    fn shared_buffers_compute_what_one_buffer_per_value_does(
        raw in proptest::collection::vec(random_step(), 1..12),
        n in 1usize..40_000,
        two_inputs in proptest::bool::ANY,
        extra in 0.0f64..1.0,
    ) {
        let f = DType::F32;
        let inputs = if two_inputs { 2 } else { 1 };
        let ops = [OpKind::Neg, OpKind::Exp, OpKind::Tanh, OpKind::Sin, OpKind::Abs, OpKind::Add, OpKind::Mul, OpKind::Maximum, OpKind::Sub];
        let pick = |x: f64, below: usize| ((x * below as f64) as usize).min(below - 1);
        // The first five take no second operand.
        let steps: Vec<Step> = raw.iter().enumerate().map(|(i, &(k, a, rhs, scalar))| {
            let (op, here) = (ops[k], inputs + i);
            let rhs = match rhs {
                _ if k < 5 => Rhs::None,
                Some(r) => Rhs::Value(pick(r, here)),
                None => Rhs::Scalar(scalar as f64),
            };
            Step::new(op, pick(a, here), rhs, here, f)
        }).collect();
        let num_values = inputs + steps.len();
        let stored = num_values - 1;
        let dtypes = vec![f; num_values];
        let read = vec![true; inputs];
        let p = Program { steps: &steps, num_values, stored, dtypes: &dtypes, read: &read };
        let l = Layout::contiguous(&[n]);
        let data: Vec<Vec<f32>> = (0..inputs).map(|k| values(n, 7 + k as u32)).collect();
        let bufs: Vec<CpuStorage> = data.iter().map(|v| CpuStorage::F32(v.clone())).collect();
        let ins: Vec<Input<'_>> = bufs.iter().map(|b| (b, l.clone())).collect();
        // A second stored value: any value a step defines.
        let second = pick(extra, steps.len()) + inputs;
        let dsts = vec![Dst { own: None, stored, buf: Vec::new() }, Dst { own: None, stored: second, buf: Vec::new() }];
        let refs: Vec<&CpuStorage> = bufs.iter().collect();
        let got = run_into::<f32>("test", &p, &refs, &ins, &l, dsts).expect("runs");
        for i in 0..n {
            let v = per_element(&steps, data.iter().map(|d| d[i]).collect());
            for (out, want) in got.iter().zip([v[stored], v[second]]) {
                let have = out[i];
                proptest::prop_assert!(want.to_bits() == have.to_bits() || (want.is_nan() && have.is_nan()), "at {}: {} vs {}", i, want, have);
            }
        }
    }
}
