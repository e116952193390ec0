//! Mutation steps: in-place writes to writable values (inputs, views of
//! inputs, intermediates) and metadata mutations of values the program may
//! restride.

use super::views::as_strided_args;
use super::{broadcast, has_internal_overlap, numel, Gen, Val};
use aot_ir::graph::args::{f, i, t};
use aot_ir::{OpKind, ValueId};

impl Gen<'_, '_> {
    pub(super) fn data_mutation(&mut self) {
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

    pub(super) fn metadata_mutation(&mut self) {
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
                let (d0, d1, s) = self.transposed(&xv.shape);
                shape = s;
                (K::TransposeInplace, vec![i(d0), i(d1)])
            }
            2 => {
                let (d, s) = self.unsqueezed(&xv.shape);
                shape = s;
                (K::UnsqueezeInplace, vec![i(d)])
            }
            3 => {
                let (d, s) = self.squeezed(&xv.shape);
                shape = s;
                (K::SqueezeInplace, vec![i(d)])
            }
            _ => match self.strided_geometry(numel(&xv.shape)) {
                Some((size, stride, off)) => {
                    overlap = has_internal_overlap(&size, &stride);
                    let args = as_strided_args(&size, &stride, off);
                    shape = size;
                    (K::AsStridedInplace, args)
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
}
