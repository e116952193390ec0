//! Random small programs in the IR, for the differential tests.
//!
//! The generator tracks the shape of every value (and whether it may be
//! written, whether its elements may share memory, whether it is known to be
//! contiguous), so most programs it writes are valid: shapes fit, in-place
//! writes go to tensors that own their elements, and only inputs declared
//! `&mut Tensor` are mutated. Some programs still fail at run time (a `view`
//! of a non-contiguous argument, a duplicated argument whose metadata the
//! program mutates through the other parameter, an in-place write to a
//! leaf that requires grad); that is fine as long as eager and compiled
//! execution fail alike.
//!
//! Programs mix compute ops, views, data mutations (of inputs, views of
//! inputs, intermediates and views of intermediates), metadata mutations,
//! `no_grad` regions and outputs that alias inputs, intermediates or each
//! other. Every decision reads a [`Choices`] stream, so one vector of numbers
//! replays one program.

use crate::choice::Choices;
use aot_ir::graph::args::{b as bool_arg, f, i, ints, t};
use aot_ir::{Arg as IrArg, Graph, GraphBuilder, OpKind, ParamType, ReturnKind, ScalarExpr, ValueId};
use aot_runtime::DType;

/// The name every generated function gets; error messages must name it.
pub const PROGRAM_NAME: &str = "rand_prog";

/// One parameter of a generated program.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamSpec {
    /// A tensor parameter of this shape; `mutable` means `&mut Tensor`.
    Tensor { shape: Vec<usize>, mutable: bool },
    /// An `f64` parameter and the value the tests pass for it.
    Scalar { value: f64 },
}

impl ParamSpec {
    pub fn shape(&self) -> Option<&[usize]> {
        match self {
            ParamSpec::Tensor { shape, .. } => Some(shape),
            ParamSpec::Scalar { .. } => None,
        }
    }
}

/// A generated program: the graph, what its parameters expect, the dtype of
/// its tensors.
#[derive(Clone, Debug)]
pub struct Program {
    pub graph: Graph,
    pub params: Vec<ParamSpec>,
    pub dtype: DType,
}

/// Knobs of the generator.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// At most this many generation steps (a step emits one to three nodes).
    pub max_steps: usize,
    /// Emit `no_grad` regions.
    pub no_grad_regions: bool,
    /// Force a dtype; `None` draws F64 (70%) or F32.
    pub dtype: Option<DType>,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions { max_steps: 10, no_grad_regions: true, dtype: None }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    /// Shares storage with (or may be) the tensor parameter at this index.
    Param(usize),
    /// Storage made inside the program.
    Fresh,
}

/// What the generator knows about one value.
#[derive(Clone, Debug)]
struct Val {
    id: ValueId,
    shape: Vec<usize>,
    root: Root,
    /// Is (or may be, for `contiguous`) the parameter's own tensor object.
    param: Option<usize>,
    /// Elements may share memory (an expand, an overlapping as_strided).
    overlap: bool,
    /// Known to be contiguous whatever the arguments' layouts.
    contiguous: bool,
    /// A view (of a parameter or an intermediate).
    view: bool,
}

struct Gen<'c, 'd> {
    c: &'c mut Choices<'d>,
    b: GraphBuilder,
    vals: Vec<Val>,
    params: Vec<ParamSpec>,
    /// The scalar parameter's expression, when there is one.
    scalar: Option<ScalarExpr>,
    no_grad: bool,
}

/// Generates one program from the choice stream.
pub fn gen_program(c: &mut Choices, opts: &GenOptions) -> Program {
    let dtype = match opts.dtype {
        Some(d) => d,
        None if c.chance(3, 10) => DType::F32,
        None => DType::F64,
    };
    let n_tensors = 1 + c.weighted(&[3, 4, 3]);
    let common = c.chance(1, 2);
    let first = gen_shape(c);
    let mut shapes = vec![first.clone()];
    for _ in 1..n_tensors {
        shapes.push(if common || c.chance(1, 4) { first.clone() } else { gen_shape(c) });
    }
    let mutable: Vec<bool> = (0..n_tensors).map(|_| c.chance(13, 20)).collect();
    let scalar_at = c.chance(3, 10).then(|| c.below(n_tensors + 1));

    let mut g = Gen { c, b: GraphBuilder::new(PROGRAM_NAME), vals: vec![], params: vec![], scalar: None, no_grad: false };
    let names = ["a", "b", "c", "d"];
    let mut k = 0;
    for pos in 0..=n_tensors {
        if scalar_at == Some(pos) {
            let value = *g.c.pick(&[0.5, -2.0, 1.25, 3.0]);
            g.scalar = Some(g.b.scalar("s", ParamType::F64));
            g.params.push(ParamSpec::Scalar { value });
        }
        if pos < n_tensors {
            let id = g.b.tensor(names[k], mutable[k]);
            let p = g.params.len();
            g.params.push(ParamSpec::Tensor { shape: shapes[k].clone(), mutable: mutable[k] });
            g.vals.push(Val {
                id,
                shape: shapes[k].clone(),
                root: Root::Param(p),
                param: Some(p),
                overlap: false,
                contiguous: false,
                view: false,
            });
            k += 1;
        }
    }

    let steps = 1 + g.c.below(opts.max_steps.max(1));
    for _ in 0..steps {
        if opts.no_grad_regions && g.c.chance(1, 10) {
            g.no_grad = !g.no_grad;
            g.b.set_no_grad(g.no_grad);
        }
        match g.c.weighted(&[30, 30, 28, 12]) {
            0 => g.compute(),
            1 => g.view(),
            2 => g.data_mutation(),
            _ => g.metadata_mutation(),
        }
    }
    let outputs = g.outputs();
    let ret = match outputs.len() {
        0 => ReturnKind::Unit,
        1 => ReturnKind::Single,
        n => ReturnKind::Tuple(n),
    };
    Program { graph: g.b.finish(outputs, ret), params: g.params, dtype }
}

/// A shape of rank 1..=3 with sizes 1..=4.
pub fn gen_shape(c: &mut Choices) -> Vec<usize> {
    let rank = 1 + c.weighted(&[3, 5, 2]);
    (0..rank).map(|_| 1 + c.below(4)).collect()
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// PyTorch's broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for k in 0..n {
        let x = if k + a.len() >= n { a[k + a.len() - n] } else { 1 };
        let y = if k + b.len() >= n { b[k + b.len() - n] } else { 1 };
        out[k] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Contiguous strides of a shape.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1].max(1);
    }
    s
}

/// One past the largest storage index a layout touches (0 when empty).
pub fn extent(size: &[usize], stride: &[usize], offset: usize) -> usize {
    if size.contains(&0) {
        return offset;
    }
    offset + 1 + size.iter().zip(stride).map(|(s, st)| (s - 1) * st).sum::<usize>()
}

/// Whether two elements of the layout share a storage index.
pub fn has_internal_overlap(size: &[usize], stride: &[usize]) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut idx = vec![0usize; size.len()];
    if size.contains(&0) {
        return false;
    }
    loop {
        let off: usize = idx.iter().zip(stride).map(|(i, s)| i * s).sum();
        if !seen.insert(off) {
            return true;
        }
        let mut k = size.len();
        loop {
            if k == 0 {
                return false;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < size[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

impl Gen<'_, '_> {
    /// An index into `vals` among those matching `pred`, biased to recent values.
    fn pick_where(&mut self, pred: impl Fn(&Val) -> bool) -> Option<usize> {
        let cands: Vec<usize> = (0..self.vals.len()).filter(|&k| pred(&self.vals[k])).collect();
        if cands.is_empty() {
            return None;
        }
        if self.c.chance(1, 2) {
            let recent = &cands[cands.len().saturating_sub(3)..];
            return Some(*self.c.pick(recent));
        }
        Some(*self.c.pick(&cands))
    }

    fn pick_any(&mut self) -> usize {
        self.pick_where(|_| true).unwrap_or(0)
    }

    fn writable(&self, v: &Val) -> bool {
        !v.overlap
            && match v.root {
                Root::Fresh => true,
                Root::Param(p) => matches!(self.params[p], ParamSpec::Tensor { mutable: true, .. }),
            }
    }

    fn meta_mutable(&self, v: &Val) -> bool {
        match v.param {
            Some(p) => matches!(self.params[p], ParamSpec::Tensor { mutable: true, .. }),
            None => true,
        }
    }

    fn fresh(&mut self, id: ValueId, shape: Vec<usize>, contiguous: bool) {
        self.vals.push(Val { id, shape, root: Root::Fresh, param: None, overlap: false, contiguous, view: false });
    }

    /// A dim of a tensor of rank `r` (>= 1), sometimes written negative.
    fn dim(&mut self, r: usize) -> i64 {
        let d = self.c.below(r) as i64;
        if self.c.chance(1, 4) {
            d - r as i64
        } else {
            d
        }
    }

    fn scalar_literal(&mut self) -> IrArg {
        f(*self.c.pick(&[2.0, -1.5, 0.5, 3.0, 1.0]))
    }

    /// A scalar operand: a literal or the scalar parameter.
    fn scalar_operand(&mut self) -> IrArg {
        match &self.scalar {
            Some(s) if self.c.chance(1, 3) => IrArg::Scalar(s.clone()),
            _ => self.scalar_literal(),
        }
    }

    // ---- compute ----------------------------------------------------------

    fn compute(&mut self) {
        let x = self.pick_any();
        match self.c.weighted(&[6, 4, 3, 2, 2]) {
            0 => self.binary(x),
            1 => self.unary(x),
            2 => self.reduce(x),
            3 => self.matmul(x),
            _ => self.misc(x),
        }
    }

    fn binary(&mut self, x: usize) {
        let op =
            [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Maximum, OpKind::Minimum][self.c.weighted(&[4, 2, 4, 1, 1, 1])];
        let xv = self.vals[x].clone();
        let tensor_operand = op != OpKind::Div && self.c.chance(11, 20);
        let cand = if tensor_operand {
            let xs = xv.shape.clone();
            self.pick_where(|v| broadcast(&xs, &v.shape).is_some())
        } else {
            None
        };
        let (arg, shape, contiguous) = match cand {
            Some(y) => {
                let yv = &self.vals[y];
                (t(yv.id), broadcast(&xv.shape, &yv.shape).unwrap_or_default(), xv.contiguous && yv.contiguous)
            }
            None if op == OpKind::Div => (f(*self.c.pick(&[2.0, -4.0, 0.5])), xv.shape.clone(), xv.contiguous),
            None => (self.scalar_operand(), xv.shape.clone(), xv.contiguous),
        };
        let out = self.b.call(op, xv.id, vec![arg]);
        self.fresh(out, shape, contiguous);
    }

    fn unary(&mut self, x: usize) {
        let op = *self.c.pick(&[OpKind::Neg, OpKind::Exp, OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh, OpKind::Abs, OpKind::Sin]);
        let xv = self.vals[x].clone();
        let out = self.b.call(op, xv.id, vec![]);
        self.fresh(out, xv.shape.clone(), xv.contiguous);
    }

    fn reduce(&mut self, x: usize) {
        let xv = self.vals[x].clone();
        let r = xv.shape.len();
        let kind = if r == 0 { self.c.below(2) } else { self.c.weighted(&[1, 1, 3, 2]) };
        match kind {
            0 | 1 => {
                let op = if kind == 0 { OpKind::Sum } else { OpKind::Mean };
                let out = self.b.call(op, xv.id, vec![]);
                self.fresh(out, vec![], true);
            }
            _ => {
                let op = if kind == 2 { OpKind::SumDim } else { OpKind::MeanDim };
                let mut dims = vec![self.dim(r)];
                if r >= 2 && self.c.chance(1, 4) {
                    let d0 = dims[0].rem_euclid(r as i64);
                    dims.push((d0 + 1 + self.c.below(r - 1) as i64) % r as i64);
                }
                let keep = self.c.chance(1, 2);
                let norm: Vec<usize> = dims.iter().map(|d| d.rem_euclid(r as i64) as usize).collect();
                let shape: Vec<usize> = (0..r)
                    .filter_map(|k| match (norm.contains(&k), keep) {
                        (true, true) => Some(1),
                        (true, false) => None,
                        (false, _) => Some(xv.shape[k]),
                    })
                    .collect();
                let out = self.b.call(op, xv.id, vec![ints(&dims), bool_arg(keep)]);
                self.fresh(out, shape, true);
            }
        }
    }

    fn matmul(&mut self, x: usize) {
        let xv = self.vals[x].clone();
        let xs = xv.shape.clone();
        let k = match xs.len() {
            1 => xs[0],
            2 => xs[1],
            _ => return self.unary(x),
        };
        let cand = self.pick_where(|v| matches!(v.shape.len(), 1 | 2) && v.shape[0] == k);
        let (y, ys) = match cand {
            Some(y) => (self.vals[y].id, self.vals[y].shape.clone()),
            None if xs.len() == 2 => {
                // x @ x.t() always fits.
                let yt = self.b.call(OpKind::T, xv.id, vec![]);
                let ys = vec![xs[1], xs[0]];
                self.vals.push(Val {
                    id: yt,
                    shape: ys.clone(),
                    root: xv.root,
                    param: None,
                    overlap: xv.overlap,
                    contiguous: false,
                    view: true,
                });
                (yt, ys)
            }
            None => (xv.id, xs.clone()),
        };
        let mut shape = vec![];
        if xs.len() == 2 {
            shape.push(xs[0]);
        }
        if ys.len() == 2 {
            shape.push(ys[1]);
        }
        let out = self.b.call(OpKind::Matmul, xv.id, vec![t(y)]);
        self.fresh(out, shape, true);
    }

    fn misc(&mut self, x: usize) {
        let xv = self.vals[x].clone();
        match self.c.weighted(&[3, 3, 1, 1, 1]) {
            0 => {
                let out = self.b.call(OpKind::Copy, xv.id, vec![]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
            1 => {
                // The receiver itself when it is contiguous: treat the result
                // as the receiver for what may be mutated.
                let out = self.b.call(OpKind::Contiguous, xv.id, vec![]);
                self.vals.push(Val {
                    id: out,
                    shape: xv.shape.clone(),
                    root: xv.root,
                    param: xv.param,
                    overlap: xv.overlap,
                    contiguous: true,
                    view: xv.view,
                });
            }
            2 => {
                let out = self.b.call(OpKind::ZerosLike, xv.id, vec![]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
            3 => {
                let out = self.b.call(OpKind::OnesLike, xv.id, vec![]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
            _ => {
                let v = self.scalar_literal();
                let out = self.b.call(OpKind::FullLike, xv.id, vec![v]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
        }
    }

    // ---- views ------------------------------------------------------------

    /// A shape with the same number of elements, in the `view` argument form.
    fn reshape_target(&mut self, shape: &[usize]) -> Vec<i64> {
        let n = numel(shape);
        match self.c.weighted(&[2, 2, 2, 1, 1]) {
            0 => vec![n as i64],
            1 => vec![-1],
            2 => {
                let divisors: Vec<usize> = (1..=n.max(1)).filter(|&d| n.is_multiple_of(d)).collect();
                let d = *self.c.pick(&divisors);
                if self.c.chance(1, 3) {
                    vec![d as i64, -1]
                } else {
                    vec![d as i64, (n / d.max(1)) as i64]
                }
            }
            3 => {
                let mut s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                s.insert(self.c.below(s.len() + 1), 1);
                s
            }
            _ => {
                let mut s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                if s.len() >= 2 {
                    let a = s.remove(0);
                    s[0] *= a;
                }
                s
            }
        }
    }

    fn view(&mut self) {
        let x = self.pick_any();
        let xv = self.vals[x].clone();
        let r = xv.shape.len();
        let w = [
            2,                                                       // view
            3,                                                       // reshape
            if r <= 2 { 2 } else { 0 },                              // t
            if r >= 1 { 2 } else { 0 },                              // transpose
            2,                                                       // permute
            2,                                                       // unsqueeze
            if r >= 1 { 2 } else { 0 },                              // squeeze
            2,                                                       // expand
            if r >= 1 { 3 } else { 0 },                              // select
            if r >= 1 { 2 } else { 0 },                              // slice
            if r >= 1 { 3 } else { 0 },                              // narrow
            if r >= 2 { 1 } else { 0 },                              // diagonal
            if !xv.overlap && numel(&xv.shape) > 0 { 2 } else { 0 }, // as_strided
            1,                                                       // detach
        ];
        let kind = self.c.weighted(&w);
        let mut overlap = xv.overlap;
        let mut contiguous = false;
        let (op, args, shape): (OpKind, Vec<IrArg>, Vec<usize>) = match kind {
            0 | 1 => {
                let target = self.reshape_target(&xv.shape);
                let n = numel(&xv.shape);
                let known: usize = target.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
                let shape: Vec<usize> = target.iter().map(|&d| if d < 0 { n / known.max(1) } else { d as usize }).collect();
                // `view` of a value that may be non-contiguous fails at run
                // time: keep that rare.
                let op = if kind == 0 && (xv.contiguous || self.c.chance(1, 4)) { OpKind::View } else { OpKind::Reshape };
                contiguous = xv.contiguous;
                (op, vec![ints(&target)], shape)
            }
            2 => {
                let mut s = xv.shape.clone();
                s.reverse();
                (OpKind::T, vec![], s)
            }
            3 => {
                let (d0, d1) = (self.dim(r), self.dim(r));
                let mut s = xv.shape.clone();
                s.swap(d0.rem_euclid(r as i64) as usize, d1.rem_euclid(r as i64) as usize);
                (OpKind::Transpose, vec![i(d0), i(d1)], s)
            }
            4 => {
                let p = self.c.permutation(r);
                let s = p.iter().map(|&k| xv.shape[k]).collect();
                let dims: Vec<i64> = p.iter().map(|&k| k as i64).collect();
                (OpKind::Permute, vec![ints(&dims)], s)
            }
            5 => {
                let d = self.c.below(r + 1) as i64;
                let d = if self.c.chance(1, 4) { d - (r as i64 + 1) } else { d };
                let mut s = xv.shape.clone();
                s.insert(d.rem_euclid(r as i64 + 1) as usize, 1);
                contiguous = xv.contiguous;
                (OpKind::Unsqueeze, vec![i(d)], s)
            }
            6 => {
                let ones: Vec<usize> = (0..r).filter(|&k| xv.shape[k] == 1).collect();
                let d = if !ones.is_empty() && self.c.chance(3, 4) { *self.c.pick(&ones) as i64 } else { self.dim(r) };
                let du = d.rem_euclid(r as i64) as usize;
                let mut s = xv.shape.clone();
                if s[du] == 1 {
                    s.remove(du);
                }
                contiguous = xv.contiguous;
                (OpKind::Squeeze, vec![i(d)], s)
            }
            7 => {
                let mut target: Vec<i64> = Vec::with_capacity(r + 1);
                let mut s = Vec::with_capacity(r + 1);
                if self.c.chance(1, 3) {
                    let lead = 1 + self.c.below(3);
                    target.push(lead as i64);
                    s.push(lead);
                }
                for &d in &xv.shape {
                    if d == 1 {
                        let e = 1 + self.c.below(3);
                        target.push(e as i64);
                        s.push(e);
                    } else {
                        target.push(if self.c.chance(1, 3) { -1 } else { d as i64 });
                        s.push(d);
                    }
                }
                // Expanded views are for reading: never written by the generator.
                overlap = true;
                (OpKind::Expand, vec![ints(&target)], s)
            }
            8 => {
                let d = self.dim(r);
                let du = d.rem_euclid(r as i64) as usize;
                let n = xv.shape[du] as i64;
                let idx = self.c.range(-n, n - 1);
                let mut s = xv.shape.clone();
                s.remove(du);
                contiguous = xv.contiguous && du == 0;
                (OpKind::Select, vec![i(d), i(idx)], s)
            }
            9 => {
                let d = self.dim(r);
                let du = d.rem_euclid(r as i64) as usize;
                let n = xv.shape[du] as i64;
                let start = self.c.range(0, n);
                let end = if self.c.chance(1, 5) { n + 3 } else { self.c.range(start, n) };
                let step = 1 + self.c.below(2) as i64;
                let len = ((end.min(n) - start).max(0) + step - 1) / step;
                let mut s = xv.shape.clone();
                s[du] = len as usize;
                (OpKind::Slice, vec![i(d), i(start), i(end), i(step)], s)
            }
            10 => {
                let d = self.dim(r);
                let du = d.rem_euclid(r as i64) as usize;
                let n = xv.shape[du] as i64;
                let start = self.c.range(0, (n - 1).max(0));
                let len = if self.c.chance(1, 12) { 0 } else { self.c.range(1.min(n - start), n - start) };
                let start_arg = if self.c.chance(1, 4) && n > 0 { start - n } else { start };
                let mut s = xv.shape.clone();
                s[du] = len as usize;
                contiguous = xv.contiguous && du == 0;
                (OpKind::Narrow, vec![i(d), i(start_arg), i(len)], s)
            }
            11 => {
                let mut s: Vec<usize> = xv.shape[2..].to_vec();
                s.push(xv.shape[0].min(xv.shape[1]));
                (OpKind::Diagonal, vec![], s)
            }
            12 => match self.strided_geometry(numel(&xv.shape)) {
                Some((size, stride, off)) => {
                    overlap = has_internal_overlap(&size, &stride);
                    let si: Vec<i64> = size.iter().map(|&d| d as i64).collect();
                    let st: Vec<i64> = stride.iter().map(|&d| d as i64).collect();
                    (OpKind::AsStrided, vec![ints(&si), ints(&st), i(off as i64)], size)
                }
                None => (OpKind::Detach, vec![], xv.shape.clone()),
            },
            _ => {
                contiguous = xv.contiguous;
                (OpKind::Detach, vec![], xv.shape.clone())
            }
        };
        let out = self.b.call(op, xv.id, args);
        self.vals.push(Val { id: out, shape, root: xv.root, param: None, overlap, contiguous, view: true });
    }

    /// An `as_strided` geometry that fits in `n` storage elements (the
    /// offset is absolute in the storage, which holds at least the `n`
    /// elements of the receiver).
    fn strided_geometry(&mut self, n: usize) -> Option<(Vec<usize>, Vec<usize>, usize)> {
        for _ in 0..4 {
            let rank = 1 + self.c.below(2);
            let size: Vec<usize> = (0..rank).map(|_| 1 + self.c.below(3)).collect();
            let stride: Vec<usize> =
                if self.c.chance(1, 2) { contiguous_strides(&size) } else { (0..rank).map(|_| 1 + self.c.below(3)).collect() };
            let ext = extent(&size, &stride, 0);
            if ext <= n {
                let off = self.c.below(n - ext + 1);
                return Some((size, stride, off));
            }
        }
        None
    }

    // ---- data mutations -----------------------------------------------------

    fn data_mutation(&mut self) {
        match self.pick_where_writable() {
            Some(x) => self.mutate(x),
            None => self.compute(),
        }
    }

    /// A writable value; half of the time a view, when there is one.
    fn pick_where_writable(&mut self) -> Option<usize> {
        let writable: Vec<&Val> = self.vals.iter().filter(|v| self.writable(v)).collect();
        let views: Vec<ValueId> = writable.iter().filter(|v| v.view).map(|v| v.id).collect();
        let all: Vec<ValueId> = writable.iter().map(|v| v.id).collect();
        let ids = if !views.is_empty() && self.c.chance(1, 2) { views } else { all };
        self.pick_where(|v| ids.contains(&v.id))
    }

    fn mutate(&mut self, x: usize) {
        use OpKind as K;
        let xv = self.vals[x].clone();
        let ops = [
            K::AddInplace,
            K::SubInplace,
            K::MulInplace,
            K::DivInplace,
            K::CopyInplace,
            K::Fill,
            K::Zero,
            K::Clamp,
            K::ReluInplace,
            K::SigmoidInplace,
            K::ExpInplace,
            K::NegInplace,
        ];
        let op = ops[self.c.weighted(&[4, 1, 3, 1, 4, 2, 1, 1, 1, 1, 1, 1])];
        let args = match op {
            K::AddInplace | K::SubInplace | K::MulInplace | K::CopyInplace => {
                let want_tensor = op == K::CopyInplace || self.c.chance(1, 2);
                let xs = xv.shape.clone();
                let cand = if want_tensor { self.pick_where(|v| broadcast(&v.shape, &xs).as_deref() == Some(&xs[..])) } else { None };
                match cand {
                    Some(y) => vec![t(self.vals[y].id)],
                    None if op == K::CopyInplace => {
                        // A fresh source of the right shape.
                        let src = self.b.call(K::Sigmoid, xv.id, vec![]);
                        self.fresh(src, xs, xv.contiguous);
                        vec![t(src)]
                    }
                    None => vec![self.scalar_operand()],
                }
            }
            K::DivInplace => vec![f(*self.c.pick(&[2.0, -0.5, 4.0]))],
            K::Fill => vec![self.scalar_literal()],
            K::Clamp => {
                let lo = *self.c.pick(&[-1.0, -0.5, 0.0]);
                vec![f(lo), f(lo + *self.c.pick(&[0.5, 1.0, 2.0]))]
            }
            _ => vec![],
        };
        self.b.call(op, xv.id, args);
    }

    // ---- metadata mutations --------------------------------------------------

    fn metadata_mutation(&mut self) {
        use OpKind as K;
        let ok: Vec<ValueId> = self.vals.iter().filter(|v| self.meta_mutable(v)).map(|v| v.id).collect();
        let Some(x) = self.pick_where(|v| ok.contains(&v.id)) else { return self.view() };
        let xv = self.vals[x].clone();
        let r = xv.shape.len();
        let w = [
            if r <= 2 { 2 } else { 0 },
            if r >= 1 { 2 } else { 0 },
            2,
            if r >= 1 { 2 } else { 0 },
            if !xv.overlap && numel(&xv.shape) > 0 { 1 } else { 0 },
        ];
        let mut shape = xv.shape.clone();
        let mut overlap = xv.overlap;
        let (op, args) = match self.c.weighted(&w) {
            0 => {
                shape.reverse();
                (K::TInplace, vec![])
            }
            1 => {
                let (d0, d1) = (self.dim(r), self.dim(r));
                shape.swap(d0.rem_euclid(r as i64) as usize, d1.rem_euclid(r as i64) as usize);
                (K::TransposeInplace, vec![i(d0), i(d1)])
            }
            2 => {
                let d = self.c.below(r + 1) as i64;
                let d = if self.c.chance(1, 4) { d - (r as i64 + 1) } else { d };
                shape.insert(d.rem_euclid(r as i64 + 1) as usize, 1);
                (K::UnsqueezeInplace, vec![i(d)])
            }
            3 => {
                let ones: Vec<usize> = (0..r).filter(|&k| xv.shape[k] == 1).collect();
                let d = if !ones.is_empty() && self.c.chance(3, 4) { *self.c.pick(&ones) as i64 } else { self.dim(r) };
                let du = d.rem_euclid(r as i64) as usize;
                if shape[du] == 1 {
                    shape.remove(du);
                }
                (K::SqueezeInplace, vec![i(d)])
            }
            _ => match self.strided_geometry(numel(&xv.shape)) {
                Some((size, stride, off)) => {
                    overlap = has_internal_overlap(&size, &stride);
                    shape = size.clone();
                    let si: Vec<i64> = size.iter().map(|&d| d as i64).collect();
                    let st: Vec<i64> = stride.iter().map(|&d| d as i64).collect();
                    (K::AsStridedInplace, vec![ints(&si), ints(&st), i(off as i64)])
                }
                None => {
                    shape.insert(0, 1);
                    (K::UnsqueezeInplace, vec![i(0)])
                }
            },
        };
        self.b.call(op, xv.id, args);
        let v = &mut self.vals[x];
        v.shape = shape;
        v.overlap = overlap;
        v.contiguous = false;
    }

    // ---- outputs --------------------------------------------------------------

    fn outputs(&mut self) -> Vec<ValueId> {
        let n = self.c.weighted(&[2, 8, 7, 4]);
        let mut outs: Vec<ValueId> = Vec::with_capacity(n);
        for _ in 0..n {
            let pick = match self.c.weighted(&[5, 2, 2, 1]) {
                // a recent value
                0 => Some(self.pick_any()),
                // an input itself, or a view of one
                1 => self.pick_where(|v| matches!(v.root, Root::Param(_))),
                // an intermediate or a view of one
                2 => self.pick_where(|v| v.root == Root::Fresh),
                // the same tensor twice
                _ => outs.last().and_then(|o| self.vals.iter().position(|v| v.id == *o)),
            };
            let k = pick.unwrap_or_else(|| self.vals.len() - 1);
            outs.push(self.vals[k].id);
        }
        outs
    }
}
