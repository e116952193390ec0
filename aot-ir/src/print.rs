//! The listing: a stable, jaxpr-like text form of a graph.
//!
//! It is the snapshot format of the tests and what `graph()`'s `Display`
//! shows, so it must be deterministic and readable: one node per line,
//! `no_grad` regions as indented blocks, scalar parameters by name, and the
//! `let` name of a value as a trailing comment.
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

use crate::graph::{Graph, Node, ReturnKind};
use crate::types::{Arg, ScalarExpr};
use std::fmt::{self, Write};

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
        let mut in_no_grad = false;
        for node in &self.nodes {
            if node.no_grad != in_no_grad {
                if in_no_grad {
                    f.write_str("    }\n")?;
                } else {
                    f.write_str("    no_grad {\n")?;
                }
                in_no_grad = node.no_grad;
            }
            let indent = if in_no_grad { "        " } else { "    " };
            writeln!(f, "{indent}{}", self.node_line(node))?;
        }
        if in_no_grad {
            f.write_str("    }\n")?;
        }
        let outs: Vec<String> = self.outputs.iter().map(|v| v.to_string()).collect();
        match self.ret {
            ReturnKind::Unit => f.write_str("    return ()\n")?,
            ReturnKind::Single if outs.len() == 1 => writeln!(f, "    return {}", outs[0])?,
            _ => writeln!(f, "    return ({})", outs.join(", "))?,
        }
        f.write_str("}")
    }
}

impl Graph {
    /// One node as it appears in the listing, without indentation.
    pub fn node_line(&self, node: &Node) -> String {
        let mut line = String::new();
        if let Some(out) = node.out {
            let _ = write!(line, "{out} = ");
        }
        let args: Vec<String> = node.args.iter().map(|a| self.arg_text(a)).collect();
        let _ = write!(line, "{}({})", node.op.name(), args.join(", "));
        if let Some(name) = node.out.and_then(|v| self.values.get(v.index())).and_then(|i| i.name.as_ref()) {
            let _ = write!(line, "  // {name}");
        }
        line
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
            Arg::DType(d) => format!("DType::{}", d.name()),
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
                    crate::types::ScalarTy::Float => "f64",
                    crate::types::ScalarTy::Int => "i64",
                    crate::types::ScalarTy::Bool => "bool",
                };
                format!("({} as {ty})", self.scalar_text(e))
            }
        }
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
}
