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
//!
//! The generator's steps live in submodules, each an `impl Gen` block:
//! `compute` (elementwise ops, reductions, matmul, copies and `*_like`
//! tensors), `views` (view ops and `as_strided` geometries) and `mutations`
//! (data and metadata mutations).

mod compute;
mod mutations;
mod views;

use crate::choice::Choices;
use aot_ir::graph::args::f;
use aot_ir::{Arg as IrArg, Graph, GraphBuilder, ParamType, ReturnKind, ScalarExpr, ValueId};
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
    /// Per entry of the graph's `value_sizes` (sizes read at call time of
    /// tensors the program computes): the size the generator knew.
    pub sizes: Vec<i64>,
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
    /// Per size read of a computed tensor, its known value ([`Program::sizes`]).
    sizes: Vec<i64>,
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

    let mut g = Gen { c, b: GraphBuilder::new(PROGRAM_NAME), vals: vec![], params: vec![], scalar: None, no_grad: false, sizes: vec![] };
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
    Program { graph: g.b.finish(outputs, ret), params: g.params, dtype, sizes: g.sizes }
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
