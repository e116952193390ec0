//! Fuzz test of the eager ops with bad arguments.
//!
//! Each case builds up to three tiny tensors (random dtypes, shapes with
//! 0-d and empty ones, non-contiguous views, some requiring grad) and calls
//! one random op of the eager API with hostile arguments: extreme integers
//! (i64::MIN/MAX, usize::MAX, 1 << 62, negatives), bad shapes and dims,
//! huge constructor shapes, mismatched matmuls and broadcasts, dtype mixes,
//! in-place writes into leaves, views and expanded tensors. Every call runs
//! under `catch_unwind`, and:
//! - it must not panic;
//! - an `Err` must leave every tensor of the case bit-identical: the values
//!   of its whole storage, shape, stride, offset and version counter;
//! - an `Ok` tensor must describe valid geometry (its extent fits its storage).
//!
//! The cases are deterministic. `fuzz_eager_ops` runs 10,000 of them; the
//! ignored `fuzz_eager_ops_long` runs `AOT_FUZZ_CASES` (default 1,000,000)
//! from case `AOT_FUZZ_FIRST` (default 0), so a failure reported as
//! "case N" replays with `AOT_FUZZ_FIRST=N AOT_FUZZ_CASES=1 cargo test -p
//! aot-runtime --test fuzz_eager -- --ignored`.
//!
//! Constructor shapes are either tiny or so large (2^48 elements and more)
//! that they are refused, and results of views with huge shapes are never
//! computed on, so no case allocates or loops more than a few elements.

use aot_runtime::layout::MAX_NUMEL;
use aot_runtime::prelude::*;
use aot_runtime::{Operand, Scalar};
use half::{bf16, f16};
use std::panic::{catch_unwind, AssertUnwindSafe};

const CPU: Device = Device::Cpu;
const SEED: u64 = 0x11_2024_fa22;

/// SplitMix64: small, deterministic, good enough to pick arguments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const DTYPES: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];
const EXTREME_I64: [i64; 10] = [i64::MIN, i64::MIN + 1, -(1 << 62), -(1 << 32), -5, 5, 1 << 32, 1 << 62, i64::MAX - 1, i64::MAX];
const EXTREME_USIZE: [usize; 8] =
    [usize::MAX, usize::MAX - 1, usize::MAX / 2, usize::MAX / 2 + 1, 1 << 62, 1 << 32, 1 << 48, isize::MAX as usize];
/// Constructor sizes that are refused whatever the dtype (at least 2^48 bytes).
const HUGE: [usize; 6] = [1 << 48, 1 << 60, 1 << 62, usize::MAX, isize::MAX as usize, MAX_NUMEL + 1];
const SCALARS: [f64; 9] = [0.0, 1.0, -1.0, 2.5, -3.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300];

fn int_arg(r: &mut Rng) -> i64 {
    if r.chance(80) {
        r.below(9) as i64 - 4
    } else {
        r.pick(&EXTREME_I64)
    }
}

/// A dim for a tensor of rank `rank`: mostly in range, else any int.
fn dim_arg(r: &mut Rng, rank: usize) -> i64 {
    let r1 = rank.max(1) as i64;
    if r.chance(70) {
        r.below(2 * r1 as usize) as i64 - r1
    } else {
        int_arg(r)
    }
}

fn usize_arg(r: &mut Rng) -> usize {
    if r.chance(80) {
        r.below(5)
    } else {
        r.pick(&EXTREME_USIZE)
    }
}

fn vec_of<T>(r: &mut Rng, max_len: usize, mut f: impl FnMut(&mut Rng) -> T) -> Vec<T> {
    let n = r.below(max_len + 1);
    (0..n).map(|_| f(r)).collect()
}

/// A shape argument for view/reshape/expand: mostly small, sometimes -1 or extreme.
fn shape_arg(r: &mut Rng) -> Vec<i64> {
    vec_of(r, 4, |r| if r.chance(15) { -1 } else { int_arg(r) })
}

/// A shape with sizes 0..=4 only: ops that compute on it stay tiny.
fn small_shape(r: &mut Rng) -> Vec<i64> {
    vec_of(r, 3, |r| r.below(5) as i64 - i64::from(r.chance(10)))
}

/// A constructor shape: tiny sizes, and sometimes one or two refused ones.
fn ctor_shape(r: &mut Rng) -> Vec<usize> {
    let mut s = vec_of(r, 3, |r| r.below(4));
    if r.chance(60) {
        let at = r.below(s.len() + 1);
        s.insert(at, r.pick(&HUGE));
        if r.chance(30) {
            s.push(r.pick(&HUGE));
        }
    }
    s
}

fn dims_arg(r: &mut Rng) -> Vec<i64> {
    vec_of(r, 3, int_arg)
}

fn scalar_arg(r: &mut Rng) -> Scalar {
    match r.below(3) {
        0 => Scalar::F64(r.pick(&SCALARS)),
        1 => Scalar::I64(int_arg(r)),
        _ => Scalar::Bool(r.chance(50)),
    }
}

/// A small tensor: maybe a non-contiguous view, maybe in an autograd state
/// (a leaf requiring grad, a view of one, a non-leaf).
fn make_tensor(r: &mut Rng) -> Result<Tensor> {
    let dtype = r.pick(&DTYPES);
    let shape: Vec<usize> = vec_of(r, 3, |r| if r.chance(10) { 0 } else { 1 + r.below(3) });
    let n: usize = shape.iter().product();
    let vals: Vec<f64> = (0..n).map(|_| if r.chance(5) { f64::NAN } else { r.below(9) as f64 - 4.0 + 0.5 * (r.below(2) as f64) }).collect();
    let base = Tensor::from_vec(vals, &shape, &CPU)?.to_dtype(dtype)?;
    let grad = dtype.is_float() && r.chance(30);
    if grad {
        base.requires_grad_(true)?;
    }
    let base = if grad && r.chance(30) { base.mul(1.0)? } else { base };
    let rank = shape.len() as i64;
    let view = match r.below(8) {
        0 if rank >= 2 => base.transpose(0, rank - 1),
        1 if rank >= 1 => base.slice(0, 0, i64::MAX, 2),
        2 => base.unsqueeze(0).and_then(|u| u.expand(&[&[2][..], &vec![-1; shape.len() + 1][1..]].concat())),
        3 if rank >= 1 => base.narrow(-1, 1.min(shape[shape.len() - 1] as i64), 0.max(shape[shape.len() - 1] as i64 - 1)),
        4 if rank >= 2 => base.diagonal(),
        5 if rank >= 1 => base.select(0, 0),
        6 if n >= 2 => base.as_strided(&[n / 2], &[2], n % 2),
        _ => Ok(base.clone()),
    };
    Ok(view.unwrap_or(base))
}

/// What an `Err` must not change.
#[derive(Debug, PartialEq)]
struct Snapshot {
    bits: Vec<u64>,
    shape: Vec<usize>,
    stride: Vec<usize>,
    offset: usize,
    version: u64,
    requires_grad: bool,
}

fn snapshot(t: &Tensor) -> Result<Snapshot> {
    let s = t.storage_as_1d();
    let bits = match t.dtype() {
        DType::F32 => s.to_vec::<f32>()?.into_iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::F64 => s.to_vec::<f64>()?.into_iter().map(f64::to_bits).collect(),
        DType::F16 => s.to_vec::<f16>()?.into_iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::BF16 => s.to_vec::<bf16>()?.into_iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::I64 => s.to_vec::<i64>()?.into_iter().map(|x| x as u64).collect(),
        DType::Bool => s.to_vec::<bool>()?.into_iter().map(u64::from).collect(),
    };
    Ok(Snapshot {
        bits,
        shape: t.shape(),
        stride: t.stride(),
        offset: t.storage_offset(),
        version: t.version(),
        requires_grad: t.requires_grad(),
    })
}

type Call<'a> = Box<dyn FnOnce() -> Result<Tensor> + 'a>;

/// One random op on `a` (with `b` as the other operand), described for replay.
fn pick_op<'a>(r: &mut Rng, a: &'a Tensor, b: &'a Tensor) -> (String, Call<'a>) {
    let rank = a.rank();
    macro_rules! op {
        ($($arg:ident),* => $desc:literal, $call:expr) => {{
            (format!($desc, $($arg = $arg),*), Box::new(move || $call) as Call<'a>)
        }};
    }
    match r.below(16) {
        0 => {
            let s = shape_arg(r);
            match r.below(3) {
                0 => op!(s => "a.view({s:?})", a.view(&s)),
                1 => op!(s => "a.reshape({s:?})", a.reshape(&s)),
                _ => op!(s => "a.expand({s:?})", a.expand(&s)),
            }
        }
        1 => {
            let (d, s, l) = (dim_arg(r, rank), int_arg(r), int_arg(r));
            op!(d, s, l => "a.narrow({d}, {s}, {l})", a.narrow(d, s, l))
        }
        2 => {
            let (d, s, e, st) = (dim_arg(r, rank), int_arg(r), int_arg(r), int_arg(r));
            op!(d, s, e, st => "a.slice({d}, {s}, {e}, {st})", a.slice(d, s, e, st))
        }
        3 => {
            let (d, i) = (dim_arg(r, rank), if r.chance(50) { dim_arg(r, rank) } else { int_arg(r) });
            match r.below(3) {
                0 => op!(d, i => "a.select({d}, {i})", a.select(d, i)),
                1 => op!(d, i => "a.transpose({d}, {i})", a.transpose(d, i)),
                _ => op!(d, i => "a.transpose_({d}, {i})", a.transpose_(d, i)),
            }
        }
        4 => {
            let (size, stride, off) = (vec_of(r, 3, usize_arg), vec_of(r, 3, usize_arg), usize_arg(r));
            if r.chance(50) {
                op!(size, stride, off => "a.as_strided({size:?}, {stride:?}, {off})", a.as_strided(&size, &stride, off))
            } else {
                op!(size, stride, off => "a.as_strided_({size:?}, {stride:?}, {off})", a.as_strided_(&size, &stride, off))
            }
        }
        5 => {
            let d = dim_arg(r, rank + 1);
            match r.below(7) {
                0 => op!(d => "a.unsqueeze({d})", a.unsqueeze(d)),
                1 => op!(d => "a.squeeze({d})", a.squeeze(d)),
                2 => op!(d => "a.unsqueeze_({d})", a.unsqueeze_(d)),
                3 => op!(d => "a.squeeze_({d})", a.squeeze_(d)),
                4 => op!(=> "a.t()", a.t()),
                5 => op!(=> "a.t_()", a.t_()),
                _ => op!(=> "a.diagonal()", a.diagonal()),
            }
        }
        6 => {
            let p: Vec<i64> = if r.chance(50) { (0..rank).map(|_| dim_arg(r, rank)).collect() } else { dims_arg(r) };
            op!(p => "a.permute({p:?})", a.permute(&p))
        }
        7 => constructor(r),
        8 => {
            let dims: Vec<i64> = vec_of(r, 2, |r| dim_arg(r, rank));
            let (keep, c) = (r.chance(50), if r.chance(50) { dim_arg(r, rank) } else { int_arg(r) });
            match r.below(8) {
                0 => op!(=> "a.sum()", a.sum()),
                1 => op!(=> "a.mean()", a.mean()),
                2 => op!(dims, keep => "a.sum_dim({dims:?}, {keep})", a.sum_dim(&dims, keep)),
                3 => op!(dims, keep => "a.mean_dim({dims:?}, {keep})", a.mean_dim(&dims, keep)),
                4 => op!(dims, keep => "a.amax_dim({dims:?}, {keep})", a.amax_dim(&dims, keep)),
                5 => op!(dims, c, keep => "a.var_dim({dims:?}, {c}, {keep})", a.var_dim(&dims, c, keep)),
                6 => op!(c => "a.softmax({c})", a.softmax(c)),
                _ => op!(c => "a.log_softmax({c})", a.log_softmax(c)),
            }
        }
        9 => match r.below(3) {
            0 => op!(=> "a.matmul(b)", a.matmul(b)),
            1 => op!(=> "a.mm(b)", a.mm(b)),
            _ => op!(=> "a.bmm(b)", a.bmm(b)),
        },
        10 | 11 => binary(r, a, b),
        12 | 13 => inplace(r, a, b),
        14 => {
            let (s, dt) = (small_shape(r), r.pick(&DTYPES));
            match r.below(4) {
                0 => op!(s => "a.expand({s:?}).add_(1)", a.expand(&s)?.add_(1.0)),
                1 => op!(s => "a.expand({s:?}).copy_(b)", a.expand(&s)?.copy_(b)),
                2 => op!(s => "b.copy_(a.expand({s:?}))", b.copy_(&a.expand(&s)?)),
                _ => op!(dt => "a.to_dtype({dt:?}).add_(b)", a.to_dtype(dt)?.add_(b)),
            }
        }
        _ => {
            let (lo, hi, dt) = (r.pick(&SCALARS), r.pick(&SCALARS), r.pick(&DTYPES));
            match r.below(8) {
                0 => op!(=> "a.exp()", a.exp()),
                1 => op!(=> "a.log()", a.log()),
                2 => op!(=> "a.contiguous()", a.contiguous()),
                3 => op!(dt => "a.to_dtype({dt:?})", a.to_dtype(dt)),
                4 => op!(lo, hi => "a.clamp({lo}, {hi})", a.clamp(lo, hi)),
                5 => op!(=> "a.logical_not()", a.logical_not()),
                6 => op!(=> "a.logical_and(b)", a.logical_and(b)),
                _ => op!(=> "a.zeros_like()", a.zeros_like()),
            }
        }
    }
}

fn constructor<'a>(r: &mut Rng) -> (String, Call<'a>) {
    let (s, dt, v, seed) = (ctor_shape(r), r.pick(&DTYPES), r.pick(&SCALARS), r.next());
    const ENDS: [f64; 8] = [0.0, -3.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300];
    const STEPS: [f64; 8] = [1.0, -1.0, 0.5, 0.0, f64::NAN, f64::INFINITY, 1e-300, -2.0];
    let (start, end, step) = (r.pick(&ENDS), r.pick(&ENDS), r.pick(&STEPS));
    let len = r.below(8);
    let desc = format!("constructor of shape {s:?}, dtype {dt:?}, value {v}, seed {seed}, from_vec len {len}");
    let call: Call<'a> = match r.below(6) {
        0 => Box::new(move || Tensor::zeros(&s, dt, &CPU)),
        1 => Box::new(move || Tensor::full(&s, v, dt, &CPU)),
        2 => Box::new(move || Tensor::randn(&s, dt, &CPU, seed)),
        3 => Box::new(move || Tensor::rand(&s, dt, &CPU, seed)),
        4 => Box::new(move || Tensor::from_vec(vec![1.0f32; len], &s, &CPU)),
        _ => {
            return (
                format!("Tensor::arange({start}, {end}, {step}, {dt:?})"),
                Box::new(move || Tensor::arange(start, end, step, dt, &CPU)),
            )
        }
    };
    (desc, call)
}

fn binary<'a>(r: &mut Rng, a: &'a Tensor, b: &'a Tensor) -> (String, Call<'a>) {
    let s = scalar_arg(r);
    let which = r.below(10);
    let names = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "lt", "where_"];
    let with_scalar = r.chance(30);
    let desc = if with_scalar { format!("a.{}({s:?})", names[which]) } else { format!("a.{}(b)", names[which]) };
    let call: Call<'a> = Box::new(move || {
        let rhs: Operand = if with_scalar { Operand::Scalar(s) } else { Operand::Tensor(b) };
        match which {
            0 => a.add(rhs),
            1 => a.sub(rhs),
            2 => a.mul(rhs),
            3 => a.div(rhs),
            4 => a.pow(rhs),
            5 => a.maximum(rhs),
            6 => a.minimum(rhs),
            7 => a.eq(rhs),
            8 => a.lt(rhs),
            _ => a.where_(b, rhs),
        }
    });
    (desc, call)
}

fn inplace<'a>(r: &mut Rng, a: &'a Tensor, b: &'a Tensor) -> (String, Call<'a>) {
    let s = scalar_arg(r);
    let (lo, hi) = (r.pick(&SCALARS), r.pick(&SCALARS));
    let which = r.below(13);
    let names = ["add_", "sub_", "mul_", "div_", "copy_", "fill_", "zero_", "clamp_", "relu_", "sigmoid_", "exp_", "neg_", "add_"];
    let with_scalar = r.chance(40);
    let desc = format!("a.{}(b or scalar {s:?}, with_scalar {with_scalar}, clamp {lo}..{hi})", names[which]);
    let call: Call<'a> = Box::new(move || {
        let rhs: Operand = if with_scalar { Operand::Scalar(s) } else { Operand::Tensor(b) };
        match which {
            0 => a.add_(rhs),
            1 => a.sub_(rhs),
            2 => a.mul_(rhs),
            3 => a.div_(rhs),
            4 => a.copy_(b),
            5 => a.fill_(lo),
            6 => a.zero_(),
            7 => a.clamp_(lo, hi),
            8 => a.relu_(),
            9 => a.sigmoid_(),
            10 => a.exp_(),
            11 => a.neg_(),
            // An operand that aliases the receiver.
            _ => a.add_(&a.t()?),
        }
    });
    (desc, call)
}

/// A failed case, with what replays it.
struct Failure {
    case: u64,
    what: String,
}

#[derive(Default)]
struct Tally {
    ok: u64,
    err: u64,
    failures: Vec<Failure>,
}

/// Runs case `case`: Ok(true) if the op returned Ok, Ok(false) if Err, or
/// the description of a broken promise.
fn run_case(case: u64) -> std::result::Result<bool, String> {
    let mut r = Rng(SEED ^ case.wrapping_mul(0xd6e8_feb8_6659_fd93));
    let mut setup = || -> Result<(Tensor, Tensor)> {
        let (a, b) = (make_tensor(&mut r)?, make_tensor(&mut r)?);
        // Half the cases share a dtype, so that matmul and in-place ops get past the dtype checks.
        let b = if r.chance(50) { b.to_dtype(a.dtype())? } else { b };
        Ok((a, b))
    };
    let (a, b) = setup().map_err(|e| format!("building the tensors failed: {e}"))?;
    let desc_a = format!("a = {a:?}, b = {b:?}");
    let before = [snapshot(&a), snapshot(&b)].map(|s| s.map_err(|e| e.to_string()));
    let (desc, call) = pick_op(&mut r, &a, &b);
    let out = catch_unwind(AssertUnwindSafe(call)).map_err(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        format!("{desc} panicked: {msg} ({desc_a})")
    })?;
    match out {
        Ok(t) => {
            let l = t.layout();
            if t.numel() > MAX_NUMEL || (t.numel() > 0 && l.checked_storage_extent().is_none_or(|e| e > t.storage_len())) {
                return Err(format!("{desc} gave an invalid layout {l:?} on a storage of {} ({desc_a})", t.storage_len()));
            }
            Ok(true)
        }
        Err(e) => {
            let after = [snapshot(&a), snapshot(&b)].map(|s| s.map_err(|e| e.to_string()));
            for (name, (x, y)) in ["a", "b"].iter().zip(before.iter().zip(&after)) {
                if x != y {
                    return Err(format!("{desc} returned Err({e}) but changed {name}: {x:?} -> {y:?} ({desc_a})"));
                }
            }
            Ok(false)
        }
    }
}

fn fuzz(first: u64, cases: u64) -> Tally {
    let mut t = Tally::default();
    for case in first..first + cases {
        match run_case(case) {
            Ok(true) => t.ok += 1,
            Ok(false) => t.err += 1,
            Err(what) => t.failures.push(Failure { case, what }),
        }
    }
    t
}

fn check(t: &Tally, cases: u64) {
    println!("fuzz_eager: {cases} cases, {} ok, {} err, {} failures", t.ok, t.err, t.failures.len());
    for f in t.failures.iter().take(20) {
        println!("case {}: {}", f.case, f.what);
    }
    assert!(
        t.failures.is_empty(),
        "{} of {cases} cases broke a promise (replay: AOT_FUZZ_FIRST=<case> AOT_FUZZ_CASES=1 ... -- --ignored)",
        t.failures.len()
    );
    // The arguments must reach both outcomes, or the fuzzer tests little.
    assert!(t.ok > cases / 10 && t.err > cases / 10, "ok {} / err {} of {cases}", t.ok, t.err);
}

#[test]
fn fuzz_eager_ops() {
    let cases = 10_000;
    check(&fuzz(0, cases), cases);
}

#[test]
#[ignore = "long mode: AOT_FUZZ_CASES (default 1,000,000) from AOT_FUZZ_FIRST (default 0)"]
fn fuzz_eager_ops_long() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (first, cases) = (env("AOT_FUZZ_FIRST", 0), env("AOT_FUZZ_CASES", 1_000_000));
    let t = fuzz(first, cases);
    if cases < 100 {
        // A replay: the ok/err balance means nothing for a handful of cases.
        println!("fuzz_eager: {cases} cases, {} ok, {} err", t.ok, t.err);
        for f in &t.failures {
            println!("case {}: {}", f.case, f.what);
        }
        assert!(t.failures.is_empty());
        return;
    }
    check(&t, cases);
}
