//! The call boundary of a function with struct parameters (`m: &Mlp`):
//! PyTorch's `create_functional_call`, which lifts a module's parameters
//! and buffers into plain graph inputs.
//!
//! The graph sees one input per field path the body uses (`m.w1`, named by
//! its path); the Rust function takes the struct. At a call each struct
//! argument ([`Arg::Tree`]) is flattened through its
//! [`TensorTree`](crate::TensorTree) impl and the graph's inputs are picked
//! from its leaves by path, so everything downstream (guards, plans,
//! epilogue, explain) sees plain tensor arguments. The leaves are the
//! caller's own tensor handles: writes to a `&mut` struct's fields reach
//! the caller.
//!
//! Tensor subclasses (`crate::subclass`) are unwrapped here too: their
//! inner tensors are leaves like any other. A call whose body changes the
//! metadata of a subclass's inner tensor in place is refused here, before
//! anything runs. The leaves the body never reads are no graph inputs;
//! [`Boundary::unread`] lists them for the graph signature and `explain()`.

use crate::arg::Arg;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use crate::tree::LeafKind;
use aot_ir::{Graph, StaticMeta};

/// Where each graph input comes from.
#[derive(Clone, Debug)]
pub(crate) struct Boundary {
    /// The Rust parameters, in order: name and whether it is a struct.
    params: Vec<(String, bool)>,
    /// Per graph input: its Rust parameter and, for a struct field, the
    /// path inside the struct.
    sources: Vec<(usize, Option<String>)>,
    /// The graph inputs whose metadata the body may change in place (an
    /// inner tensor of a tensor subclass may not be one).
    meta_mutated: Vec<usize>,
}

/// A leaf of a struct argument that the body never reads: not a graph
/// input of ours, but listed by the graph signature (PyTorch's export
/// lifts every parameter and buffer).
#[derive(Clone, Debug)]
pub(crate) struct Unread {
    /// `arg.path`, as a graph input would be named.
    pub name: String,
    pub tensor: Tensor,
    pub kind: LeafKind,
    pub order: (usize, usize),
}

/// A graph input taken from a struct: the leaf's tensor, its kind and its
/// position among the struct's leaves (for declaration order).
#[derive(Clone, Debug)]
pub(crate) struct Picked {
    pub tensor: Tensor,
    pub kind: LeafKind,
    pub order: (usize, usize),
}

impl Boundary {
    /// The boundary of `graph` for the Rust parameters `params`: a graph
    /// input `m.w1` is field `w1` of struct parameter `m`; any other is the
    /// plain parameter of its name. `None` when the names do not match up
    /// (a bug of the macro, reported by the first call).
    pub(crate) fn new(graph: &Graph, meta: &StaticMeta, params: &[(&str, bool)]) -> Option<Boundary> {
        let sources = graph
            .params
            .iter()
            .map(|p| match p.name.split_once('.') {
                Some((root, path)) => params.iter().position(|&(n, tree)| tree && n == root).map(|i| (i, Some(path.to_string()))),
                None => params.iter().position(|&(n, tree)| !tree && n == p.name).map(|i| (i, None)),
            })
            .collect::<Option<Vec<_>>>()?;
        let meta_mutated =
            (0..sources.len()).filter(|&j| meta.inputs.get(j).is_some_and(|i| i.mutates_metadata) && sources[j].1.is_some()).collect();
        Some(Boundary { params: params.iter().map(|&(n, t)| (n.to_string(), t)).collect(), sources, meta_mutated })
    }

    /// Flattens the struct arguments: per graph input, the leaf it takes
    /// (`None` for a plain parameter, passed through).
    pub(crate) fn pick(&self, func: &str, args: &[Arg]) -> Result<Vec<Option<Picked>>> {
        let err = |msg: String| AotError::Signature { func: func.to_string(), msg };
        if args.len() != self.params.len() {
            return Err(err(format!("expected {} arguments, got {}", self.params.len(), args.len())));
        }
        let mut flat: Vec<Option<Vec<crate::tree::Leaf>>> = vec![None; args.len()];
        for (i, ((name, tree), a)) in self.params.iter().zip(args).enumerate() {
            match (tree, a) {
                (true, Arg::Tree(t)) => flat[i] = Some(t.flatten()),
                (true, other) => {
                    return Err(err(format!(
                        "argument `{name}` is a struct of tensors, but {} was passed (use `Arg::tree(&{name})`)",
                        other.kind()
                    )))
                }
                (false, Arg::Tree(_)) => return Err(err(format!("argument `{name}` is not a struct, but a struct of tensors was passed"))),
                (false, _) => {}
            }
        }
        for &j in &self.meta_mutated {
            if let ((i, Some(path)), Some(Arg::Tree(t))) = (&self.sources[j], args.get(self.sources[j].0)) {
                crate::subclass::refuse_metadata_mutation(func, &self.params[*i].0, path, *t)?;
            }
        }
        self.sources
            .iter()
            .map(|(i, path)| {
                let (Some(path), Some(leaves)) = (path, &flat[*i]) else { return Ok(None) };
                let Some(k) = leaves.iter().position(|l| &l.path == path) else {
                    let have: Vec<&str> = leaves.iter().map(|l| l.path.as_str()).collect();
                    let name = &self.params[*i].0;
                    return Err(err(format!("argument `{name}` has no tensor at `{name}.{path}` (its tensors: {})", have.join(", "))));
                };
                let l = &leaves[k];
                Ok(Some(Picked { tensor: l.tensor.clone(), kind: l.kind, order: (*i, k) }))
            })
            .collect()
    }

    /// The leaves of the struct arguments that are no graph input, in
    /// declaration order (the arguments were checked by [`pick`](Self::pick)).
    pub(crate) fn unread(&self, args: &[Arg]) -> Vec<Unread> {
        let mut out = Vec::new();
        for (i, ((name, _), a)) in self.params.iter().zip(args).enumerate() {
            let Arg::Tree(t) = a else { continue };
            for (k, l) in t.flatten().into_iter().enumerate() {
                let read = self.sources.iter().any(|(si, p)| *si == i && p.as_deref() == Some(l.path.as_str()));
                if !read {
                    out.push(Unread { name: crate::tree::join(name, &l.path), tensor: l.tensor, kind: l.kind, order: (i, k) });
                }
            }
        }
        out
    }

    /// The graph's arguments: picked leaves, and plain arguments passed
    /// through.
    pub(crate) fn flat<'a>(&self, args: &[Arg<'a>], picked: &'a [Option<Picked>]) -> Vec<Arg<'a>> {
        self.sources.iter().zip(picked).map(|((i, _), p)| p.as_ref().map_or(args[*i], |p| Arg::Tensor(&p.tensor))).collect()
    }
}
