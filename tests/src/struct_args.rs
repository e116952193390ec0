//! Struct arguments in the differential tests: some tensor parameters of a
//! generated program become the fields of one struct parameter `m`
//! (passed as [`Arg::tree`]), as `#[aot_fn]` builds a function that takes
//! `m: &Mlp` (PyTorch's `create_functional_call`). The compiled call takes
//! the struct and flattens it at its boundary; it must still equal the eager
//! reference run on the flat arguments, for every alias pattern (two fields
//! may be one tensor, or overlapping views of one storage).

use crate::alias::{ArgSpec, ArgTemplate, Materialised};
use crate::choice::Choices;
use aot_ir::Graph;
use aot_runtime::tree::{join, next_leaf, Leaf, LeafKind, TensorTree};
use aot_runtime::{Arg, CompiledFn, Result, Tensor};

/// The struct: named tensor fields (the caller's own tensor handles, so
/// writes to a field reach the caller's tensor).
pub struct Fields(pub Vec<(String, Tensor)>);

impl TensorTree for Fields {
    fn flatten_into(&self, prefix: &str, buffer: bool, out: &mut Vec<Leaf>) {
        let kind = if buffer { LeafKind::Buffer } else { LeafKind::Parameter };
        out.extend(self.0.iter().map(|(name, t)| Leaf { path: join(prefix, name), kind, tensor: t.clone() }));
    }

    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let fields = self.0.iter().map(|(name, _)| Ok((name.clone(), next_leaf(leaves)?))).collect::<Result<_>>()?;
        Ok(Fields(fields))
    }
}

/// A program's compiled function with some tensor parameters taken as the
/// fields of one struct parameter.
pub struct StructArgs {
    /// The compiled function whose graph names those inputs `m.NAME`.
    pub f: CompiledFn,
    /// The program's parameters that are fields, in order.
    fields: Vec<usize>,
    /// The program's parameter names.
    names: Vec<String>,
}

/// The name of the struct parameter.
const STRUCT: &str = "m";

impl StructArgs {
    /// Draws which tensor parameters of `graph` become fields (each with
    /// even chance, at least one): only parameters that every template
    /// passes a tensor qualify. `None` when none does, or when the graph
    /// with renamed inputs is refused.
    pub fn draw(c: &mut Choices, graph: &Graph, tpls: &[ArgTemplate]) -> Option<StructArgs> {
        let eligible: Vec<usize> = (0..graph.params.len())
            .filter(|&j| graph.params[j].ty.is_tensor() && tpls.iter().all(|t| !matches!(t.args.get(j), Some(ArgSpec::Scalar(_)) | None)))
            .collect();
        if eligible.is_empty() {
            return None;
        }
        let mut fields: Vec<usize> = eligible.iter().copied().filter(|_| c.chance(1, 2)).collect();
        if fields.is_empty() {
            fields.push(*c.pick(&eligible));
        }
        let names: Vec<String> = graph.params.iter().map(|p| p.name.clone()).collect();
        let mut g = graph.clone();
        for &j in &fields {
            g.params[j].name = format!("{STRUCT}.{}", names[j]);
        }
        // The Rust parameters: the struct where its first field was, the
        // other parameters as they were.
        let mut params: Vec<(&str, bool)> = Vec::new();
        for (j, name) in names.iter().enumerate() {
            if j == fields[0] {
                params.push((STRUCT, true));
            } else if !fields.contains(&j) {
                params.push((name, false));
            }
        }
        let f = CompiledFn::with_struct_params(g, &params).ok()?;
        Some(StructArgs { f, fields, names })
    }

    /// The struct holding the field arguments of a call.
    pub fn fields(&self, m: &Materialised) -> Fields {
        Fields(self.fields.iter().filter_map(|&j| Some((self.names[j].clone(), m.tensors.get(j)?.clone()?))).collect())
    }

    /// The struct function's arguments for the flat arguments `args`.
    pub fn args<'a>(&self, args: &[Arg<'a>], fields: &'a Fields) -> Vec<Arg<'a>> {
        let mut out = Vec::with_capacity(args.len());
        for (j, a) in args.iter().enumerate() {
            if j == self.fields[0] {
                out.push(Arg::tree(fields));
            } else if !self.fields.contains(&j) {
                out.push(*a);
            }
        }
        out
    }

    /// Which parameters are fields, for the failure report.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.fields.iter().map(|&j| format!("{STRUCT}.{}", self.names[j])).collect();
        format!("struct parameter `{STRUCT}` with fields {}", names.join(", "))
    }
}
