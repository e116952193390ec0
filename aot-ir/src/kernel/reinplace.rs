//! Reinplacing (PyTorch's `reinplace` pass): a functional graph whose every
//! node is elementwise and whose writes are whole-input elementwise
//! updates (an optimizer step: `buf.mul_(m).add_(g); p.sub_(buf * lr)`)
//! becomes kernels that store each written input's new value over the
//! input's own storage, one kernel per set of writes that read one
//! another's new values, so the step is one pass with no copy, no
//! temporary and no copy-back.
//!
//! [`reinplace`] accepts a graph only when writing in place is plainly
//! legal, from its structure alone:
//! - every written group is one argument (no other argument shares its
//!   storage), and nothing changes metadata or returns a tensor the graph
//!   computed (outputs are arguments, or nothing);
//! - nodes are primals, `cow`s of written primals, whole-root writes
//!   `scatter(c, [], op_(c, x))` with `op_` one of `add_`, `sub_`, `mul_`,
//!   `div_`, and elementwise ops;
//! - a written primal is read by its `cow` alone, and each version before
//!   the last by the next write alone: nothing reads an old value after
//!   the write. Elementwise results are read once. A later kernel may read
//!   the final version of a group written before it (the new value, which
//!   is what the storage then holds).
//!
//! So each group's kernel is a tree over the written primal (read at the
//! very index it writes), other inputs and earlier kernels' results, and
//! the kernels run in graph order ([`Reinplaced::single`]). Groups whose
//! kernels read one another's results (`buf`'s new value, read by `p`'s
//! write) are also fused into one multi-output kernel
//! ([`Reinplaced::fused`]) that loads every primal once and stores each
//! group's final version over its own primal at the same index: one
//! SGD-momentum or Adam step per parameter is one pass, reading `p`, `buf`
//! (or `m`, `v`) and `g` once and writing `p` and `buf` once. That is
//! exact because each primal is read by its own first write alone: no
//! kernel reads a destination's old value at another index, or after it
//! was written. Whether the shapes and dtypes let the out-of-place body
//! stand for the in-place ops (every value of the destination's dtype and
//! shape, the destination dense over its whole storage; for a fused
//! kernel, every destination of one dtype and one layout, so one index
//! space serves them all) is decided at run time, for all kernels before
//! the first one writes: the fused kernels if they fit, else the single
//! ones, else the call runs its ordinary plan.

use crate::graph::{Kernel, Node, Op};
use crate::op::is_elementwise;
use crate::op::OpKind;
use crate::transform::{FOutput, FunctionalGraph};
use crate::types::{Arg, ValueId};

/// Where an in-place kernel stores one of its values: over the primal of
/// a written input group.
#[derive(Clone, Debug, PartialEq)]
pub struct InPlaceStore {
    /// The written input group.
    pub group: usize,
    /// The kernel input that is the group's primal: where the value is stored.
    pub dest: usize,
    /// The group's final version (what its copy-back reads).
    pub out: ValueId,
}

/// One kernel that writes one or more input groups in place.
#[derive(Clone, Debug, PartialEq)]
pub struct InPlaceKernel {
    /// Its body is out-of-place elementwise ops; its inputs are
    /// [`Self::inputs`].
    pub kernel: Kernel,
    /// The functional values it loads, in order: primals and earlier
    /// kernels' results ([`InPlaceStore::out`]).
    pub inputs: Vec<ValueId>,
    /// Per stored value of the kernel ([`Kernel::outs`], in order), the
    /// group it writes.
    pub stores: Vec<InPlaceStore>,
}

impl InPlaceKernel {
    /// The kernel's listing, naming the input each value is stored over.
    pub fn listing(&self, names: crate::print::Names<'_>) -> String {
        let l = self.kernel.listing(names);
        let outs: Vec<String> = self.kernel.outs().map(|v| v.to_string()).collect();
        let store = format!("    store {}\n", outs.join(", "));
        let over: Vec<String> = self.kernel.outs().zip(&self.stores).map(|(v, st)| format!("{v} in place of in{}", st.dest)).collect();
        l.replacen(&store, &format!("    store {}\n", over.join(", ")), 1)
    }
}

/// The in-place kernels of a graph, two ways.
#[derive(Clone, Debug, PartialEq)]
pub struct Reinplaced {
    /// One kernel per set of written groups whose writes read one
    /// another's new values (an optimizer step of one parameter: the new
    /// momentum and the new parameter), storing each group's final
    /// version; `None` where that is one kernel per group already.
    pub fused: Option<Vec<InPlaceKernel>>,
    /// One kernel per written group, run in graph order, each reading
    /// earlier kernels' results from the storage they wrote: for calls
    /// where a fused kernel's destinations differ in shape, layout or
    /// dtype (one index space cannot serve them all).
    pub single: Vec<InPlaceKernel>,
}

/// The out-of-place op of a whole-root in-place write this pass takes: the
/// binary arithmetic ones.
fn out_of_place(op: OpKind) -> Option<OpKind> {
    op.out_of_place().filter(|k| matches!(k, OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div))
}

/// What a node of the graph is to the pass.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Primal,
    /// A `cow` of the primal of a written group.
    Cow,
    /// A whole-root write: the out-of-place op.
    Write(OpKind),
    Elementwise,
}

fn role(n: &Node) -> Option<Role> {
    match &n.op {
        Op::Primal(_) => Some(Role::Primal),
        Op::Cow => Some(Role::Cow),
        Op::Mutate { op, chain } if chain.is_empty() && n.args.len() == 3 && n.args[0] == n.args[1] => out_of_place(*op).map(Role::Write),
        Op::Dsl { op, check_alias: None } if is_elementwise(*op) => Some(Role::Elementwise),
        _ => None,
    }
}

/// The in-place kernels of `fg` (each set named `fused_<ops>_<k>` from
/// `first`), or `None` where the graph is not of the shape the module doc
/// describes.
pub fn reinplace(fg: &FunctionalGraph, first: usize) -> Option<Reinplaced> {
    let outputs_ok = fg.outputs.iter().all(|o| matches!(o, FOutput::Input(_)));
    if fg.mutated_groups.is_empty() || !fg.metadata_mutations.is_empty() || !outputs_ok {
        return None;
    }
    let n = fg.num_values;
    let mut uses = vec![0usize; n];
    for v in fg.nodes.iter().flat_map(Node::tensor_args).chain(fg.mutated_groups.iter().map(|&(_, v)| v)) {
        *uses.get_mut(v.index())? += 1;
    }
    let final_of = |v: ValueId| fg.mutated_groups.iter().find(|&&(_, w)| w == v).map(|&(g, _)| g);
    let written = |g: usize| fg.mutated_groups.iter().any(|&(w, _)| w == g);
    // Per value: the node defining it, and for versions of a written
    // group, that group.
    let mut def: Vec<Option<usize>> = vec![None; n];
    let mut version_of: Vec<Option<usize>> = vec![None; n];
    let mut primal_of: Vec<Option<ValueId>> = vec![None; fg.groups.single.len()];
    for (i, node) in fg.nodes.iter().enumerate() {
        let out = node.out?;
        *def.get_mut(out.index())? = Some(i);
        match role(node)? {
            Role::Primal => {
                let Op::Primal(g) = node.op else { return None };
                *primal_of.get_mut(g)? = Some(out);
                if written(g) {
                    // Read by its `cow` alone; one argument in its group.
                    if !fg.groups.single.get(g).copied().unwrap_or(false) || uses[out.index()] != 1 {
                        return None;
                    }
                    version_of[out.index()] = Some(g);
                }
            }
            Role::Cow => {
                let src = node.args.first()?.as_tensor()?;
                let g = version_of.get(src.index()).copied().flatten()?;
                // The primal itself, read by one write.
                if primal_of.get(g).copied().flatten() != Some(src) || uses[out.index()] != 2 {
                    return None;
                }
                version_of[out.index()] = Some(g);
            }
            Role::Write(_) => {
                let root = node.args[0].as_tensor()?;
                let g = version_of.get(root.index()).copied().flatten()?;
                if primal_of.get(g).copied().flatten() == Some(root) {
                    return None;
                }
                version_of[out.index()] = Some(g);
                // Read by the next write alone, or the final version.
                let last = final_of(out) == Some(g);
                if !last && uses[out.index()] != 2 {
                    return None;
                }
            }
            Role::Elementwise => {
                if uses[out.index()] != 1 || final_of(out).is_some() {
                    return None;
                }
            }
        }
    }
    // No node reads a version of a written group other than its next
    // write, except final versions (the new values).
    for node in &fg.nodes {
        for v in node.tensor_args() {
            let Some(g) = version_of.get(v.index()).copied().flatten() else { continue };
            let next_write = matches!(role(node), Some(Role::Write(_)) | Some(Role::Cow)) && node.args.first() == Some(&Arg::Tensor(v));
            if !next_write && final_of(v) != Some(g) {
                return None;
            }
        }
    }
    let mut finals: Vec<(usize, ValueId)> = fg.mutated_groups.clone();
    finals.sort_by_key(|&(_, v)| def[v.index()]);
    let mut single = Vec::new();
    for &(g, last) in &finals {
        single.push(tree(fg, &def, &version_of, &[(g, last)], first + single.len())?);
    }
    let (comp, roots) = components(&single);
    if roots.len() == single.len() {
        return Some(Reinplaced { fused: None, single });
    }
    let mut fused = Vec::new();
    for r in roots {
        let groups: Vec<(usize, ValueId)> = finals.iter().zip(&comp).filter(|(_, &c)| c == r).map(|(&f, _)| f).collect();
        fused.push(tree(fg, &def, &version_of, &groups, first + fused.len())?);
    }
    Some(Reinplaced { fused: Some(fused), single })
}

/// Per kernel of `single`, its component (kernels joined where one reads
/// another's result), and the components.
fn components(single: &[InPlaceKernel]) -> (Vec<usize>, Vec<usize>) {
    let mut comp: Vec<usize> = (0..single.len()).collect();
    for (j, k) in single.iter().enumerate() {
        for v in &k.inputs {
            if let Some(i) = single.iter().position(|e| e.stores.iter().any(|st| st.out == *v)) {
                let (a, b) = (comp[i], comp[j]);
                comp.iter_mut().filter(|c| **c == b).for_each(|c| *c = a);
            }
        }
    }
    let mut roots = comp.clone();
    roots.sort_unstable();
    roots.dedup();
    (comp, roots)
}

/// The kernel storing the final versions `groups` (group, final value):
/// the nodes they are computed from, back to primals and other groups'
/// final versions.
fn tree(
    fg: &FunctionalGraph,
    def: &[Option<usize>],
    version_of: &[Option<usize>],
    groups: &[(usize, ValueId)],
    index: usize,
) -> Option<InPlaceKernel> {
    let mine = |v: ValueId| version_of[v.index()].is_some_and(|g| groups.iter().any(|&(w, _)| w == g));
    let mut members: Vec<usize> = Vec::new();
    let mut inputs: Vec<ValueId> = Vec::new();
    let mut stack: Vec<ValueId> = groups.iter().map(|&(_, v)| v).collect();
    while let Some(v) = stack.pop() {
        let d = def.get(v.index()).copied().flatten()?;
        let node = &fg.nodes[d];
        let is_member = match role(node)? {
            Role::Primal => false,
            // Another group's final version: an earlier kernel's result.
            Role::Write(_) if !mine(v) => false,
            Role::Cow | Role::Write(_) | Role::Elementwise => true,
        };
        if !is_member {
            if !inputs.contains(&v) {
                inputs.push(v);
            }
            continue;
        }
        if !members.contains(&d) {
            members.push(d);
            // A write reads its root once (`args[1]` is the same view).
            let args = if matches!(node.op, Op::Mutate { .. }) { [&node.args[..1], &node.args[2..]].concat() } else { node.args.clone() };
            stack.extend(args.iter().filter_map(Arg::as_tensor));
        }
    }
    members.sort_unstable();
    inputs.sort_by_key(|v| def[v.index()]);
    let is_primal = |v: ValueId| def[v.index()].is_some_and(|d| matches!(fg.nodes[d].op, Op::Primal(_)));
    let dest_of = |g: usize| inputs.iter().position(|&v| version_of[v.index()] == Some(g) && is_primal(v));
    // Body values: the loads, then each member but the `cow`s, each of
    // which is its primal's load.
    let mut local: Vec<(ValueId, ValueId)> = inputs.iter().enumerate().map(|(k, &v)| (v, ValueId(k as u32))).collect();
    let mut body: Vec<Node> = (0..inputs.len()).map(|k| Node::new(Op::Load(k), Vec::new(), Some(ValueId(k as u32)))).collect();
    let mut stage_values = inputs.clone();
    let mut ops: Vec<&str> = Vec::new();
    for &m in &members {
        let node = &fg.nodes[m];
        let out = node.out?;
        let map = |a: &Arg| -> Option<Arg> {
            Some(match a {
                Arg::Tensor(v) => Arg::Tensor(local.iter().find(|(w, _)| w == v)?.1),
                other => other.clone(),
            })
        };
        let (op, args) = match role(node)? {
            Role::Cow => {
                let Arg::Tensor(src) = map(node.args.first()?)? else { return None };
                local.push((out, src));
                continue;
            }
            Role::Write(op) => (op, [&node.args[..1], &node.args[2..]].concat()),
            _ => (node.kind()?, node.args.clone()),
        };
        let args = args.iter().map(map).collect::<Option<Vec<Arg>>>()?;
        let id = ValueId(stage_values.len() as u32);
        local.push((out, id));
        stage_values.push(out);
        ops.push(op.name());
        body.push(Node { op: Op::Dsl { op, check_alias: None }, args, out: Some(id), no_grad: false, span: node.span });
    }
    let mut outs = Vec::new();
    let mut stores = Vec::new();
    for &(g, last) in groups {
        outs.push(local.iter().find(|(w, _)| *w == last)?.1);
        stores.push(InPlaceStore { group: g, dest: dest_of(g)?, out: last });
    }
    ops.truncate(6);
    let kernel = Kernel {
        name: format!("fused_{}_{index}", ops.join("_")),
        num_values: stage_values.len(),
        out: *outs.first()?,
        extra_outs: outs[1..].to_vec(),
        stage_values,
        body,
    };
    Some(InPlaceKernel { kernel, inputs, stores })
}

#[cfg(test)]
mod tests;
