//! Compute steps: elementwise and reduction ops, matmul, copies and fresh
//! tensors shaped like a value.

use super::{broadcast, Gen, Val};
use aot_ir::graph::args::{b as bool_arg, f, i, ints, t};
use aot_ir::Arg as IrArg;
use aot_ir::OpKind;

impl Gen<'_, '_> {
    pub(super) fn compute(&mut self) {
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
        let op = *self.c.pick(&[
            OpKind::Neg,
            OpKind::Exp,
            OpKind::Relu,
            OpKind::Sigmoid,
            OpKind::Tanh,
            OpKind::Abs,
            OpKind::Sin,
            OpKind::Expm1,
            OpKind::Cumsum,
        ]);
        let xv = self.vals[x].clone();
        // cumsum's dim, possibly negative (a 0-d value has dims 0 and -1)
        let args = if op == OpKind::Cumsum {
            let rank = xv.shape.len().max(1) as i64;
            vec![i(self.c.range(-rank, rank - 1))]
        } else {
            vec![]
        };
        let out = self.b.call(op, xv.id, args);
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
        match self.c.weighted(&[3, 3, 1, 1, 1, 1, 1]) {
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
            4 => {
                let v = self.scalar_literal();
                let out = self.b.call(OpKind::FullLike, xv.id, vec![v]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
            // Random ops: both paths start from one generator state
            // (`diff::check_call`) and must draw the same numbers.
            5 => {
                let out = self.b.call(OpKind::RandLike, xv.id, vec![]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
            _ => {
                // 0 and 1 draw nothing; the scalar parameter may be any value.
                let p = match &self.scalar {
                    Some(s) if self.c.chance(1, 4) => IrArg::Scalar(s.clone()),
                    _ => f(*self.c.pick(&[0.0, 0.25, 0.5, 1.0])),
                };
                let out = self.b.call(OpKind::Dropout, xv.id, vec![p]);
                self.fresh(out, xv.shape.clone(), xv.contiguous);
            }
        }
    }
}
