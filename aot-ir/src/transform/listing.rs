//! The listings of the pass results (functional, joint, the partitions):
//! each container's head and tail around the one node printer of `print`
//! ([`write_nodes`]).

use super::joint::{JointGraph, OutputKind};
use super::partition::Partition;
use super::{FOutput, FunctionalGraph};
use crate::print::{list, write_nodes, Names};
use std::fmt::{self, Write};

impl FunctionalGraph {
    /// The stable listing.
    pub fn listing(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "functional {} {{", self.name);
        let _ = write_nodes(&mut s, &Names::params(&self.params), &self.nodes);
        for (g, v) in &self.mutated_groups {
            let _ = writeln!(s, "    copy_back(group {g}, {v})");
        }
        for (p, v) in &self.metadata_mutations {
            let _ = writeln!(s, "    as_strided_({}, {v})", Names::params(&self.params).param_name(*p));
        }
        let outs: Vec<String> = self.outputs.iter().map(|o| o.to_string()).collect();
        let _ = writeln!(s, "    return ({})", outs.join(", "));
        s.push('}');
        s
    }
}

impl fmt::Display for FOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FOutput::Input(p) => write!(f, "input {p}"),
            FOutput::AliasOfInput { group, value } => write!(f, "alias(group {group}, {value})"),
            FOutput::Value(v) => write!(f, "{v}"),
            FOutput::ViewOfIntermediate { base, value } => write!(f, "view({base}, {value})"),
        }
    }
}

impl JointGraph {
    /// What the joint's listings name things by.
    pub fn names(&self) -> Names<'_> {
        Names { params: &self.params, values: &[], backward: &self.is_backward }
    }

    /// The stable listing.
    pub fn listing(&self) -> String {
        let names = self.names();
        let mut s = String::new();
        let _ = writeln!(s, "joint {} {{", self.name);
        let _ = write_nodes(&mut s, &names, &self.nodes);
        let outs: Vec<String> = self
            .fw_outputs
            .iter()
            .map(|o| {
                let kind = match o.kind {
                    OutputKind::MutatedInput(g) => format!("mutated(group {g})"),
                    OutputKind::MetadataMutation(p) => format!("metadata({})", names.param_name(p)),
                    OutputKind::User(i) => format!("out {i}"),
                    OutputKind::IntermediateBase => "base".into(),
                };
                match o.tangent {
                    Some(t) => format!("{kind}: {} ~ tangent {t}", o.value),
                    None => format!("{kind}: {}", o.value),
                }
            })
            .collect();
        let _ = writeln!(s, "    forward ({})", outs.join(", "));
        let grads: Vec<String> = self
            .input_grads
            .iter()
            .enumerate()
            .filter(|(p, _)| self.params[*p].ty.is_tensor())
            .map(|(p, g)| format!("{}: {}", names.param_name(p), g.map_or("None".to_string(), |v| v.to_string())))
            .collect();
        let _ = writeln!(s, "    grads ({})", grads.join(", "));
        s.push('}');
        s
    }
}

impl fmt::Display for JointGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.listing())
    }
}

impl Partition {
    /// The stable listing of both graphs (`jg`, the joint graph they were
    /// split from, names the scalars and marks the backward's values).
    pub fn listing(&self, jg: &JointGraph) -> String {
        let names = jg.names();
        let mut s = String::new();
        for (title, sg) in [("forward", &self.forward), ("backward", &self.backward)] {
            let _ = writeln!(s, "{title} {}({}) {{", jg.name, list(&sg.inputs));
            let _ = write_nodes(&mut s, &names, &sg.nodes);
            let _ = writeln!(s, "    return ({})\n}}", list(&sg.outputs));
        }
        let _ = write!(s, "saved ({})", list(&self.saved));
        s
    }
}
