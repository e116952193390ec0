//! The rendered CUDA C, compiled for the CPU through the host shim, stores
//! the bits that evaluating the kernel body with
//! [`elementwise::with_op`] in Rust gives, for every element of strided
//! and broadcast layouts.

mod half;
mod harness;
mod typed;

use super::*;
use crate::graph::Node;
use crate::kernel::elementwise::{self, Compute, OpVisitor};
use crate::kernel::{is_elementwise, schedule};
use crate::op::OpKind;
use crate::types::ValueId;
use harness::{Launch, Layout, Program};

// ------------------------------------------------------------ kernels

fn t(v: u32) -> Arg {
    Arg::Tensor(ValueId(v))
}

fn lit(x: f64) -> Arg {
    Arg::Scalar(ScalarExpr::F64(x))
}

fn node(op: OpKind, args: Vec<Arg>, out: u32) -> Node {
    Node::new(op, args, Some(ValueId(out)))
}

/// The one kernel that scheduling `inputs` primals and then `nodes` gives
/// (the last node's value is the stage's output).
fn kernel(inputs: u32, nodes: Vec<Node>) -> Kernel {
    let mut all: Vec<Node> = (0..inputs).map(|i| Node::new(Op::Primal(i as usize), vec![], Some(ValueId(i)))).collect();
    all.extend(nodes);
    let last = all.last().and_then(|n| n.out).unwrap();
    let sch = schedule(&all, last.index() + 1, &[last], 0);
    let ks: Vec<&Kernel> = sch.kernels().collect();
    assert_eq!(ks.len(), 1, "expected one kernel from {all:?}");
    ks[0].clone()
}

/// The W2 benchmark: `sigmoid(tanh(x * 1.5 + 0.5) * 2 - 1)`.
fn w2() -> Kernel {
    kernel(
        1,
        vec![
            node(OpKind::Mul, vec![t(0), lit(1.5)], 1),
            node(OpKind::Add, vec![t(1), lit(0.5)], 2),
            node(OpKind::Tanh, vec![t(2)], 3),
            node(OpKind::Mul, vec![t(3), lit(2.0)], 4),
            node(OpKind::Sub, vec![t(4), lit(1.0)], 5),
            node(OpKind::Sigmoid, vec![t(5)], 6),
        ],
    )
}

/// `(a * b + a).relu()`, two inputs.
fn mul_add_relu() -> Kernel {
    kernel(2, vec![node(OpKind::Mul, vec![t(0), t(1)], 2), node(OpKind::Add, vec![t(2), t(0)], 3), node(OpKind::Relu, vec![t(3)], 4)])
}

/// `x * p0 + pow(x, p1 * 0.5)`: two parameter slots.
fn with_params() -> Kernel {
    let p = |i| Arg::Scalar(ScalarExpr::Param(i));
    let half = Arg::Scalar(ScalarExpr::Bin(crate::types::ScalarBinOp::Mul, Box::new(ScalarExpr::Param(2)), Box::new(ScalarExpr::F64(0.5))));
    kernel(1, vec![node(OpKind::Mul, vec![t(0), p(1)], 1), node(OpKind::Pow, vec![t(0), half], 2), node(OpKind::Add, vec![t(1), t(2)], 3)])
}

const BINARY: [OpKind; 7] = [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Maximum, OpKind::Minimum];

/// Every elementwise op: per op `neg(op(x[, y]))`, so that each is a kernel
/// of its own (`neg` is exact), then one chain through all of them.
fn every_op() -> Vec<Kernel> {
    // The float arithmetic (comparisons, `where_` and casts: `typed`).
    let typed = [OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge, OpKind::Where, OpKind::ToDtype];
    let ops: Vec<OpKind> = crate::OP_TABLE.iter().map(|s| s.kind).filter(|&o| is_elementwise(o) && !typed.contains(&o)).collect();
    assert_eq!(ops.len(), 24);
    let mut ks: Vec<Kernel> = ops
        .iter()
        .map(|&op| {
            let args = if BINARY.contains(&op) { vec![t(0), t(1)] } else { vec![t(0)] };
            kernel(2, vec![node(op, args, 2), node(OpKind::Neg, vec![t(2)], 3)])
        })
        .collect();
    // The chain: each op on the previous value (and `y` for binary ops).
    let mut nodes = Vec::new();
    let mut prev = 0;
    for (i, &op) in ops.iter().enumerate() {
        let out = 2 + i as u32;
        let args = if BINARY.contains(&op) { vec![t(prev), t(1)] } else { vec![t(prev)] };
        nodes.push(node(op, args, out));
        prev = out;
    }
    ks.push(kernel(2, nodes));
    ks
}

// ------------------------------------------------------------ reference

struct Apply<C>(C, C);

impl<C: Compute> OpVisitor<C> for Apply<C> {
    type Out = C;
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) -> C {
        f(self.0, self.1)
    }
}

/// The body evaluated at one element, with `round` after every op.
fn eval_body<C: Compute>(k: &Kernel, loads: &[C], params: &[Option<ScalarValue>], round: &dyn Fn(C) -> C) -> C {
    let mut vals: Vec<Option<C>> = vec![None; k.num_values];
    for n in &k.body {
        let v = match &n.op {
            Op::Load(j) => loads[*j],
            Op::Dsl { op, .. } => {
                let args: Vec<C> = n
                    .args
                    .iter()
                    .map(|a| match a {
                        Arg::Tensor(v) => vals[v.index()].unwrap(),
                        Arg::Scalar(e) => C::of(scalar_f64(e.eval(params).unwrap())),
                        other => panic!("argument {other:?}"),
                    })
                    .collect();
                round(elementwise::with_op(*op, Apply(args[0], *args.get(1).unwrap_or(&args[0]))).unwrap())
            }
            other => panic!("{other:?} in a body"),
        };
        vals[n.out.unwrap().index()] = Some(v);
    }
    vals[k.out.index()].unwrap()
}

/// The stored bits at one element, from the loaded inputs' bits.
fn reference(k: &Kernel, dtype: DType, loads: &[u64], params: &[Option<ScalarValue>]) -> u64 {
    let f32s = |f: fn(u16) -> f32| loads.iter().map(|&b| f(b as u16)).collect::<Vec<f32>>();
    match dtype {
        DType::F32 => {
            let l: Vec<f32> = loads.iter().map(|&b| f32::from_bits(b as u32)).collect();
            u64::from(eval_body(k, &l, params, &|x| x).to_bits())
        }
        DType::F64 => {
            let l: Vec<f64> = loads.iter().map(|&b| f64::from_bits(b)).collect();
            eval_body(k, &l, params, &|x| x).to_bits()
        }
        DType::F16 => u64::from(half::to_f16(eval_body(k, &f32s(half::f16_value), params, &half::round_f16))),
        DType::BF16 => u64::from(half::to_bf16(eval_body(k, &f32s(half::bf16_value), params, &half::round_bf16))),
        DType::I64 | DType::Bool => unreachable!("float kernels only"),
    }
}

fn is_nan(dtype: DType, b: u64) -> bool {
    match dtype {
        DType::F32 => f32::from_bits(b as u32).is_nan(),
        DType::F64 => f64::from_bits(b).is_nan(),
        DType::F16 => (b & 0x7fff) > 0x7c00,
        DType::BF16 => (b & 0x7fff) > 0x7f80,
        DType::I64 | DType::Bool => false,
    }
}

// ------------------------------------------------------------ inputs

/// xorshift64*: reproducible inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Specials (NaN, ±inf, ±0, subnormals, the edges of the math
    /// functions, large arguments of sin/cos), small values, and any bits.
    fn value(&mut self) -> f64 {
        const SPECIAL: [f64; 22] = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            1e-40,
            -3e-42,
            88.7,
            -103.9,
            8192.0,
            -8192.5,
            1e5,
            -3.3e7,
            1.7e30,
            65504.0,
            7e4,
            3e38,
            -1e-300,
        ];
        match self.below(4) {
            0 => SPECIAL[self.below(SPECIAL.len() as u64) as usize],
            1 => f64::from(f32::from_bits(self.next() as u32)),
            _ => (self.below(2001) as f64 - 1000.0) / 97.0,
        }
    }
    fn bits(&mut self, dtype: DType) -> u64 {
        let v = self.value();
        match dtype {
            DType::F32 => u64::from((v as f32).to_bits()),
            DType::F64 => v.to_bits(),
            DType::F16 => u64::from(half::to_f16(v as f32)),
            DType::BF16 => u64::from(half::to_bf16(v as f32)),
            // Integers: the value truncated (saturating), or an extreme.
            DType::I64 => match self.below(8) {
                0 => i64::MAX as u64,
                1 => i64::MIN as u64,
                _ => (v as i64) as u64,
            },
            DType::Bool => self.below(2),
        }
    }
}

/// Row-major strides of `sizes`.
fn dense(sizes: &[i64]) -> Vec<i64> {
    let mut s = vec![1; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * sizes[d + 1];
    }
    s
}

/// The layouts a launch may give an operand of shape `sizes`.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Row-major, at an offset.
    Dense,
    /// The transpose of a row-major buffer (dimensions reversed).
    Reversed,
    /// Broadcast along dimension 1 (stride 0), else row-major.
    Broadcast,
}

/// A layout of `kind` for `sizes`, at `offset`, and the buffer length it needs.
fn layout(kind: Shape, sizes: &[i64], offset: i64) -> (Layout, usize) {
    let mut strides = match kind {
        Shape::Dense => dense(sizes),
        Shape::Reversed => {
            let rev: Vec<i64> = sizes.iter().rev().copied().collect();
            dense(&rev).into_iter().rev().collect()
        }
        Shape::Broadcast => {
            let mut s = sizes.to_vec();
            if s.len() > 1 {
                s[1] = 1;
            }
            dense(&s)
        }
    };
    if let (Shape::Broadcast, Some(s)) = (kind, strides.get_mut(1)) {
        *s = 0;
    }
    let span: i64 = sizes.iter().zip(&strides).map(|(&n, &s)| (n - 1).max(0) * s).sum();
    (Layout { offset, strides }, (offset + span + 1) as usize)
}

/// Every element's multi-index, in row-major order.
fn indices(sizes: &[i64]) -> Vec<Vec<i64>> {
    let numel: i64 = sizes.iter().product();
    (0..numel)
        .map(|mut i| {
            let mut ix = vec![0; sizes.len()];
            for d in (0..sizes.len()).rev() {
                ix[d] = i % sizes[d];
                i /= sizes[d];
            }
            ix
        })
        .collect()
}

fn at(l: &Layout, ix: &[i64]) -> usize {
    (l.offset + ix.iter().zip(&l.strides).map(|(i, s)| i * s).sum::<i64>()) as usize
}

/// What a launch computes, and its check against the reference.
struct Case<'a> {
    kernel: &'a Kernel,
    dtype: DType,
    params: Vec<Option<ScalarValue>>,
}

/// A launch of unit `unit` over `sizes`, inputs laid out as `kinds`
/// (cycled), the output reversed when `reversed_out`. `aligned`: every
/// offset a multiple of 4 elements (the buffers are `malloc`'s, 16-byte
/// aligned), so a contiguous launch takes the vectorised loop; otherwise
/// the offsets are odd multiples of 1 and 2, and it cannot.
fn launch(rng: &mut Rng, case: &Case<'_>, unit: usize, sizes: &[i64], kinds: &[Shape], reversed_out: bool, aligned: bool) -> Launch {
    let n = case.kernel.num_inputs();
    let inputs = (0..n)
        .map(|j| {
            let (lay, len) = layout(kinds[j % kinds.len()], sizes, if aligned { 4 * j as i64 } else { 3 * j as i64 });
            (lay, (0..len).map(|_| rng.bits(case.dtype)).collect())
        })
        .collect();
    let (out, len) = layout(if reversed_out { Shape::Reversed } else { Shape::Dense }, sizes, if aligned { 0 } else { 2 });
    let sentinel = vec![0x5a5a_5a5a_5a5a_5a5a_u64 >> (64 - 8 * bytes_of(case.dtype)); len];
    let slots = ScalarSlots::of(case.kernel);
    let scalars = slots.values(&case.params).unwrap();
    Launch { unit, sizes: sizes.to_vec(), out: (out, sentinel), inputs, scalars, grid: 3, block: 4 }
}

fn bytes_of(d: DType) -> u32 {
    match d {
        DType::F32 => 4,
        DType::F64 | DType::I64 => 8,
        DType::F16 | DType::BF16 => 2,
        DType::Bool => 1,
    }
}

/// f64 bits as an integer in the order of the values.
fn ordered(b: u64) -> u64 {
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// Every element of `got` (the output buffer after `l`) against the
/// reference; elements outside the output keep their sentinel. Returns how
/// many elements were checked.
fn check(case: &Case<'_>, l: &Launch, got: &[u64]) -> usize {
    let (out, before) = &l.out;
    assert_eq!(got.len(), before.len());
    let mut want = before.clone();
    for ix in indices(&l.sizes) {
        let loads: Vec<u64> = l.inputs.iter().map(|(lay, buf)| buf[at(lay, &ix)]).collect();
        want[at(out, &ix)] = reference(case.kernel, case.dtype, &loads, &case.params);
    }
    // f64 GELU calls the C library's erf/erfc, which may differ from
    // `erf::erf` in the last place (the one allowed difference).
    let gelu64 = case.dtype == DType::F64 && case.kernel.ops().any(|o| o == OpKind::Gelu);
    let ulps = if gelu64 { 4 } else { 0 };
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let same = g == w || (is_nan(case.dtype, g) && is_nan(case.dtype, w)) || ordered(g).abs_diff(ordered(w)) <= ulps;
        assert!(
            same,
            "kernel `{}` ({:?}), sizes {:?}, output element {i}: C gives {g:#x}, Rust {w:#x}",
            case.kernel.name, case.dtype, l.sizes
        );
    }
    l.sizes.iter().product::<i64>() as usize
}

/// Renders `cases`, compiles them into one program and checks launches of
/// each over several shapes and layouts (skipped without a compiler).
fn run_cases(tag: &str, cases: &[Case<'_>]) {
    const SHAPES: [&[i64]; 5] = [&[4, 5, 6], &[3, 1, 7], &[257], &[], &[2, 0, 3]];
    const KINDS: [&[Shape]; 4] =
        [&[Shape::Dense], &[Shape::Reversed, Shape::Broadcast], &[Shape::Broadcast, Shape::Reversed], &[Shape::Dense, Shape::Broadcast]];
    let mut units = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        for (si, sizes) in SHAPES.iter().enumerate() {
            // Units in one program need distinct names.
            let k = Kernel { name: format!("{}_{ci}_{si}", c.kernel.name), ..c.kernel.clone() };
            let r = render_cuda(&k, c.dtype, sizes.len(), &ScalarSlots::of(c.kernel)).unwrap();
            units.push((r, vec![c.dtype; 1 + c.kernel.num_inputs()]));
        }
    }
    let Some(program) = Program::build(tag, &units) else { return };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // The aligned launches draw from their own stream, so the others see
    // the same values whether or not they run.
    let mut aligned_rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut launches = Vec::new();
    let mut which = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        for (si, sizes) in SHAPES.iter().enumerate() {
            for (ki, kinds) in KINDS.iter().enumerate() {
                launches.push(launch(&mut rng, c, ci * SHAPES.len() + si, sizes, kinds, ki % 2 == 1, false));
                which.push(ci);
                if ki == 0 {
                    launches.push(launch(&mut aligned_rng, c, ci * SHAPES.len() + si, sizes, kinds, false, true));
                    which.push(ci);
                }
            }
        }
    }
    let outs = program.run(&launches);
    let checked: usize = launches.iter().zip(&outs).zip(&which).map(|((l, got), &ci)| check(&cases[ci], l, got)).sum();
    assert!(checked > 1000 * cases.len(), "{checked} elements checked");
}

fn all_kernels() -> Vec<Kernel> {
    let mut ks = vec![w2(), mul_add_relu(), with_params()];
    ks.extend(every_op());
    ks
}

/// Scalar arguments: parameter 1 is 0.1, parameter 2 is the integer 3.
fn params() -> Vec<Option<ScalarValue>> {
    vec![None, Some(ScalarValue::F64(0.1)), Some(ScalarValue::I64(3))]
}

fn run_dtype(tag: &str, dtype: DType) {
    let ks = all_kernels();
    let cases: Vec<Case<'_>> = ks.iter().map(|k| Case { kernel: k, dtype, params: params() }).collect();
    run_cases(tag, &cases);
}

#[test]
fn f32_kernels_match_the_rust_definition_bit_for_bit() {
    run_dtype("f32", DType::F32);
}

#[test]
fn f64_kernels_match_the_rust_definition_bit_for_bit() {
    run_dtype("f64", DType::F64);
}

#[test]
fn f16_kernels_round_every_op_like_eager() {
    run_dtype("f16", DType::F16);
}

#[test]
fn bf16_kernels_round_every_op_like_eager() {
    run_dtype("bf16", DType::BF16);
}

// ------------------------------------------------------------ the text

#[test]
fn the_unit_has_the_documented_entry_point_and_params() {
    let k = with_params();
    let slots = ScalarSlots::of(&k);
    assert_eq!(slots.exprs().len(), 2);
    let r = render_cuda(&k, DType::F32, 2, &slots).unwrap();
    assert_eq!(r.name, k.name);
    let s = &r.source;
    assert!(
        s.contains(&format!("extern \"C\" __global__ void {}(float *out, const float *in0, const aot_params_{0} p) {{", k.name)),
        "{s}"
    );
    let fields = "    long long numel;\n    long long contiguous;\n    long long sizes[2];\n    long long out_offset;\n    long long out_strides[2];\n    long long in0_offset;\n    long long in0_strides[2];\n    double scalars[2];\n};";
    assert!(s.contains(fields), "{s}");
    assert!(s.contains("(float)p.scalars[0]") && s.contains("(float)p.scalars[1]"), "{s}");
    assert!(!s.contains("#include"), "f32 needs no header:\n{s}");
    // f16 includes its header, converts on load and store, rounds each op.
    let r = render_cuda(&w2(), DType::F16, 1, &ScalarSlots::default()).unwrap();
    assert!(r.source.contains("#include <cuda_fp16.h>") && r.source.contains("__half *out"), "{}", r.source);
    assert_eq!(r.source.matches("__half2float(__float2half_rn(").count(), 6, "{}", r.source);
    // Each helper once, guarded, so units concatenate.
    let r = render_cuda(&every_op().pop().unwrap(), DType::F32, 1, &ScalarSlots::default()).unwrap();
    assert_eq!(r.source.matches("#define AOT_HELPER_AOT_EXP\n").count(), 1);
    assert_eq!(r.source.matches("#define AOT_HELPER_AOT_LOG1P\n").count(), 1);
    assert!(r.source.contains("(float)sin((double)c"), "{}", r.source);
}

#[test]
fn a_multi_output_kernel_takes_one_pointer_per_stored_value() {
    // mul_add_relu storing its intermediate `x * 2 + y` (%3) as well.
    let mut k = mul_add_relu();
    let last = k.out;
    k.extra_outs = vec![ValueId(3)];
    assert_ne!(last, ValueId(3));
    let r = render_cuda(&k, DType::F16, 2, &ScalarSlots::default()).unwrap();
    let s = &r.source;
    let entry = format!("void {}(__half *out, __half *out1, const __half *in0, const __half *in1, const aot_params_{0} p)", k.name);
    assert!(s.contains(&entry), "{s}");
    assert!(s.contains("__half &r1) {") && s.contains("    r1 = __float2half_rn(c"), "{s}");
    assert!(s.contains("out[o] = aot_body_") && s.contains(", out1[o]);"), "{s}");
    assert!(s.contains("aot_vec4<__half> r1;") && s.contains("[v] = r1;"), "the vectorised path stores both:\n{s}");
    // A reduction kernel stores one value.
    let mut red = kernel(1, vec![node(OpKind::Exp, vec![t(0)], 1), node(OpKind::Sum, vec![t(1)], 2)]);
    red.extra_outs = vec![ValueId(1)];
    assert!(render_cuda(&red, DType::F32, 2, &ScalarSlots::default()).is_err());
}

#[test]
fn literals_are_exact_and_rounded_to_the_compute_type() {
    let k = kernel(1, vec![node(OpKind::Mul, vec![t(0), lit(0.1)], 1), node(OpKind::Add, vec![t(1), lit(f64::INFINITY)], 2)]);
    let f = render_cuda(&k, DType::F32, 1, &ScalarSlots::default()).unwrap().source;
    assert!(f.contains("= 0.1f;") && f.contains("__uint_as_float(0x7f800000u)"), "{f}");
    let d = render_cuda(&k, DType::F64, 1, &ScalarSlots::default()).unwrap().source;
    assert!(d.contains("= 0.1;") && d.contains("__longlong_as_double(0x7ff0000000000000LL)"), "{d}");
    // 1e-50 underflows to 0 in float: `(float)1e-50`.
    let k = kernel(1, vec![node(OpKind::Add, vec![t(0), lit(1e-50)], 1), node(OpKind::Neg, vec![t(1)], 2)]);
    let f = render_cuda(&k, DType::F32, 1, &ScalarSlots::default()).unwrap().source;
    assert!(f.contains("= 0.0f;"), "{f}");
}

#[test]
fn a_missing_slot_or_a_foreign_node_is_an_error() {
    let k = with_params();
    let e = render_cuda(&k, DType::F32, 1, &ScalarSlots::default()).unwrap_err();
    assert!(e.to_string().contains("`mul`") && e.to_string().contains("no value or slot"), "{e}");
    let mut bad = w2();
    bad.body[3] = node(OpKind::Matmul, vec![t(2), t(2)], 3);
    let e = render_cuda(&bad, DType::F32, 1, &ScalarSlots::default()).unwrap_err();
    assert!(e.to_string().contains("body node 3") && e.to_string().contains("`matmul`"), "{e}");
}

#[test]
fn params_are_flat_words_and_detect_the_fast_path() {
    let sizes = [2, 3];
    let (d, b) = ([3i64, 1], [0i64, 1]);
    let op = |strides: &'static [i64]| Operand { offset: 0, strides };
    let w = pack_params(&sizes, Operand { offset: 5, strides: &d }, &[op(&[3, 1])], &[0.25]).unwrap();
    assert_eq!(w, vec![6, 1, 2, 3, 5, 3, 1, 0, 3, 1, 0.25f64.to_bits()]);
    // A broadcast input takes the general path.
    let w = pack_params(&sizes, op(&[3, 1]), &[Operand { offset: 0, strides: &b }], &[]).unwrap();
    assert_eq!(w[1], 0);
    // A size-1 dimension's stride does not matter.
    let w = pack_params(&[1, 3], op(&[7, 1]), &[op(&[3, 1])], &[]).unwrap();
    assert_eq!(w[1], 1);
    let e = pack_params(&sizes, op(&[1]), &[], &[]).unwrap_err();
    assert!(e.to_string().contains("1 strides for a rank-2 output"), "{e}");
}
