//! In-place writes deferred to the epilogue, for the commonest shape of a
//! written input: `x.add_(y)` on a one-tensor input group that nothing
//! else reads, with `y` an input the call does not write.
//!
//! The plan copies such an input (`Cow`), writes the copy and copies it
//! back in the epilogue, so that a failing node leaves the input as it was.
//! When the write is one a direct kernel does (`direct_kernels.rs`), which cannot
//! fail once its operands qualify, and both operands are inputs no other
//! node of the call writes (data or metadata), the write itself can wait for the epilogue and go
//! straight to the caller's storage: the operands are the same then, the
//! result is the same values with the same single version bump, and
//! nothing is written unless every node succeeded. The check that the
//! operands qualify is made before the plan runs ([`Deferred::ready`]),
//! and the dense runs it found are what the epilogue writes through
//! ([`Ready::apply`]); a call whose operands do not qualify runs the plan
//! as it is.

use super::direct_kernels::{inplace_runs, inplace_runs_of, write_checked, DenseWrite, Geom};
use crate::arg::Bases;
use aot_ir::transform::{FOutput, FunctionalGraph};
use aot_ir::{Arg as IrArg, Node, Op, OpKind, ValueId};

/// How many writes of one specialisation may be deferred (a call keeps
/// their checked runs inline; further writes run on copies).
const MAX_WRITES: usize = 4;

/// One deferred write: input group `group` takes `op` (an in-place op
/// whose receiver is the group's base and whose operand is input group
/// `operand`'s base).
#[derive(Debug)]
pub(crate) struct Write {
    pub(crate) group: usize,
    operand: usize,
    op: OpKind,
}

/// The writes of a specialisation that may be deferred, and the plan's
/// nodes they replace (the `Cow`s and the `Mutate`s).
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    pub(crate) writes: Vec<Write>,
    /// Per plan node: replaced by a deferred write.
    pub(crate) skip: Vec<bool>,
}

fn output_values(o: &FOutput) -> Option<ValueId> {
    match o {
        FOutput::Input(_) => None,
        FOutput::AliasOfInput { value, .. } | FOutput::Value(value) | FOutput::ViewOfIntermediate { value, .. } => Some(*value),
    }
}

impl Deferred {
    /// The writes of `fg` that may be deferred (see the module doc).
    pub(crate) fn plan(fg: &FunctionalGraph) -> Deferred {
        let mut d = Deferred { writes: Vec::new(), skip: vec![false; fg.nodes.len()] };
        let base_group = |v: ValueId| {
            fg.nodes.iter().find_map(|n| match n.op {
                Op::Primal(group) if n.out == Some(v) => Some(group),
                _ => None,
            })
        };
        let written = |g: usize| fg.mutated_groups.iter().any(|&(w, _)| w == g);
        for &(group, last) in &fg.mutated_groups {
            if d.writes.len() == MAX_WRITES {
                break;
            }
            let Some((cow, mutate, write)) = Self::deferrable(fg, group, last, &base_group, &written) else { continue };
            d.skip[cow] = true;
            d.skip[mutate] = true;
            d.writes.push(write);
        }
        if d.writes.is_empty() {
            d.skip.clear();
            return d;
        }
        // Bases only the replaced nodes read need not be made either.
        let mut read: Vec<ValueId> = fg.outputs.iter().filter_map(output_values).collect();
        read.extend(fg.metadata_mutations.iter().map(|&(_, v)| v));
        read.extend(fg.mutated_groups.iter().map(|&(_, v)| v));
        read.extend(fg.nodes.iter().zip(&d.skip).filter(|(_, &skip)| !skip).flat_map(|(n, _)| n.tensor_args()));
        for (n, skip) in fg.nodes.iter().zip(&mut d.skip) {
            if let Op::Primal(_) = n.op {
                *skip |= !read.contains(&n.value());
            }
        }
        d
    }

    /// `(cow, mutate, write)` when group `group`, whose final version is
    /// `last`, is written by one deferrable node.
    fn deferrable(
        fg: &FunctionalGraph,
        group: usize,
        last: ValueId,
        base_group: &dyn Fn(ValueId) -> Option<usize>,
        written: &dyn Fn(usize) -> bool,
    ) -> Option<(usize, usize, Write)> {
        if !fg.groups.single.get(group).copied().unwrap_or(false) {
            return None;
        }
        let base = fg.nodes.iter().find_map(|n| match n.op {
            Op::Primal(g) if g == group => n.out,
            _ => None,
        })?;
        let reads = |n: &Node, v: ValueId| n.args.first() == Some(&IrArg::Tensor(v));
        let cow = fg.nodes.iter().position(|n| matches!(n.op, Op::Cow) && reads(n, base))?;
        let copy = fg.nodes[cow].out?;
        let mutate = fg.nodes.iter().position(|n| matches!(n.op, Op::Mutate { .. }) && reads(n, copy))?;
        let node = &fg.nodes[mutate];
        let Op::Mutate { op, .. } = node.op else { return None };
        let is_binary_inplace = matches!(op, OpKind::AddInplace | OpKind::SubInplace | OpKind::MulInplace | OpKind::DivInplace);
        // `[root, view, operand]`, the view being the whole root.
        if node.out != Some(last) || !is_binary_inplace || node.args.len() != 3 || node.args[1] != IrArg::Tensor(copy) {
            return None;
        }
        let IrArg::Tensor(operand) = node.args[2] else { return None };
        let operand_group = base_group(operand)?;
        if operand_group == group || written(operand_group) {
            return None;
        }
        // Nothing else reads the group's versions, or returns them.
        let own = [base, copy, last];
        let read_elsewhere = fg.nodes.iter().enumerate().any(|(i, n)| i != cow && i != mutate && n.tensor_args().any(|v| own.contains(&v)));
        let returned = fg.outputs.iter().filter_map(output_values).any(|v| own.contains(&v));
        // The epilogue changes metadata before it writes data: the write
        // must see both tensors as the op did.
        let in_groups = |p: usize| matches!(fg.groups.group_of.get(p), Some(Some(g)) if *g == group || *g == operand_group);
        let reshaped = fg.metadata_mutations.iter().any(|&(p, v)| own.contains(&v) || in_groups(p));
        if read_elsewhere || returned || reshaped {
            return None;
        }
        Some((cow, mutate, Write { group, operand: operand_group, op }))
    }

    /// The deferred writes for this call, when its operands qualify for
    /// every one of them (then the plan skips the nodes in
    /// [`Ready::skip`] and the epilogue runs [`Ready::apply`]), with the
    /// runs the check found. `None`: run the plan as it is. `geom(p)`:
    /// argument `p`'s geometry as the guard key's pass read it, if it did.
    #[inline]
    pub(crate) fn ready(&self, bases: &Bases, geom: impl Fn(usize) -> Option<Geom>) -> Option<Ready<'_>> {
        if self.writes.is_empty() {
            return None;
        }
        let mut runs = [const { None }; MAX_WRITES];
        for (w, slot) in self.writes.iter().zip(&mut runs) {
            let read = bases.single_arg(w.group).and_then(&geom).zip(bases.single_arg(w.operand).and_then(&geom));
            let run = bases.with(w.group, |t| {
                bases.with(w.operand, |o| match read {
                    Some((tg, og)) => inplace_runs_of(w.op, t, tg, o, og),
                    None => inplace_runs(w.op, t, o),
                })
            });
            *slot = Some(run???);
        }
        Some(Ready { deferred: self, runs })
    }
}

/// The deferred writes of one call whose operands qualified, with the
/// dense runs [`Deferred::ready`] checked: the epilogue writes through
/// them without reading the layouts again (nothing in the call changes
/// them: a group whose metadata changes is never deferred).
pub(crate) struct Ready<'d> {
    deferred: &'d Deferred,
    /// Per write of `deferred`, its checked runs.
    runs: [Option<DenseWrite>; MAX_WRITES],
}

impl Ready<'_> {
    /// Per plan node: replaced by a deferred write.
    pub(crate) fn skip(&self) -> &[bool] {
        &self.deferred.skip
    }

    /// Whether input group `group` is written by a deferred write.
    pub(crate) fn defers(&self, group: usize) -> bool {
        self.deferred.writes.iter().any(|w| w.group == group)
    }

    /// Runs the deferred write of `group` on the caller's tensor; `false`
    /// when `group` has none, or it did not run.
    pub(crate) fn apply(&self, group: usize, bases: &Bases) -> bool {
        let Some(i) = self.deferred.writes.iter().position(|w| w.group == group) else { return false };
        let (w, Some(Some(runs))) = (&self.deferred.writes[i], self.runs.get(i)) else { return false };
        bases.with(w.group, |t| bases.with(w.operand, |o| write_checked(runs, t, o))) == Some(Some(true))
    }
}
