//! Shape propagation over the source graph at call time, for the sizes the
//! body reads of tensors it computes (`logits.size(-1)`, or a parameter's
//! size after an in-place `t_()`): [`aot_ir::Graph::value_sizes`].
//!
//! A compiled function is not specialised on shapes, so such a size is
//! known only once the call's arguments are: from their shapes, the rules
//! below give every node's result shape, node by node, up to the last read,
//! without computing any value. The rules use the eager ops' own shape
//! checks (`Layout`'s view methods, `broadcast_shapes`, `wrap_dim`), so a
//! shape that the run would refuse is refused here with the same error,
//! before anything runs. A read `at` node `k` sees the shapes after the
//! first `k` nodes, so a later in-place metadata change does not move it.

use crate::arg::Arg;
use crate::error::{AotError, Result};
use crate::layout::{broadcast_shapes, wrap_dim, Layout};
use aot_ir::{Arg as IrArg, Graph, Node, Op, OpClass, OpKind, ScalarValue, ValueDef, ValueId};

/// Fills the call's scalar values of the computed sizes (the slots after
/// the parameters and their sizes, in [`Graph::value_sizes`] order); the
/// reads after the first `limit` nodes are left unknown.
pub(crate) fn fill_value_sizes(g: &Graph, args: &[Arg], scalars: &mut Vec<Option<ScalarValue>>, limit: usize) -> Result<()> {
    let base = scalars.len();
    scalars.resize(base + g.value_sizes.len(), None);
    let mut p = Prop { shapes: vec![None; g.values.len()] };
    for (v, info) in g.values.iter().enumerate() {
        if let ValueDef::Param(k) = info.def {
            p.shapes[v] = args.get(k).and_then(Arg::tensor).map(|t| t.shape().to_vec());
        }
    }
    let mut order: Vec<usize> = (0..g.value_sizes.len()).collect();
    order.sort_by_key(|&k| g.value_sizes[k].at);
    let mut next = 0;
    for &k in &order {
        let read = g.value_sizes[k];
        if read.at > limit {
            break;
        }
        while next < read.at.min(g.nodes.len()) {
            p.step(&g.nodes[next], scalars)?;
            next += 1;
        }
        let shape = p.shape(read.value, "size")?;
        let rank = shape.len() as i64;
        let d = if read.dim < 0 { read.dim + rank } else { read.dim };
        let n = usize::try_from(d).ok().and_then(|d| shape.get(d)).ok_or_else(|| {
            AotError::shape("size", format!("the body reads dim {} of a tensor of {rank} dims (shape {shape:?})", read.dim))
        })?;
        scalars[base + k] = Some(ScalarValue::I64(*n as i64));
    }
    Ok(())
}

struct Prop {
    /// Per value: its shape, once its node has been stepped over.
    shapes: Vec<Option<Vec<usize>>>,
}

impl Prop {
    fn shape(&self, v: ValueId, op: &'static str) -> Result<Vec<usize>> {
        self.shapes
            .get(v.index())
            .cloned()
            .flatten()
            .ok_or_else(|| AotError::unsupported(op, format!("the shape of value {} is not known before it is computed", v.index())))
    }

    /// Records the shape of `node`'s result (or its target's new shape).
    fn step(&mut self, node: &Node, scalars: &[Option<ScalarValue>]) -> Result<()> {
        let Op::Dsl { op, .. } = &node.op else {
            return Err(AotError::unsupported("size", "the shapes of this graph cannot be propagated"));
        };
        let cx = NodeArgs { node, scalars, op: op.name(), prop: self };
        let shape = out_shape(*op, &cx)?;
        if let Some(v) = node.out.or_else(|| node.target()) {
            self.shapes[v.index()] = Some(shape);
        }
        Ok(())
    }
}

/// One node's arguments, read with the call's scalar values.
struct NodeArgs<'a> {
    node: &'a Node,
    scalars: &'a [Option<ScalarValue>],
    op: &'static str,
    prop: &'a Prop,
}

impl NodeArgs<'_> {
    fn tensor(&self, i: usize) -> Result<Vec<usize>> {
        match self.node.args.get(i) {
            Some(IrArg::Tensor(v)) => self.prop.shape(*v, self.op),
            _ => Err(AotError::unsupported(self.op, format!("argument {i} is not a tensor"))),
        }
    }

    /// The shape of a tensor operand; `None` for a number.
    fn operand(&self, i: usize) -> Result<Option<Vec<usize>>> {
        match self.node.args.get(i) {
            Some(IrArg::Tensor(v)) => self.prop.shape(*v, self.op).map(Some),
            _ => Ok(None),
        }
    }

    fn value(&self, i: usize) -> Result<ScalarValue> {
        match self.node.args.get(i) {
            Some(IrArg::Scalar(e)) => e.eval(self.scalars).map_err(|e| AotError::unsupported(self.op, e.to_string())),
            _ => Err(AotError::unsupported(self.op, format!("argument {i} is not a number"))),
        }
    }

    fn float(&self, i: usize) -> Result<f64> {
        match self.value(i)? {
            ScalarValue::F64(v) => Ok(v),
            ScalarValue::I64(v) => Ok(v as f64),
            ScalarValue::Bool(_) => Err(AotError::unsupported(self.op, format!("argument {i} is not a number"))),
        }
    }

    fn int(&self, i: usize) -> Result<i64> {
        match self.value(i)? {
            ScalarValue::I64(v) => Ok(v),
            _ => Err(AotError::unsupported(self.op, format!("argument {i} is not an integer"))),
        }
    }

    fn flag(&self, i: usize) -> Result<bool> {
        match self.value(i)? {
            ScalarValue::Bool(v) => Ok(v),
            _ => Err(AotError::unsupported(self.op, format!("argument {i} is not a bool"))),
        }
    }

    fn ints(&self, i: usize) -> Result<Vec<i64>> {
        match self.node.args.get(i) {
            Some(IrArg::Ints(items)) => items
                .iter()
                .map(|e| match e.eval(self.scalars) {
                    Ok(ScalarValue::I64(v)) => Ok(v),
                    Ok(_) => Err(AotError::unsupported(self.op, "expected integers")),
                    Err(e) => Err(AotError::unsupported(self.op, e.to_string())),
                })
                .collect(),
            _ => Err(AotError::unsupported(self.op, format!("argument {i} is not an integer list"))),
        }
    }

    fn layout(&self) -> Result<Layout> {
        Ok(Layout::contiguous(&self.tensor(0)?))
    }
}

/// The result shape of `op` (for an in-place op, its target's shape after
/// it): by class, then per computing op.
fn out_shape(op: OpKind, a: &NodeArgs) -> Result<Vec<usize>> {
    match op.class() {
        // A write keeps its target's shape; views and metadata changes
        // follow `Layout`'s own rules.
        OpClass::DataMutation => a.tensor(0),
        OpClass::View | OpClass::MetadataMutation => view_shape(op, a),
        OpClass::Compute => compute_shape(op, a),
    }
}

/// The result shape of a computing op.
fn compute_shape(op: OpKind, a: &NodeArgs) -> Result<Vec<usize>> {
    use OpKind as K;
    let name = a.op;
    Ok(match op {
        K::Add
        | K::Sub
        | K::Mul
        | K::Div
        | K::Pow
        | K::Maximum
        | K::Minimum
        | K::Eq
        | K::Ne
        | K::Lt
        | K::Le
        | K::Gt
        | K::Ge
        | K::Where
        | K::MaskedFill => broadcast(a)?,
        K::Neg
        | K::Exp
        | K::Log
        | K::Sqrt
        | K::Rsqrt
        | K::Abs
        | K::Sin
        | K::Cos
        | K::Tanh
        | K::Sigmoid
        | K::Relu
        | K::Gelu
        | K::Silu
        | K::Reciprocal
        | K::Square
        | K::Log1p
        | K::Expm1
        | K::ClampOut
        | K::Copy
        | K::Contiguous
        | K::ToDtype
        | K::ZerosLike
        | K::OnesLike
        | K::FullLike
        | K::RandLike
        | K::Dropout
        | K::Detach
        | K::ScatterAdd
        | K::IndexCopy
        | K::IndexAdd => a.tensor(0)?,
        K::Tril | K::Triu => {
            let x = a.tensor(0)?;
            if x.len() < 2 {
                return Err(AotError::shape(name, "input tensor must have at least 2 dimensions"));
            }
            x
        }
        K::Softmax | K::LogSoftmax | K::Cumsum => {
            let x = a.tensor(0)?;
            wrap_dim(name, a.int(1)?, x.len())?;
            x
        }
        K::Sum | K::Mean | K::CrossEntropy | K::NllLoss => Vec::new(),
        K::SumDim | K::MeanDim | K::AmaxDim => reduced(name, &a.tensor(0)?, &a.ints(1)?, a.flag(2)?)?,
        K::VarDim => reduced(name, &a.tensor(0)?, &a.ints(1)?, a.flag(3)?)?,
        K::Argmax | K::Argmin | K::MaxDim | K::MinDim => reduced(name, &a.tensor(0)?, &[a.int(1)?], a.flag(2)?)?,
        K::Matmul | K::Mm | K::Bmm => matmul(op, name, &a.tensor(0)?, &a.tensor(1)?)?,
        K::IndexSelect | K::Gather | K::Embedding => index_shape(op, a)?,
        K::Cat | K::Stack => join(op, a)?,
        K::Arange => vec![arange_len(a)?],
        _ => return Err(AotError::unsupported(name, "no shape rule")),
    })
}

/// `arange(start, end, step, dtype)`'s length, by eager's own rule.
fn arange_len(a: &NodeArgs) -> Result<usize> {
    let dtype = match a.node.args.get(4) {
        Some(IrArg::DType(d)) => *d,
        _ => return Err(AotError::unsupported(a.op, "no dtype")),
    };
    crate::tensor::arange_len(a.float(1)?, a.float(2)?, a.float(3)?, dtype)
}

/// `index_select` (the dim becomes the index's length), `gather` (the
/// index's shape) and `embedding` (the ids' shape and a row).
fn index_shape(op: OpKind, a: &NodeArgs) -> Result<Vec<usize>> {
    let name = a.op;
    Ok(match op {
        OpKind::IndexSelect => {
            let mut x = a.tensor(0)?;
            let d = wrap_dim(name, a.int(1)?, x.len())?;
            let n = a.tensor(2)?.iter().product();
            if let Some(s) = x.get_mut(d) {
                *s = n;
            }
            x
        }
        OpKind::Gather => a.tensor(2)?,
        _ => {
            let (mut ids, w) = (a.tensor(0)?, a.tensor(1)?);
            if w.len() != 2 {
                return Err(AotError::shape(name, format!("'weight' must be 2-D, but got a tensor of rank {}", w.len())));
            }
            ids.push(w[1]);
            ids
        }
    })
}

/// The broadcast shape of a node's tensor arguments (its numbers
/// broadcast to anything): the binary ops, `where_`, `masked_fill`.
fn broadcast(a: &NodeArgs) -> Result<Vec<usize>> {
    let mut out = a.tensor(0)?;
    for i in 1..a.node.args.len() {
        if let Some(y) = a.operand(i)? {
            out = broadcast_shapes(a.op, &out, &y)?.into_vec();
        }
    }
    Ok(out)
}

/// The shape of a view, or of the target of an in-place metadata change,
/// from `Layout`'s own view rules on a dense layout of the receiver.
fn view_shape(op: OpKind, a: &NodeArgs) -> Result<Vec<usize>> {
    use OpKind as K;
    let name = a.op;
    Ok(match op {
        K::View | K::Reshape => {
            let x = a.tensor(0)?;
            Layout::infer_shape(name, &a.ints(1)?, x.iter().product())?.into_vec()
        }
        K::Flatten => flatten(name, &a.tensor(0)?, a.int(1)?, a.int(2)?)?,
        K::ViewAs => a.tensor(1)?,
        K::T | K::TInplace => a.layout()?.t(name)?.shape.into_vec(),
        K::Transpose | K::TransposeInplace => a.layout()?.transpose(name, a.int(1)?, a.int(2)?)?.shape.into_vec(),
        K::Permute => a.layout()?.permute(name, &a.ints(1)?)?.shape.into_vec(),
        K::Unsqueeze | K::UnsqueezeInplace => a.layout()?.unsqueeze(name, a.int(1)?)?.shape.into_vec(),
        K::Squeeze | K::SqueezeInplace => a.layout()?.squeeze(name, a.int(1)?)?.shape.into_vec(),
        K::Expand => a.layout()?.expand(name, &a.ints(1)?)?.shape.into_vec(),
        K::Select => a.layout()?.select(name, a.int(1)?, a.int(2)?)?.shape.into_vec(),
        K::Slice => a.layout()?.slice(name, a.int(1)?, a.int(2)?, a.int(3)?, a.int(4)?)?.shape.into_vec(),
        K::Narrow => a.layout()?.narrow(name, a.int(1)?, a.int(2)?, a.int(3)?)?.shape.into_vec(),
        K::Diagonal => a.layout()?.diagonal(name, 0, 0, 1)?.shape.into_vec(),
        K::AsStrided | K::AsStridedInplace => {
            let size = a.ints(1)?;
            size.iter()
                .map(|&s| usize::try_from(s).map_err(|_| AotError::shape(name, format!("negative size {s} in {size:?}"))))
                .collect::<Result<_>>()?
        }
        _ => return Err(AotError::unsupported(name, "not a view")),
    })
}

/// The shape left by reducing `dims` (all of them when empty).
fn reduced(name: &'static str, x: &[usize], dims: &[i64], keepdim: bool) -> Result<Vec<usize>> {
    let ds: Vec<usize> = dims.iter().map(|&d| wrap_dim(name, d, x.len())).collect::<Result<_>>()?;
    let all = ds.is_empty();
    Ok(x.iter()
        .enumerate()
        .filter_map(|(i, &n)| match (all || ds.contains(&i), keepdim) {
            (false, _) => Some(n),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect())
}

/// `flatten(start, end)`: the dims in between folded into one.
fn flatten(name: &'static str, x: &[usize], start: i64, end: i64) -> Result<Vec<usize>> {
    let (s, e) = (wrap_dim(name, start, x.len())?, wrap_dim(name, end, x.len())?);
    if s > e {
        return Err(AotError::unsupported(name, format!("start_dim ({start}) cannot come after end_dim ({end})")));
    }
    let mut out = x[..s.min(x.len())].to_vec();
    out.push(x[s.min(x.len())..(e + 1).min(x.len())].iter().product());
    out.extend_from_slice(x.get(e + 1..).unwrap_or(&[]));
    Ok(out)
}

/// `matmul`'s rank rules (1-D operands gain and then lose a dim; batch
/// dims broadcast); `mm` and `bmm` take exact ranks.
fn matmul(op: OpKind, name: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let exact = match op {
        OpKind::Mm => Some(2),
        OpKind::Bmm => Some(3),
        _ => None,
    };
    if let Some(r) = exact {
        if a.len() != r || b.len() != r {
            return Err(AotError::shape(name, format!("expected {r}-D operands, got shapes {a:?} and {b:?}")));
        }
    }
    if a.is_empty() || b.is_empty() {
        return Err(AotError::shape(name, "both arguments to matmul need to be at least 1D"));
    }
    let am: Vec<usize> = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let bm: Vec<usize> = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, k) = (am[am.len() - 2], am[am.len() - 1]);
    let (k2, n) = (bm[bm.len() - 2], bm[bm.len() - 1]);
    if k != k2 {
        return Err(AotError::shape(name, format!("mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})")));
    }
    if exact == Some(3) && a[0] != b[0] {
        return Err(AotError::shape(name, format!("batch sizes differ: {} and {}", a[0], b[0])));
    }
    let mut out = broadcast_shapes(name, &am[..am.len() - 2], &bm[..bm.len() - 2])?.into_vec();
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

/// `cat` (sizes added along the dim; 1-D empty tensors skipped, PyTorch's
/// legacy rule) and `stack` (a new dim of the list's length).
fn join(op: OpKind, a: &NodeArgs) -> Result<Vec<usize>> {
    let name = a.op;
    let n = op.sig().list_len(a.node.args.len());
    let shapes: Vec<Vec<usize>> = (0..n).map(|i| a.tensor(i)).collect::<Result<_>>()?;
    let dim = a.int(n)?;
    let stacking = op == OpKind::Stack;
    let kept: Vec<&Vec<usize>> = shapes.iter().filter(|s| stacking || s.as_slice() != [0]).collect();
    let Some(first) = kept.first().copied().or(shapes.first()) else {
        return Err(AotError::shape(name, "expected a non-empty list of tensors"));
    };
    let rank = first.len() + usize::from(stacking);
    if rank == 0 {
        return Err(AotError::shape(name, "zero-dimensional tensor (at position 0) cannot be concatenated"));
    }
    let d = wrap_dim(name, dim, rank)?;
    if stacking {
        let mut out = first.to_vec();
        out.insert(d, shapes.len());
        return Ok(out);
    }
    let mut out = first.to_vec();
    out[d] = kept.iter().map(|s| s.get(d).copied().unwrap_or(0)).sum();
    Ok(out)
}
