//! Kernels over several dtypes (comparisons, `where_`, casts, integer and
//! bool values, promotion between values) rendered with the types
//! [`KernelTypes::infer`] gives them, against a Rust evaluation of the
//! body that follows the CPU evaluator's rules (eager's casts and
//! promotion; f16/bf16 rounded after every op), bit for bit.

use super::half::{bf16_value, f16_value, to_bf16_64, to_f16_64};
use super::harness::{Launch, Program};
use super::*;
use crate::dtype::DType;
use crate::graph::Prim;
use crate::kernel::elementwise::{compare, BoolOp, IntOp};

use DType as D;

/// A value of the reference, in its dtype's compute representation.
#[derive(Clone, Copy, Debug)]
enum V {
    F32(f32),
    F64(f64),
    I64(i64),
    Bool(bool),
}

/// A double rounded once to `d` (f32, f16 or bf16), as an f32.
fn round_to(x: f64, d: D) -> f32 {
    match d {
        D::F16 => f16_value(to_f16_64(x)),
        D::BF16 => bf16_value(to_bf16_64(x)),
        _ => x as f32,
    }
}

/// Eager's cast of `v` to `d` (Rust's `as` for integers, saturating).
fn cast(v: V, d: D) -> V {
    let (f, i, b) = match v {
        V::F32(x) => (f64::from(x), x as i64, x != 0.0),
        V::F64(x) => (x, x as i64, x != 0.0),
        V::I64(x) => (x as f64, x, x != 0),
        V::Bool(x) => (f64::from(u8::from(x)), i64::from(x), x),
    };
    match d {
        // i64 -> f32 rounds once (`as f32`), not through f64.
        D::F32 => V::F32(if let V::I64(x) = v { x as f32 } else { f as f32 }),
        D::F16 | D::BF16 => V::F32(round_to(f, d)),
        D::F64 => V::F64(f),
        D::I64 => V::I64(i),
        D::Bool => V::Bool(b),
    }
}

fn load(bits: u64, d: D) -> V {
    match d {
        D::F32 => V::F32(f32::from_bits(bits as u32)),
        D::F64 => V::F64(f64::from_bits(bits)),
        D::F16 => V::F32(f16_value(bits as u16)),
        D::BF16 => V::F32(bf16_value(bits as u16)),
        D::I64 => V::I64(bits as i64),
        D::Bool => V::Bool(bits != 0),
    }
}

fn store(v: V, d: D) -> u64 {
    match (v, d) {
        (V::F32(x), D::F32) => u64::from(x.to_bits()),
        (V::F32(x), D::F16) => u64::from(to_f16_64(f64::from(x))),
        (V::F32(x), D::BF16) => u64::from(to_bf16_64(f64::from(x))),
        (V::F64(x), D::F64) => x.to_bits(),
        (V::I64(x), D::I64) => x as u64,
        (V::Bool(x), D::Bool) => u64::from(x),
        other => panic!("{other:?}"),
    }
}

struct Apply2<C>(C, C);

impl<C: Compute> OpVisitor<C> for Apply2<C> {
    type Out = C;
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) -> C {
        f(self.0, self.1)
    }
}

/// One op in compute dtype `c` on operands already cast to it (`b` is `a`
/// for unary ops); `float_scalar`: `b` is a scalar of float arithmetic,
/// taken as `Compute::of` takes it.
fn op_at(op: OpKind, a: V, b: V, cond: Option<bool>, c: D) -> V {
    if op == OpKind::ToDtype {
        return a;
    }
    if let Some(k) = cond {
        return if k { a } else { b };
    }
    if op.is_comparison() {
        let r = match (a, b) {
            (V::F32(x), V::F32(y)) => compare(op, x, y),
            (V::F64(x), V::F64(y)) => compare(op, x, y),
            (V::I64(x), V::I64(y)) => compare(op, x, y),
            (V::Bool(x), V::Bool(y)) => compare(op, x, y),
            other => panic!("{other:?}"),
        };
        return V::Bool(r.expect("a comparison"));
    }
    match (a, b) {
        (V::F32(x), V::F32(y)) => {
            let r = elementwise::with_op(op, Apply2(x, y)).unwrap();
            V::F32(if c == D::F32 { r } else { round_to(f64::from(r), c) })
        }
        (V::F64(x), V::F64(y)) => V::F64(elementwise::with_op(op, Apply2(x, y)).unwrap()),
        (V::I64(x), V::I64(y)) => V::I64(IntOp::of(op).unwrap().eval(x, y)),
        (V::Bool(x), V::Bool(y)) => V::Bool(BoolOp::of(op).unwrap().eval(x, y)),
        other => panic!("{other:?}"),
    }
}

/// The body at one element: the stored bits from the loaded bits.
fn reference(k: &Kernel, types: &KernelTypes, loads: &[u64]) -> u64 {
    let mut vals: Vec<Option<V>> = vec![None; k.num_values];
    for n in &k.body {
        let out = n.out.unwrap().index();
        let c = types.compute[out];
        let get = |a: &Arg| -> V {
            match a {
                Arg::Tensor(v) => cast(vals[v.index()].unwrap(), c),
                Arg::Scalar(e) => {
                    let x = scalar_f64(e.as_const().unwrap());
                    let float_arith = n.kind().is_some_and(|o| !o.is_comparison() && o != OpKind::Where) && c != D::I64 && c != D::Bool;
                    if float_arith {
                        // `Compute::of`: the compute type's rounding only.
                        if c == D::F64 {
                            V::F64(x)
                        } else {
                            V::F32(x as f32)
                        }
                    } else {
                        cast(V::F64(x), c)
                    }
                }
                other => panic!("{other:?}"),
            }
        };
        let v = match &n.op {
            Op::Load(j) => load(loads[*j], types.values[out]),
            Op::Prim(Prim::CastLike) => get(&n.args[0]),
            Op::Dsl { op: OpKind::Where, .. } => {
                let V::Bool(cond) = vals[n.args[1].as_tensor().unwrap().index()].unwrap() else { panic!("a bool condition") };
                op_at(OpKind::Where, get(&n.args[0]), get(&n.args[2]), Some(cond), c)
            }
            Op::Dsl { op, .. } => {
                let a = get(&n.args[0]);
                let b = match n.args.get(1) {
                    Some(Arg::DType(_)) | None => a,
                    Some(arg) => get(arg),
                };
                op_at(*op, a, b, None, c)
            }
            other => panic!("{other:?}"),
        };
        vals[out] = Some(v);
    }
    store(vals[k.out.index()].unwrap(), types.values[k.out.index()])
}

fn lit(x: f64) -> Arg {
    Arg::Scalar(ScalarExpr::F64(x))
}

fn int(x: i64) -> Arg {
    Arg::Scalar(ScalarExpr::I64(x))
}

fn to(d: DType) -> Arg {
    Arg::DType(d)
}

/// A test kernel and the dtypes of its primals (the stage's inputs).
struct TypedKernel {
    kernel: Kernel,
    primals: Vec<D>,
}

/// relu's backward: `mul(g, cast_like(gt(h, 0), g))`.
fn relu_backward(d: D) -> TypedKernel {
    let nodes = vec![
        node(OpKind::Gt, vec![t(1), lit(0.0)], 2),
        Node::new(Op::Prim(Prim::CastLike), vec![t(2), t(0)], Some(ValueId(3))),
        node(OpKind::Mul, vec![t(0), t(3)], 4),
    ];
    TypedKernel { kernel: kernel(2, nodes), primals: vec![d, d] }
}

/// Promotion between f16, f64, i64 and bool values, `where_` with a
/// tensor and a scalar, casts to f16 from a double.
fn mixed_to_f16() -> TypedKernel {
    let nodes = vec![
        node(OpKind::Add, vec![t(0), t(1)], 4),
        node(OpKind::Mul, vec![t(2), int(3)], 5),
        node(OpKind::Gt, vec![t(5), t(1)], 6),
        node(OpKind::Where, vec![t(4), t(6), t(2)], 7),
        node(OpKind::ToDtype, vec![t(7), to(DType::F16)], 8),
        node(OpKind::Add, vec![t(8), t(3)], 9),
        node(OpKind::Le, vec![t(9), lit(0.1)], 10),
        node(OpKind::Where, vec![t(0), t(10), lit(0.3)], 11),
    ];
    TypedKernel { kernel: kernel(4, nodes), primals: vec![D::F16, D::F64, D::I64, D::Bool] }
}

/// Integer and bool arithmetic, wrapping; casts of floats (NaN, infinity,
/// large values) to i64 and bool.
fn integers_to_bool() -> TypedKernel {
    let nodes = vec![
        node(OpKind::Eq, vec![t(0), lit(0.5)], 4),
        node(OpKind::Where, vec![t(2), t(4), int(-7)], 5),
        node(OpKind::ToDtype, vec![t(5), to(DType::F32)], 6),
        node(OpKind::Minimum, vec![t(6), t(0)], 7),
        node(OpKind::ToDtype, vec![t(7), to(DType::I64)], 8),
        node(OpKind::Sub, vec![t(8), t(2)], 9),
        node(OpKind::Abs, vec![t(9)], 10),
        node(OpKind::Neg, vec![t(10)], 11),
        node(OpKind::Square, vec![t(11)], 12),
        node(OpKind::Maximum, vec![t(12), t(2)], 13),
        node(OpKind::Add, vec![t(13), int(i64::MAX)], 14),
        node(OpKind::Relu, vec![t(14)], 15),
        node(OpKind::ToDtype, vec![t(15), to(DType::Bool)], 16),
        node(OpKind::Mul, vec![t(16), t(3)], 17),
        node(OpKind::Ne, vec![t(17), t(3)], 18),
        node(OpKind::Add, vec![t(18), t(3)], 19),
    ];
    TypedKernel { kernel: kernel(4, nodes), primals: vec![D::F16, D::F64, D::I64, D::Bool] }
}

/// f16 with bf16 computes in f32; integer division and float functions
/// of integers in f32; a double cast to i64 and bf16.
fn halves_and_integer_division() -> TypedKernel {
    let nodes = vec![
        node(OpKind::Add, vec![t(0), t(1)], 4),
        node(OpKind::Div, vec![t(2), int(3)], 5),
        node(OpKind::Exp, vec![t(5)], 6),
        node(OpKind::Sub, vec![t(4), t(6)], 7),
        node(OpKind::ToDtype, vec![t(3), to(DType::I64)], 8),
        node(OpKind::Ge, vec![t(8), t(2)], 9),
        node(OpKind::Where, vec![t(7), t(9), t(3)], 10),
        node(OpKind::ToDtype, vec![t(10), to(DType::BF16)], 11),
    ];
    TypedKernel { kernel: kernel(4, nodes), primals: vec![D::F16, D::BF16, D::I64, D::F64] }
}

#[test]
fn typed_kernels_match_the_rust_evaluation_bit_for_bit() {
    let mut cases: Vec<TypedKernel> = [D::F32, D::F64, D::F16, D::BF16].into_iter().map(relu_backward).collect();
    cases.extend([mixed_to_f16(), integers_to_bool(), halves_and_integer_division()]);
    const SHAPES: [&[i64]; 3] = [&[4, 5, 6], &[257], &[]];
    let mut units = Vec::new();
    let mut typed = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        // The kernel's inputs are its primals in order of first use.
        let ins: Vec<D> = c.kernel.stage_values[..c.kernel.num_inputs()].iter().map(|v| c.primals[v.index()]).collect();
        let types = KernelTypes::infer(&c.kernel, &ins).unwrap();
        for (si, sizes) in SHAPES.iter().enumerate() {
            let k = Kernel { name: format!("typed_{}_{ci}_{si}", c.kernel.name), ..c.kernel.clone() };
            let r = render_cuda_typed(&k, &types, sizes.len(), &ScalarSlots::of(&k)).unwrap();
            let out = types.values[k.out.index()];
            units.push((r, std::iter::once(out).chain(ins.iter().copied()).collect::<Vec<D>>()));
        }
        typed.push((ins, types));
    }
    let Some(program) = Program::build("typed", &units) else { return };
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let (mut launches, mut which) = (Vec::new(), Vec::new());
    for ci in 0..cases.len() {
        let (ins, types) = &typed[ci];
        for (si, sizes) in SHAPES.iter().enumerate() {
            for kinds in [&[Shape::Dense][..], &[Shape::Reversed, Shape::Broadcast]] {
                let inputs = ins
                    .iter()
                    .enumerate()
                    .map(|(j, &d)| {
                        let (lay, len) = layout(kinds[j % kinds.len()], sizes, j as i64);
                        (lay, (0..len).map(|_| rng.bits(d)).collect())
                    })
                    .collect();
                let (out, len) = layout(Shape::Dense, sizes, 1);
                let out_dtype = types.values[cases[ci].kernel.out.index()];
                let sentinel = vec![0x5a5a_5a5a_5a5a_5a5a_u64 >> (64 - 8 * bytes_of(out_dtype)); len];
                let unit = ci * SHAPES.len() + si;
                launches.push(Launch { unit, sizes: sizes.to_vec(), out: (out, sentinel), inputs, scalars: vec![], grid: 2, block: 3 });
                which.push(ci);
            }
        }
    }
    let outs = program.run(&launches);
    let mut checked = 0;
    for ((l, got), ci) in launches.iter().zip(&outs).zip(&which) {
        let (k, types) = (&cases[*ci].kernel, &typed[*ci].1);
        let out_dtype = types.values[k.out.index()];
        let mut want = l.out.1.clone();
        for ix in indices(&l.sizes) {
            let loads: Vec<u64> = l.inputs.iter().map(|(lay, buf)| buf[at(lay, &ix)]).collect();
            want[at(&l.out.0, &ix)] = reference(k, types, &loads);
            checked += 1;
        }
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w || (is_nan(out_dtype, g) && is_nan(out_dtype, w)),
                "kernel `{}`, sizes {:?}, element {i}: C gives {g:#x}, Rust {w:#x}",
                k.name,
                l.sizes
            );
        }
    }
    assert!(checked >= 750 * cases.len(), "{checked} elements checked");
}

#[test]
fn the_types_follow_eagers_promotion() {
    let k = mixed_to_f16().kernel;
    let types = KernelTypes::infer(&k, &[D::F16, D::F64, D::I64, D::Bool]).unwrap();
    // loads, add (f64), mul (i64), gt (bool, computed in f64), where (f64),
    // to f16, add bool (f16), le (bool in f16), where with a scalar (f16).
    use D::*;
    assert_eq!(types.values, [F16, F64, I64, Bool, F64, I64, Bool, F64, F16, F16, Bool, F16]);
    assert_eq!(types.compute, [F16, F64, I64, Bool, F64, I64, F64, F64, F16, F16, F16, F16]);
    let src = render_cuda_typed(&k, &types, 1, &ScalarSlots::default()).unwrap().source;
    assert!(src.contains("const __half *in0, const double *in1, const long long *in2, const bool *in3"), "{src}");
    assert!(src.contains("aot_f64_to_f32_odd") && src.contains("#include <cuda_fp16.h>"), "{src}");
    // Float math on a bool is eager's error, so no types.
    let bad = kernel(1, vec![node(OpKind::Gt, vec![t(0), lit(0.0)], 1), node(OpKind::Exp, vec![t(1)], 2)]);
    let e = KernelTypes::infer(&bad, &[F32]).unwrap_err();
    assert!(e.to_string().contains("`exp` of a bool tensor"), "{e}");
}
