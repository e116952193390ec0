//! View steps: one view op of a value (reshape-like, dim shuffles, expand,
//! indexing, `as_strided`, `detach`), with its result's shape and layout facts.

use super::{contiguous_strides, extent, has_internal_overlap, numel, Gen, Val};
use aot_ir::graph::args::{i, ints};
use aot_ir::{Arg as IrArg, OpKind, ScalarExpr};

/// What one view step emits: the op and its arguments, and what the
/// generator knows about the view it makes.
struct ViewStep {
    op: OpKind,
    args: Vec<IrArg>,
    shape: Vec<usize>,
    /// Elements may share memory.
    overlap: bool,
    /// Known to be contiguous whatever the arguments' layouts.
    contiguous: bool,
}

impl ViewStep {
    /// A view that shares memory where its receiver does and is not known
    /// to be contiguous.
    fn new(xv: &Val, op: OpKind, args: Vec<IrArg>, shape: Vec<usize>) -> Self {
        ViewStep { op, args, shape, overlap: xv.overlap, contiguous: false }
    }

    fn contiguous(self, contiguous: bool) -> Self {
        ViewStep { contiguous, ..self }
    }
}

/// The arguments of `as_strided(size, stride, offset)`.
pub(super) fn as_strided_args(size: &[usize], stride: &[usize], offset: usize) -> Vec<IrArg> {
    let si: Vec<i64> = size.iter().map(|&d| d as i64).collect();
    let st: Vec<i64> = stride.iter().map(|&d| d as i64).collect();
    vec![ints(&si), ints(&st), i(offset as i64)]
}

/// The weight of each view op (in the order `view` matches them) for a
/// receiver: zero where the op does not apply to its rank or layout.
fn view_weights(xv: &Val) -> [u32; 14] {
    let r = xv.shape.len();
    [
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
    ]
}

impl Gen<'_, '_> {
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

    pub(super) fn view(&mut self) {
        let x = self.pick_any();
        let xv = self.vals[x].clone();
        let step = match self.c.weighted(&view_weights(&xv)) {
            kind @ (0 | 1) => self.view_reshape(&xv, kind == 0),
            2 => {
                let mut s = xv.shape.clone();
                s.reverse();
                ViewStep::new(&xv, OpKind::T, vec![], s)
            }
            3 => {
                let (d0, d1, s) = self.transposed(&xv.shape);
                ViewStep::new(&xv, OpKind::Transpose, vec![i(d0), i(d1)], s)
            }
            4 => {
                let p = self.c.permutation(xv.shape.len());
                let s = p.iter().map(|&k| xv.shape[k]).collect();
                let dims: Vec<i64> = p.iter().map(|&k| k as i64).collect();
                ViewStep::new(&xv, OpKind::Permute, vec![ints(&dims)], s)
            }
            5 => {
                let (d, s) = self.unsqueezed(&xv.shape);
                ViewStep::new(&xv, OpKind::Unsqueeze, vec![i(d)], s).contiguous(xv.contiguous)
            }
            6 => {
                let (d, s) = self.squeezed(&xv.shape);
                ViewStep::new(&xv, OpKind::Squeeze, vec![i(d)], s).contiguous(xv.contiguous)
            }
            7 => self.view_expand(&xv),
            8 => self.view_select(&xv),
            9 => self.view_slice(&xv),
            10 => self.view_narrow(&xv),
            11 => {
                let mut s: Vec<usize> = xv.shape[2..].to_vec();
                s.push(xv.shape[0].min(xv.shape[1]));
                ViewStep::new(&xv, OpKind::Diagonal, vec![], s)
            }
            12 => match self.strided_geometry(numel(&xv.shape)) {
                Some((size, stride, off)) => {
                    let overlap = has_internal_overlap(&size, &stride);
                    let args = as_strided_args(&size, &stride, off);
                    ViewStep { overlap, ..ViewStep::new(&xv, OpKind::AsStrided, args, size) }
                }
                None => ViewStep::new(&xv, OpKind::Detach, vec![], xv.shape.clone()),
            },
            _ => ViewStep::new(&xv, OpKind::Detach, vec![], xv.shape.clone()).contiguous(xv.contiguous),
        };
        let out = self.b.call(step.op, xv.id, step.args);
        self.vals.push(Val {
            id: out,
            shape: step.shape,
            root: xv.root,
            param: None,
            overlap: step.overlap,
            contiguous: step.contiguous,
            view: true,
        });
    }

    /// `view` or `reshape` to a shape with the same number of elements.
    fn view_reshape(&mut self, xv: &Val, want_view: bool) -> ViewStep {
        let target = self.reshape_target(&xv.shape);
        let n = numel(&xv.shape);
        let known: usize = target.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
        let shape: Vec<usize> = target.iter().map(|&d| if d < 0 { n / known.max(1) } else { d as usize }).collect();
        // `view` of a value that may be non-contiguous fails at run
        // time: keep that rare.
        let op = if want_view && (xv.contiguous || self.c.chance(1, 4)) { OpKind::View } else { OpKind::Reshape };
        let arg = if self.c.chance(1, 3) { self.sized_target(xv, &target) } else { ints(&target) };
        ViewStep::new(xv, op, vec![arg], shape).contiguous(xv.contiguous)
    }

    /// `target` with each size equal to one of the receiver's dims written
    /// as that size read at call time (`x.size(d)`, `d` sometimes negative),
    /// which shape propagation computes from the arguments' shapes.
    fn sized_target(&mut self, xv: &Val, target: &[i64]) -> IrArg {
        let r = xv.shape.len() as i64;
        let items = target
            .iter()
            .map(|&n| match xv.shape.iter().position(|&d| d as i64 == n) {
                Some(k) => {
                    let d = if self.c.chance(1, 2) { k as i64 - r } else { k as i64 };
                    let e = self.b.value_size(xv.id, d);
                    if let ScalarExpr::ValueSize { read, .. } = e {
                        self.sizes.resize(self.sizes.len().max(read + 1), -1);
                        self.sizes[read] = n;
                    }
                    e
                }
                None => ScalarExpr::I64(n),
            })
            .collect();
        IrArg::Ints(items)
    }

    /// Two dims to swap (each sometimes negative) and the swapped shape.
    pub(super) fn transposed(&mut self, shape: &[usize]) -> (i64, i64, Vec<usize>) {
        let r = shape.len();
        let (d0, d1) = (self.dim(r), self.dim(r));
        let mut s = shape.to_vec();
        s.swap(d0.rem_euclid(r as i64) as usize, d1.rem_euclid(r as i64) as usize);
        (d0, d1, s)
    }

    /// A dim to insert a size-1 dim at (sometimes negative) and the new shape.
    pub(super) fn unsqueezed(&mut self, shape: &[usize]) -> (i64, Vec<usize>) {
        let r = shape.len();
        let d = self.c.below(r + 1) as i64;
        let d = if self.c.chance(1, 4) { d - (r as i64 + 1) } else { d };
        let mut s = shape.to_vec();
        s.insert(d.rem_euclid(r as i64 + 1) as usize, 1);
        (d, s)
    }

    /// A dim to squeeze (mostly one of size 1) and the shape after it.
    pub(super) fn squeezed(&mut self, shape: &[usize]) -> (i64, Vec<usize>) {
        let r = shape.len();
        let ones: Vec<usize> = (0..r).filter(|&k| shape[k] == 1).collect();
        let d = if !ones.is_empty() && self.c.chance(3, 4) { *self.c.pick(&ones) as i64 } else { self.dim(r) };
        let du = d.rem_euclid(r as i64) as usize;
        let mut s = shape.to_vec();
        if s[du] == 1 {
            s.remove(du);
        }
        (d, s)
    }

    fn view_expand(&mut self, xv: &Val) -> ViewStep {
        let r = xv.shape.len();
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
        ViewStep { overlap: true, ..ViewStep::new(xv, OpKind::Expand, vec![ints(&target)], s) }
    }

    fn view_select(&mut self, xv: &Val) -> ViewStep {
        let d = self.dim(xv.shape.len());
        let du = d.rem_euclid(xv.shape.len() as i64) as usize;
        let n = xv.shape[du] as i64;
        let idx = self.c.range(-n, n - 1);
        let mut s = xv.shape.clone();
        s.remove(du);
        ViewStep::new(xv, OpKind::Select, vec![i(d), i(idx)], s).contiguous(xv.contiguous && du == 0)
    }

    fn view_slice(&mut self, xv: &Val) -> ViewStep {
        let d = self.dim(xv.shape.len());
        let du = d.rem_euclid(xv.shape.len() as i64) as usize;
        let n = xv.shape[du] as i64;
        let start = self.c.range(0, n);
        let end = if self.c.chance(1, 5) { n + 3 } else { self.c.range(start, n) };
        let step = 1 + self.c.below(2) as i64;
        let len = ((end.min(n) - start).max(0) + step - 1) / step;
        let mut s = xv.shape.clone();
        s[du] = len as usize;
        ViewStep::new(xv, OpKind::Slice, vec![i(d), i(start), i(end), i(step)], s)
    }

    fn view_narrow(&mut self, xv: &Val) -> ViewStep {
        let d = self.dim(xv.shape.len());
        let du = d.rem_euclid(xv.shape.len() as i64) as usize;
        let n = xv.shape[du] as i64;
        let start = self.c.range(0, (n - 1).max(0));
        let len = if self.c.chance(1, 12) { 0 } else { self.c.range(1.min(n - start), n - start) };
        let start_arg = if self.c.chance(1, 4) && n > 0 { start - n } else { start };
        let mut s = xv.shape.clone();
        s[du] = len as usize;
        ViewStep::new(xv, OpKind::Narrow, vec![i(d), i(start_arg), i(len)], s).contiguous(xv.contiguous && du == 0)
    }

    /// An `as_strided` geometry that fits in `n` storage elements (the
    /// offset is absolute in the storage, which holds at least the `n`
    /// elements of the receiver).
    pub(super) fn strided_geometry(&mut self, n: usize) -> Option<(Vec<usize>, Vec<usize>, usize)> {
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
}
