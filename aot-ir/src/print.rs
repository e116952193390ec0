//! The listing: a stable, jaxpr-like text form of every stage.
//!
//! It is the snapshot format of the tests and what `graph()`'s `Display`
//! shows, so it must be deterministic and readable. One printer
//! ([`write_nodes`]) prints the node list of every stage: one node per line,
//! `no_grad` regions as indented blocks, scalar parameters by name, the
//! `let` name of a value (source only) or a checked aliasing assumption as
//! a trailing comment, and `*` after a value that needs a tangent (joint
//! and backward). Each container adds its own head and tail: here the
//! source signature and `return` and a kernel's loads and stores; in
//! `transform::listing` (which builds on this module) the functional
//! graph's copy-backs, the joint's forward outputs and gradients, the
//! partitions' inputs and outputs.
//!
//! ```text
//! fn f(%0 a: &mut Tensor, %1 b: &Tensor, lr: f64) -> (Tensor, Tensor) {
//!     mul_(%0, 2.0)
//!     %2 = mul(%1, lr)
//!     %3 = add(%0, %2)  // c
//!     %4 = view(%0, [-1])
//!     return (%3, %4)
//! }
//! ```

use crate::graph::{ChainStep, Graph, Kernel, Node, Op, Param, ReturnKind, ValueInfo};
use crate::types::{Arg, ScalarExpr, ScalarTy, ValueId};
use std::fmt::{self, Write};

/// What a listing names things by.
#[derive(Clone, Copy)]
pub struct Names<'a> {
    /// The source's parameters: scalars and `arg_geometry` by name.
    pub params: &'a [Param],
    /// The `let` names of values (the source's; other stages number their
    /// own values).
    pub values: &'a [ValueInfo],
    /// Per value: depends on a tangent (marked `*`).
    pub backward: &'a [bool],
}

impl<'a> Names<'a> {
    /// Scalars named after `params`, no value names, no marks.
    pub fn params(params: &'a [Param]) -> Names<'a> {
        Names { params, values: &[], backward: &[] }
    }

    /// The name of parameter `p` (`?` when out of range).
    pub(crate) fn param_name(&self, p: usize) -> &str {
        self.params.get(p).map_or("?", |x| x.name.as_str())
    }

    /// One node as it appears in the listing, without indentation.
    pub fn node_line(&self, node: &Node) -> String {
        let mut line = String::new();
        if let Some(out) = node.out {
            let mark = if self.backward.get(out.index()).copied().unwrap_or(false) { "*" } else { "" };
            let _ = write!(line, "{out}{mark} = ");
        }
        let args: Vec<String> = node.args.iter().map(|a| self.arg_text(a)).collect();
        let _ = match &node.op {
            Op::Dsl { op, .. } if op.sig().is_factory() => match args.split_first() {
                Some((device, rest)) => write!(line, "{}({}, device = {device})", op.name(), rest.join(", ")),
                None => write!(line, "{}()", op.name()),
            },
            Op::Dsl { op, .. } => write!(line, "{}({})", op.name(), args.join(", ")),
            Op::Primal(g) => write!(line, "primal(group {g})"),
            Op::Tangent(t) => write!(line, "tangent({t})"),
            Op::Cow => write!(line, "{}({})", node.op.name(), args.join(", ")),
            Op::Regen(c) => write!(line, "regen({}, {})", args.join(", "), self.chain_text(c)),
            Op::Mutate { op, chain } => {
                let (root, rest) = args.split_first().map_or(("?", &[][..]), |(r, rest)| (r.as_str(), rest));
                write!(line, "scatter({root}, {}, {}({}))", self.chain_text(chain), op.name(), rest.join(", "))
            }
            Op::Prim(p) => match p.chain() {
                Some(c) => write!(line, "{}({}, {})", p.name(), args.join(", "), self.chain_text(c)),
                None => write!(line, "{p}({})", args.join(", ")),
            },
            Op::Load(i) => write!(line, "load(in{i})"),
            Op::Kernel(k) => write!(line, "{}({})", k.name, args.join(", ")),
            Op::Call(site) if site.body.is_some() => {
                let results: Vec<String> = site.results.iter().flatten().map(ValueId::to_string).collect();
                let (var, ops) = site.body.as_ref().map_or(("_", 0), |b| (b.var.as_str(), b.graph.nodes.len()));
                let (bounds, rest) = args.split_at(args.len().min(2));
                let range = bounds.join("..");
                // The body is unrolled per call: `graph_for` lists a call's.
                write!(line, "({}) = for {var} in {range} over ({}) {{ {ops} ops }}", results.join(", "), rest.join(", "))
            }
            Op::Call(site) => {
                let results: Vec<String> = site.results.iter().flatten().map(ValueId::to_string).collect();
                let mut all = args.clone();
                all.extend(site.trees.iter().map(|t| t.path.clone()));
                write!(line, "({}) = call {}({})", results.join(", "), site.callee, all.join(", "))
            }
        };
        match (&node.op, node.out.and_then(|v| self.values.get(v.index())).and_then(|i| i.name.as_ref())) {
            (Op::Dsl { check_alias: Some(true), .. }, _) => line.push_str("  // checked: aliases"),
            (Op::Dsl { check_alias: Some(false), .. }, _) => line.push_str("  // checked: copies"),
            (_, Some(name)) => {
                let _ = write!(line, "  // {name}");
            }
            _ => {}
        }
        line
    }

    /// A view chain: `[select(0, 1), arg_geometry(x)]`.
    pub fn chain_text(&self, chain: &[ChainStep]) -> String {
        let steps: Vec<String> = chain
            .iter()
            .map(|st| match st {
                ChainStep::ArgGeometry(p) => format!("arg_geometry({})", self.param_name(*p)),
                ChainStep::View { op, args } => {
                    let a: Vec<String> = args.iter().map(|a| self.arg_text(a)).collect();
                    format!("{}({})", op.name(), a.join(", "))
                }
            })
            .collect();
        format!("[{}]", steps.join(", "))
    }

    /// An argument as it appears in the listing.
    pub fn arg_text(&self, arg: &Arg) -> String {
        match arg {
            Arg::Tensor(v) => v.to_string(),
            Arg::Scalar(s) => self.scalar_text(s),
            Arg::Ints(v) => {
                let items: Vec<String> = v.iter().map(|s| self.scalar_text(s)).collect();
                format!("[{}]", items.join(", "))
            }
            Arg::DType(d) => format!("DType::{}", d.variant_name()),
        }
    }

    /// A scalar expression with parameters shown by name.
    pub fn scalar_text(&self, s: &ScalarExpr) -> String {
        match s {
            ScalarExpr::F64(v) => format!("{v:?}"),
            ScalarExpr::I64(v) => v.to_string(),
            ScalarExpr::Bool(v) => v.to_string(),
            ScalarExpr::Param(i) => self.params.get(*i).map_or_else(|| format!("${i}"), |p| p.name.clone()),
            ScalarExpr::Neg(e) => format!("-{}", self.scalar_text(e)),
            ScalarExpr::Bin(op, a, b) => {
                format!("({} {} {})", self.scalar_text(a), op.symbol(), self.scalar_text(b))
            }
            ScalarExpr::Cast(t, e) => {
                let ty = match t {
                    ScalarTy::Float => "f64",
                    ScalarTy::Int => "i64",
                    ScalarTy::Bool => "bool",
                };
                format!("({} as {ty})", self.scalar_text(e))
            }
            ScalarExpr::Fn(f, args) => {
                let rest: Vec<String> = args.iter().skip(1).map(|a| self.scalar_text(a)).collect();
                let recv = args.first().map_or_else(String::new, |a| self.scalar_text(a));
                format!("{recv}.{}({})", f.name(), rest.join(", "))
            }
            ScalarExpr::Size { param, dim, .. } => {
                let name = self.params.get(*param).map_or_else(|| format!("${param}"), |p| p.name.clone());
                format!("{name}.size({dim})")
            }
            ScalarExpr::ValueSize { read, .. } => format!("size#{read}"),
        }
    }
}

/// The one node-list printer of every stage: one node per line at an
/// indent of four, `no_grad` regions as indented blocks.
pub fn write_nodes(f: &mut impl Write, names: &Names, nodes: &[Node]) -> fmt::Result {
    let mut in_no_grad = false;
    for node in nodes {
        if node.no_grad != in_no_grad {
            f.write_str(if in_no_grad { "    }\n" } else { "    no_grad {\n" })?;
            in_no_grad = node.no_grad;
        }
        let indent = if in_no_grad { "        " } else { "    " };
        writeln!(f, "{indent}{}", names.node_line(node))?;
    }
    if in_no_grad {
        f.write_str("    }\n")?;
    }
    Ok(())
}

/// Values as a comma-separated list.
pub(crate) fn list(v: &[ValueId]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fn {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match p.value {
                Some(v) => write!(f, "{v} {}: {}", p.name, p.ty.rust_name())?,
                None => write!(f, "{}: {}", p.name, p.ty.rust_name())?,
            }
        }
        f.write_str(")")?;
        match self.ret {
            ReturnKind::Unit => {}
            ReturnKind::Single => f.write_str(" -> Tensor")?,
            ReturnKind::Tuple(n) => write!(f, " -> ({})", vec!["Tensor"; n].join(", "))?,
        }
        f.write_str(" {\n")?;
        write_nodes(f, &self.names(), &self.nodes)?;
        match self.ret {
            ReturnKind::Unit => f.write_str("    return ()\n")?,
            ReturnKind::Single if self.outputs.len() == 1 => writeln!(f, "    return {}", self.outputs[0])?,
            _ => writeln!(f, "    return ({})", list(&self.outputs))?,
        }
        f.write_str("}")
    }
}

impl Graph {
    /// What the source listing names things by.
    pub fn names(&self) -> Names<'_> {
        Names { params: &self.params, values: &self.values, backward: &[] }
    }

    /// One node as it appears in the listing, without indentation.
    pub fn node_line(&self, node: &Node) -> String {
        self.names().node_line(node)
    }

    /// An argument as it appears in the listing.
    pub fn arg_text(&self, arg: &Arg) -> String {
        self.names().arg_text(arg)
    }
}

impl Kernel {
    /// The kernel's listing (its source on the CPU, where the backend
    /// evaluates the body itself). `names` names the scalar parameters.
    pub fn listing(&self, names: Names<'_>) -> String {
        let loads: Vec<String> = (0..self.num_inputs()).map(|i| format!("in{i}")).collect();
        let mut s = format!("kernel {}({}) {{\n", self.name, loads.join(", "));
        for n in &self.body {
            let _ = writeln!(s, "    {}", names.node_line(n));
        }
        let outs: Vec<String> = self.outs().map(|v| v.to_string()).collect();
        let _ = writeln!(s, "    store {}\n}}", outs.join(", "));
        s
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::args::*;
    use crate::graph::{GraphBuilder, ReturnKind};
    use crate::op::OpKind;
    use crate::types::{ParamType, ScalarBinOp, ScalarExpr};

    #[test]
    fn contract_example_listing() {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", true);
        let x = b.tensor("b", false);
        let lr = b.scalar("lr", ParamType::F64);
        b.call(OpKind::MulInplace, a, vec![f(2.0)]);
        let bl = b.call(OpKind::Mul, x, vec![crate::Arg::Scalar(lr)]);
        let c = b.call(OpKind::Add, a, vec![t(bl)]);
        b.name_value(c, "c");
        let v = b.call(OpKind::View, a, vec![ints(&[-1])]);
        let g = b.finish(vec![c, v], ReturnKind::Tuple(2));
        insta::assert_snapshot!(g.to_string(), @r"
        fn f(%0 a: &mut Tensor, %1 b: &Tensor, lr: f64) -> (Tensor, Tensor) {
            mul_(%0, 2.0)
            %2 = mul(%1, lr)
            %3 = add(%0, %2)  // c
            %4 = view(%0, [-1])
            return (%3, %4)
        }
        ");
    }

    #[test]
    fn no_grad_regions_and_scalar_exprs() {
        let mut b = GraphBuilder::new("sgd");
        let w = b.tensor("w", true);
        let g = b.tensor("g", false);
        let lr = b.scalar("lr", ParamType::F64);
        let prev = b.set_no_grad(true);
        let scaled = ScalarExpr::Bin(ScalarBinOp::Mul, Box::new(lr), Box::new(ScalarExpr::F64(0.5)));
        let step = b.call(OpKind::Mul, g, vec![crate::Arg::Scalar(scaled)]);
        b.call(OpKind::SubInplace, w, vec![t(step)]);
        b.set_no_grad(prev);
        let s = b.call(OpKind::SumDim, w, vec![ints(&[0, -1]), crate::graph::args::b(false)]);
        let graph = b.finish(vec![s], ReturnKind::Single);
        insta::assert_snapshot!(graph.to_string(), @r"
        fn sgd(%0 w: &mut Tensor, %1 g: &Tensor, lr: f64) -> Tensor {
            no_grad {
                %2 = mul(%1, (lr * 0.5))
                sub_(%0, %2)
            }
            %3 = sum_dim(%0, [0, -1], false)
            return %3
        }
        ");
    }

    #[test]
    fn every_stage_prints_through_the_one_printer() {
        use crate::transform::{functionalize, InputGroups};
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", true);
        let r = b.call(OpKind::Reshape, a, vec![ints(&[-1])]);
        let prev = b.set_no_grad(true);
        b.call(OpKind::AddInplace, r, vec![f(1.0)]);
        b.set_no_grad(prev);
        let g = b.finish(vec![r], ReturnKind::Single);
        let groups = InputGroups { group_of: vec![Some(0)], single: vec![true], object_of: vec![] };
        let fg = functionalize(&g, &groups);
        insta::assert_snapshot!(fg.listing(), @r"
        functional f {
            %0 = primal(group 0)
            %1 = reshape(%0, [-1])  // checked: aliases
            %2 = copy_storage(%0)
            %3 = regen(%2, [reshape([-1])])
            no_grad {
                %4 = scatter(%2, [reshape([-1])], add_(%3, 1.0))
            }
            %5 = regen(%4, [reshape([-1])])
            copy_back(group 0, %4)
            return (alias(group 0, %5))
        }
        ");
        // The joint graph and its partitions: the same nodes, the same lines.
        let jg = crate::transform::joint::create_joint(&fg, &g, &[true]).unwrap();
        let part = crate::transform::partition::partition(&jg).unwrap();
        insta::assert_snapshot!(format!("{}\n{}", jg.listing(), part.listing(&jg)), @r"
        joint f {
            %0 = primal(group 0)
            %1 = reshape(%0, [-1])  // checked: aliases
            %2 = copy_storage(%0)
            %3 = regen(%2, [reshape([-1])])
            no_grad {
                %4 = scatter(%2, [reshape([-1])], add_(%3, 1.0))
            }
            %5 = regen(%4, [reshape([-1])])
            %6* = tangent(0)
            forward (mutated(group 0): %4 ~ tangent 0, out 0: %5)
            grads (a: %6)
        }
        forward f(%0) {
            %1 = reshape(%0, [-1])  // checked: aliases
            %2 = copy_storage(%0)
            %3 = regen(%2, [reshape([-1])])
            no_grad {
                %4 = scatter(%2, [reshape([-1])], add_(%3, 1.0))
            }
            %5 = regen(%4, [reshape([-1])])
            return (%4, %5)
        }
        backward f(%6) {
            return (%6)
        }
        saved ()
        ");
    }
}
