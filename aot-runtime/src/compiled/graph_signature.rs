//! PyTorch's `create_graph_signature` (`GraphSignature.from_tracing_metadata`):
//! what each input and output of a call's graph is, as
//! `aot_export_module` reports it.
//!
//! The facts come from the call's plan as [`explain`](CompiledFn::explain)
//! reports it (which inputs are written, which require grad); the graph
//! adds names:
//! - inputs are named by the graph's input names: a struct's field is its
//!   path (`m.w1`), which is also its parameter or buffer name (PyTorch's
//!   FQN, `w1` for the module's own parameter), so `inputs_to_parameters`
//!   and `inputs_to_buffers` map each name to itself;
//! - outputs are named as FX names nodes: the op's functional name (`mul`
//!   for `mul_`), with `_1`, `_2`, ... for its later uses; a returned
//!   input keeps its input name; a mutated input's new value is named by the
//!   last in-place node that writes it;
//! - gradients (the backward graph's outputs) are named `<input>.grad`.
//!
//! Every parameter and buffer of a struct argument is listed, as
//! `aot_export_module` lifts every one of a module's: a leaf the body never
//! reads is not an input of our graph, but the signature lists it as an
//! input that nothing reads (named by its path, in declaration order, with
//! a gradient entry when it requires grad, as PyTorch's has one for every
//! parameter that requires grad), and `explain()` appends its
//! `input_info` (see `CompiledFn::explain`).
//!
//! Our graph's inputs are in the function's parameter order, not PyTorch's
//! (parameters, buffers, user inputs); the lists follow PyTorch's order:
//! parameters and buffers in the structs' declaration order, then user
//! inputs (scalar parameters included: they are graph inputs too).
//!
//! As in PyTorch, only buffers and user inputs may be mutated: a call that
//! writes a parameter in place, or changes an input's metadata (`t_()`),
//! has no graph signature and is an error. For a call that records
//! gradients the loss is the first user output (`output_loss_index=0`).
//! `loss_output` is named as PyTorch names it: the graph output at that
//! index, counting the new values of mutated buffers and inputs, which
//! come before the user outputs. So a training call that also writes a
//! buffer reports that write's output there, exactly as `aot_export_module`
//! does; without writes it is the first user output.

use super::boundary::{Picked, Unread};
use super::CompiledFn;
use crate::arg::Arg;
use crate::error::{AotError, Result};
use crate::tree::LeafKind;
use aot_ir::analysis::alias::AliasInfo;
use aot_ir::{Graph, OpClass, ValueDef, ViewAndMutationMeta};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// PyTorch's `GraphSignature`: the role and name of every graph input and
/// output. `serde_json::to_value` of it has PyTorch's field names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphSignature {
    /// Parameter names (field paths), in declaration order.
    pub parameters: Vec<String>,
    /// Buffer names (field paths of `#[buffer]` fields).
    pub buffers: Vec<String>,
    /// Graph input names of the plain (non-struct) arguments.
    pub user_inputs: Vec<String>,
    /// Output names of the function's results.
    pub user_outputs: Vec<String>,
    /// Graph input name -> the parameter it takes.
    pub inputs_to_parameters: BTreeMap<String, String>,
    /// Graph input name -> the buffer it takes.
    pub inputs_to_buffers: BTreeMap<String, String>,
    /// Output name of a buffer's new value -> the buffer.
    pub buffers_to_mutate: BTreeMap<String, String>,
    /// Output name of a user input's new value -> the input.
    pub user_inputs_to_mutate: BTreeMap<String, String>,
    /// `None` for a call that records no gradients.
    pub backward_signature: Option<BackwardSignature>,
}

/// PyTorch's `BackwardSignature`: which backward output is the gradient of
/// which input, and which forward output is the loss.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackwardSignature {
    /// Backward output name -> the parameter it is the gradient of.
    pub gradients_to_parameters: BTreeMap<String, String>,
    /// Backward output name -> the user input it is the gradient of.
    pub gradients_to_user_inputs: BTreeMap<String, String>,
    /// The name of the forward output that is the loss.
    pub loss_output: String,
}

impl CompiledFn {
    /// The graph signature of a call with these arguments (struct
    /// arguments as [`Arg::tree`]), as PyTorch's `aot_export_module`
    /// reports it; see the module docs for the names.
    ///
    /// ```
    /// use aot_runtime::prelude::*;
    ///
    /// #[derive(TensorTree)]
    /// struct Stats {
    ///     #[buffer]
    ///     running_mean: Tensor,
    /// }
    ///
    /// #[aot_fn]
    /// fn track(s: &mut Stats, x: &Tensor) -> Tensor {
    ///     no_grad! { s.running_mean.mul_(0.9).add_(&(x.mean_dim(&[0], false) * 0.1)); }
    ///     x - s.running_mean
    /// }
    ///
    /// let s = Stats { running_mean: Tensor::zeros(&[3], DType::F32, &Device::Cpu)? };
    /// let x = Tensor::ones(&[4, 3], DType::F32, &Device::Cpu)?;
    /// let sig = track::compiled().graph_signature(&[Arg::tree(&s), Arg::from(&x)])?;
    /// assert_eq!(sig.buffers, ["s.running_mean"]);
    /// assert_eq!(sig.user_inputs, ["x"]);
    /// assert_eq!(sig.buffers_to_mutate.values().collect::<Vec<_>>(), ["s.running_mean"]);
    /// assert_eq!(sig.user_outputs, ["sub"]);
    /// assert!(sig.backward_signature.is_none());
    /// # Ok::<(), AotError>(())
    /// ```
    pub fn graph_signature(&self, args: &[Arg]) -> Result<GraphSignature> {
        if self.variants.is_some() || self.loops.is_some() || self.broken.is_some() {
            return self.variant(args)?.graph_signature(args);
        }
        let picked = match &self.boundary {
            Some(b) => b.pick(&self.graph.name, args)?,
            None => vec![None; self.graph.params.len()],
        };
        let unread = self.boundary.as_ref().map(|b| b.unread(args)).unwrap_or_default();
        let flat = match &self.boundary {
            Some(b) => b.flat(args, &picked),
            None => args.to_vec(),
        };
        let report = self.explain_flat(&flat)?;
        let training = self.records_grad(&flat);
        build(&self.graph, &report.fw_metadata, &picked, &unread, training)
    }
}

/// Where an input comes in PyTorch's order: (0, leaf order) for a buffer,
/// (1, (position, 0)) for a user input.
type InputRank = (u8, (usize, usize));

/// A parameter or buffer of the signature: a graph input, or a leaf the
/// body never reads.
struct Lifted {
    name: String,
    kind: LeafKind,
    order: (usize, usize),
    requires_grad: bool,
}

fn build(g: &Graph, meta: &ViewAndMutationMeta, picked: &[Option<Picked>], unread: &[Unread], training: bool) -> Result<GraphSignature> {
    let name = |j: usize| g.params[j].name.clone();
    let mut tree: Vec<Lifted> = picked
        .iter()
        .enumerate()
        .filter_map(|(j, p)| {
            let p = p.as_ref()?;
            Some(Lifted { name: name(j), kind: p.kind, order: p.order, requires_grad: meta.input_info[j].requires_grad })
        })
        .chain(unread.iter().map(|u| Lifted {
            name: u.name.clone(),
            kind: u.kind,
            order: u.order,
            requires_grad: u.tensor.requires_grad(),
        }))
        .collect();
    tree.sort_by_key(|l| l.order);
    let of_kind = |k: LeafKind| tree.iter().filter(|l| l.kind == k).collect::<Vec<_>>();
    let (params, buffers) = (of_kind(LeafKind::Parameter), of_kind(LeafKind::Buffer));
    let users: Vec<usize> = (0..g.params.len()).filter(|&j| picked[j].is_none()).collect();
    let names = |ls: &[&Lifted]| ls.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
    let identity = |ls: &[&Lifted]| ls.iter().map(|l| (l.name.clone(), l.name.clone())).collect::<BTreeMap<_, _>>();

    let nodes = node_names(g);
    let refuse = |msg: String| AotError::Unsupported { op: "graph_signature", msg: format!("`{}`: {msg}", g.name) };
    let (mut buffers_to_mutate, mut user_inputs_to_mutate) = (BTreeMap::new(), BTreeMap::new());
    let mut alias = None;
    // The new values' outputs keyed by PyTorch's input order (buffers in
    // declaration order, then user inputs): the graph's first outputs.
    let mut mutation_outputs: Vec<(InputRank, String)> = Vec::new();
    for (j, info) in meta.input_info.iter().enumerate() {
        if info.mutates_metadata {
            return Err(refuse(format!("input `{}` has its metadata changed in place; a graph signature has no place for that", name(j))));
        }
        if !info.mutates_data {
            continue;
        }
        let out = writer_name(g, alias.get_or_insert_with(|| AliasInfo::compute(g)), &nodes, j);
        match picked[j].as_ref().map(|p| p.kind) {
            Some(LeafKind::Parameter) => {
                return Err(refuse(format!(
                    "parameter `{}` is written in place; as in PyTorch's `aot_export_module`, only buffers and user inputs may be (mark the field `#[buffer]`)",
                    name(j)
                )))
            }
            Some(LeafKind::Buffer) => {
                mutation_outputs.push(((0, picked[j].as_ref().map_or((0, 0), |p| p.order)), out.clone()));
                buffers_to_mutate.insert(out, name(j))
            }
            None => {
                mutation_outputs.push(((1, (j, 0)), out.clone()));
                user_inputs_to_mutate.insert(out, name(j))
            }
        };
    }
    let user_outputs: Vec<String> = g
        .outputs
        .iter()
        .map(|&v| match g.values[v.index()].def {
            ValueDef::Param(j) => name(j),
            ValueDef::Node(n) => nodes[n].clone(),
        })
        .collect();

    let backward_signature = if training {
        let grad = |n: &str| (format!("{n}.grad"), n.to_string());
        // PyTorch names `graph_output_names[output_loss_index]`, counting
        // the mutated inputs' new values, which come first: with a buffer
        // or input written, that is the first one's name, not the loss's.
        mutation_outputs.sort();
        let loss_output = mutation_outputs
            .into_iter()
            .map(|(_, n)| n)
            .chain(user_outputs.iter().cloned())
            .next()
            .ok_or_else(|| refuse("a call that records gradients needs a loss output, but the function returns nothing".into()))?;
        Some(BackwardSignature {
            gradients_to_parameters: tree.iter().filter(|l| l.requires_grad).map(|l| grad(&l.name)).collect(),
            gradients_to_user_inputs: users.iter().filter(|&&j| meta.input_info[j].requires_grad).map(|&j| grad(&name(j))).collect(),
            loss_output,
        })
    } else {
        None
    };
    Ok(GraphSignature {
        parameters: names(&params),
        buffers: names(&buffers),
        user_inputs: users.iter().map(|&j| name(j)).collect(),
        user_outputs,
        inputs_to_parameters: identity(&params),
        inputs_to_buffers: identity(&buffers),
        buffers_to_mutate,
        user_inputs_to_mutate,
        backward_signature,
    })
}

/// FX-style names of the nodes: the op's functional name, then `_1`, `_2`
/// for later nodes of the same name.
fn node_names(g: &Graph) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    g.nodes
        .iter()
        .map(|n| {
            let base = n.kind().map_or("node", |k| k.name().trim_end_matches('_')).to_string();
            let count = seen.entry(base.clone()).or_insert(0);
            let name = if *count == 0 { base } else { format!("{base}_{count}") };
            *count += 1;
            name
        })
        .collect()
}

/// The name of input `j`'s new value: the last node that writes its data.
fn writer_name(g: &Graph, alias: &AliasInfo, nodes: &[String], j: usize) -> String {
    g.nodes
        .iter()
        .enumerate()
        .rev()
        .find(|(_, n)| {
            n.kind().is_some_and(|k| k.class() == OpClass::DataMutation)
                && n.args.first().and_then(|a| a.as_tensor()).is_some_and(|t| alias.input_of(t) == Some(j))
        })
        .map_or_else(|| format!("{}_updated", g.params[j].name), |(i, _)| nodes[i].clone())
}
