//! The one interpreter: runs the nodes of every stage of the one IR with
//! the eager kernels, one node at a time.
//!
//! The stages differ in a few switches ([`Mode`]), in where their inputs
//! come from ([`Inputs`]), and in what a run records besides its values
//! ([`Track`]); the loop ([`run`]) and the work of each node ([`step`])
//! are shared:
//!
//! - **source** ([`run_source`]): parameters are bound to the very
//!   argument tensors (handle clones), so in-place ops write the caller's
//!   tensors, views alias for real, and an output that is a parameter is
//!   returned as that same tensor. This is the eager reference compiled
//!   calls are tested against; it runs no direct kernel, so autograd
//!   records every op.
//! - **functional** (`functional.rs`, the inference path): inputs are the
//!   input groups' bases; `Mutate` writes in place the root version it
//!   consumes (functionalize guarantees no later node reads it).
//! - **joint** (`joint.rs`: the joint graph and its forward and backward
//!   partitions, the training path): `Mutate` writes a copy of its root,
//!   because a backward may still read the version it replaced; an
//!   `as_strided` view reaching outside its receiver falls back; a backward
//!   with missing tangents tracks which values are zero.
//!
//! After each node, the values that die there (`liveness.rs`, computed
//! once per plan) are dropped, so a run holds only what is still to be
//! read. In the functional and joint stages an elementwise node may write
//! its result over the buffer of an operand that dies there and that
//! nothing else holds (`reuse.rs`); the source stage never does.
//!
//! Every node runs under its own `no_grad`. Each op runs through the one
//! dispatcher ([`crate::eval::dispatch`]), or a direct kernel (`direct_kernels.rs`) where
//! one computes the same and the mode allows it. A node whose assumption
//! failed (a `reshape`/`contiguous` that aliased otherwise than the plan
//! assumed) stops the run with [`Stop::Fallback`] before it is stored.

use super::liveness::Liveness;
use crate::arg::{scalar_values, Arg, Bases};
use crate::counters::PeakValues;
use crate::error::{AotError, Result};
use crate::eval::dispatch::{exec, exec_node, replay, ArgGeometrySource, Values};
use crate::eval::prims::{eval_prim, scalar};
use crate::eval::view_prims::eval_view_prim;
use crate::layout::Layout;
use crate::tensor::NoGradGuard;
use crate::tensor::Tensor;
use aot_ir::analysis::MatmulShape;
use aot_ir::transform::grad_rules::Prim;
use aot_ir::transform::ChainStep;
use aot_ir::{Arg as IrArg, Graph, Node, Op, OpKind, ScalarValue, ValueId};
use std::borrow::Cow;

/// The switches that differ between stages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mode {
    /// `Mutate` writes the root version it consumes (else a copy of it).
    pub mutate_in_place: bool,
    /// Small dense elementwise ops may run a direct kernel (`direct_kernels.rs`),
    /// which records no history.
    pub direct_kernels: bool,
    /// An `as_strided` view must stay inside its receiver (else fall back):
    /// eager sends such a view's gradient to its receiver, which keeps its
    /// own elements' only, while the joint places views by absolute
    /// geometry. The two agree while the view stays inside.
    pub views_within_receiver: bool,
}

impl Mode {
    pub(crate) const SOURCE: Mode = Mode { mutate_in_place: true, direct_kernels: false, views_within_receiver: false };
    pub(crate) const FUNCTIONAL: Mode = Mode { mutate_in_place: true, direct_kernels: true, views_within_receiver: false };
    pub(crate) const JOINT: Mode = Mode { mutate_in_place: false, direct_kernels: true, views_within_receiver: true };
}

/// Where `Primal` and `Tangent` nodes find their tensors.
pub(crate) enum Inputs<'a> {
    /// Every input is bound in the table before the run (the source's
    /// parameters, a partition's inputs).
    Bound,
    /// Input group `g` is the call's base of group `g`.
    Bases(&'a Bases<'a, 'a>),
    /// By position (the joint executors of `testing::joint`).
    #[cfg(feature = "test-hooks")]
    Tensors { primals: &'a [Tensor], tangents: &'a [Tensor] },
}

impl Inputs<'_> {
    fn primal(&self, g: usize) -> Result<Tensor> {
        let t = match self {
            Inputs::Bases(b) => b.get(g),
            #[cfg(feature = "test-hooks")]
            Inputs::Tensors { primals, .. } => primals.get(g).cloned(),
            Inputs::Bound => None,
        };
        t.ok_or_else(|| internal(format!("no primal {g}")))
    }

    fn tangent(&self, i: usize) -> Result<Tensor> {
        match self {
            #[cfg(feature = "test-hooks")]
            Inputs::Tensors { tangents, .. } => tangents.get(i).cloned(),
            _ => None,
        }
        .ok_or_else(|| internal(format!("no tangent {i}")))
    }
}

/// Which source argument an op's error names.
pub(crate) enum Blame<'a> {
    /// Errors are reported as they are (the caller names the function).
    Nobody,
    /// The node is a node of this source graph.
    Source(&'a Graph),
    /// Node `i` came from source node `src_node[i]` (functional nodes).
    Mapped { graph: &'a Graph, src_node: &'a [Option<usize>] },
}

/// What a run records besides its values.
/// What a recording run notes, per node.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    /// Whether a `reshape`/`contiguous` result aliased its receiver
    /// (`None` for other nodes).
    pub outcomes: Vec<Option<bool>>,
    /// A `matmul`'s operand ranks, which decide whether PyTorch returns an
    /// `_unsafe_view` of its product (`None` for other nodes).
    pub matmuls: Vec<Option<MatmulShape>>,
}

pub(crate) enum Track<'a> {
    Nothing,
    /// What a run shows about aliasing (see [`Recording`]).
    Aliasing(&'a mut Recording),
    /// Per value: whether it is known to be zero (a backward some of whose
    /// tangents never arrived; see [`zero_result`]).
    Zeros(&'a mut [bool]),
}

/// One run's fixed context.
pub(crate) struct Ctx<'a, G: ?Sized> {
    pub mode: Mode,
    pub inputs: Inputs<'a>,
    pub scalars: &'a [Option<ScalarValue>],
    /// The arguments' geometry, for `ArgGeometry` steps of view chains.
    pub geometry: &'a G,
    /// Nodes not to run (writes deferred to the epilogue, `deferred_writes.rs`),
    /// by their index in the stage before scheduling.
    pub skip: &'a [bool],
    /// Per node, its index before scheduling (`None`: a kernel); empty
    /// when the nodes are not scheduled.
    pub origin: &'a [Option<usize>],
    /// Per node: a copy and its one whole-root write that may run out of
    /// place (`aot_ir::kernel::Scheduled::fresh`); empty for none.
    pub fresh: &'a [bool],
    /// Per node, the values that die there (dropped from the table right
    /// after it; see `liveness.rs`).
    pub live: &'a Liveness,
    pub blame: Blame<'a>,
}

/// Why a run stopped: an error, or a node outside what the plan covers,
/// found before anything was written (the caller runs the eager reference).
#[derive(Debug)]
pub(crate) enum Stop {
    Error(AotError),
    Fallback(&'static str),
}

impl From<AotError> for Stop {
    fn from(e: AotError) -> Stop {
        Stop::Error(e)
    }
}

impl Stop {
    /// The stop as an error, a fallback as `Unsupported` (for callers that
    /// have no other path).
    pub(crate) fn into_error(self) -> AotError {
        match self {
            Stop::Error(e) => e,
            Stop::Fallback(why) => AotError::Unsupported { op: "compiled graph", msg: why.to_string() },
        }
    }
}

const RESHAPE_SURPRISE: &str = "a reshape/contiguous aliased otherwise than the compiled graph assumed";

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "executor", msg }
}

/// The tensor of value `v` in a run's table.
pub(crate) fn get(env: &[Option<Tensor>], v: ValueId) -> Result<&Tensor> {
    env.get(v.index()).and_then(Option::as_ref).ok_or_else(|| internal(format!("value {v} used before it was computed")))
}

/// Runs `nodes` in order, storing each node's value in `env`.
pub(crate) fn run<G: ArgGeometrySource + ?Sized>(
    nodes: &[Node],
    env: &mut [Option<Tensor>],
    cx: &Ctx<'_, G>,
    track: &mut Track<'_>,
) -> std::result::Result<(), Stop> {
    let mut peak = PeakValues::start(|| env.iter().filter(|t| t.is_some()).count());
    for (i, node) in nodes.iter().enumerate() {
        let before = if cx.origin.is_empty() { Some(i) } else { cx.origin.get(i).copied().flatten() };
        if before.and_then(|k| cx.skip.get(k)).copied().unwrap_or(false) {
            peak.released(release(env, cx.live.after(i), cx.mode));
            continue;
        }
        let t = {
            let _no_grad = node.no_grad.then(NoGradGuard::new);
            // An operand whose buffer the result may take (not in the
            // source stage, which writes and returns the caller's tensors).
            let over = if cx.mode.direct_kernels { super::reuse::donor(node, i, env, cx.live) } else { None };
            match (&node.op, &mut *track) {
                // Zeros are tracked through the kernel's body.
                (Op::Kernel(k), Track::Zeros(zero)) => super::kernel::run(k, node, env, cx, Some(zero), over)?,
                _ => step(node, Reuse { fresh: cx.fresh.get(i).copied().unwrap_or(false), over, at: i }, env, cx)?,
            }
        };
        let t = match track {
            Track::Nothing => t,
            Track::Aliasing(rec) => {
                let maybe = node
                    .kind()
                    .is_some_and(|op| matches!(op.alias_effect(), aot_ir::op::AliasEffect::MaybeView | aot_ir::op::AliasEffect::MaybeSame));
                let recv = node.receiver().and_then(|r| env.get(r.index())).and_then(Option::as_ref);
                rec.outcomes.push(recv.filter(|_| maybe).map(|r| t.shares_storage_with(r)));
                rec.matmuls.push(matmul_shape(node, env));
                t
            }
            Track::Zeros(zero) if zero_result(node, zero) => {
                if let Some(z) = zero.get_mut(node.value().index()) {
                    *z = true;
                }
                // Zeros with the value's own layout over a storage of the
                // same length, so geometry read off it later still fits.
                if node.is(OpKind::ZerosLike) {
                    t
                } else {
                    t.storage_as_1d().zeros_like()?.alias_with_layout(t.layout())
                }
            }
            Track::Zeros(_) => t,
        };
        if let Some(out) = node.out {
            let slot = env.get_mut(out.index()).ok_or_else(|| internal(format!("value {out} out of range")))?;
            peak.stored(slot.replace(t).is_none());
        }
        peak.released(release(env, cx.live.after(i), cx.mode));
    }
    peak.finish();
    Ok(())
}

/// Drops the values `dead` from the table (their last reader has run);
/// how many it held. A compiled stage's buffers go back to the buffer
/// cache (`buffer_cache::recycling`), for the next call of its plan.
#[inline]
fn release(env: &mut [Option<Tensor>], dead: &[ValueId], mode: Mode) -> usize {
    let mut drop_all = || {
        let mut n = 0;
        for v in dead {
            if let Some(slot) = env.get_mut(v.index()) {
                n += usize::from(slot.take().is_some());
            }
        }
        n
    };
    if dead.is_empty() {
        0
    } else if mode.direct_kernels {
        crate::buffer_cache::recycling(drop_all)
    } else {
        drop_all()
    }
}

/// What a node may reuse: `fresh` (see [`Ctx::fresh`]), and `over`, the
/// position of a tensor argument that dies at node `at` and whose buffer
/// its result may take (`reuse.rs`).
#[derive(Clone, Copy)]
struct Reuse {
    fresh: bool,
    over: Option<usize>,
    at: usize,
}

/// The value `node` computes.
fn step<G: ArgGeometrySource + ?Sized>(
    node: &Node,
    Reuse { fresh, over, at }: Reuse,
    env: &[Option<Tensor>],
    cx: &Ctx<'_, G>,
) -> std::result::Result<Tensor, Stop> {
    let tensor = |k: usize| -> Result<&Tensor> {
        match node.args.get(k) {
            Some(IrArg::Tensor(v)) => get(env, *v),
            _ => Err(internal(format!("argument {k} of {} is not a tensor", node.value()))),
        }
    };
    let blamed = |e: AotError| blame(e, node, &cx.blame);
    match &node.op {
        Op::Primal(g) => Ok(cx.inputs.primal(*g)?),
        Op::Tangent(k) => Ok(cx.inputs.tangent(*k)?),
        // The copy is made by its write, if that needs it.
        Op::Cow if fresh && cx.mode.mutate_in_place => Ok(tensor(0)?.clone()),
        Op::Cow => {
            let t = tensor(0)?;
            Ok(match super::direct_kernels::cow(t) {
                Some(copy) => copy,
                None => copy_storage(t)?,
            })
        }
        Op::Regen(chain) => replay_checked(tensor(0)?, chain, cx),
        Op::Dsl { op, check_alias: None } if over.is_some() => {
            match over.and_then(|k| super::reuse::elementwise(*op, &node.args, k, env, cx.scalars)) {
                Some(r) => Ok(r.map_err(blamed)?),
                None => step(node, Reuse { fresh, over: None, at }, env, cx),
            }
        }
        Op::Dsl { op, check_alias } => {
            let direct = if cx.mode.direct_kernels { super::direct_kernels::binary(*op, &node.args, env) } else { None };
            let r = match direct {
                Some(r) => r,
                None => exec_node(*op, &node.args, env, cx.scalars).map_err(blamed)?,
            };
            if let Some(assumed) = check_alias {
                if r.shares_storage_with(tensor(0)?) != *assumed {
                    return Err(Stop::Fallback(RESHAPE_SURPRISE));
                }
            }
            if cx.mode.views_within_receiver && *op == OpKind::AsStrided && !within(&r.layout(), &tensor(0)?.layout()) {
                return Err(Stop::Fallback("an as_strided view reaching outside the tensor it was taken of"));
            }
            Ok(r)
        }
        Op::Mutate { op, .. } if fresh && cx.mode.mutate_in_place => {
            let original = tensor(0)?;
            if let Some(r) = super::out_of_place_writes::over_dying(*op, &node.args, at, env, cx) {
                return Ok(r.map_err(blamed)?);
            }
            if let Some(r) = super::out_of_place_writes::out_of_place(*op, original, node.args.get(2..).unwrap_or(&[]), env, cx.scalars) {
                return Ok(r);
            }
            // The copy its `Cow` left to it, written in place.
            let copy = match super::direct_kernels::cow(original) {
                Some(c) => c,
                None => copy_storage(original)?,
            };
            exec(*op, &copy, node.args.get(2..).unwrap_or(&[]), env, cx.scalars).map_err(blamed)?;
            Ok(copy)
        }
        // In place on the view of the root version it consumes
        // (`args[1]`); the root is the new version.
        Op::Mutate { op, .. } if cx.mode.mutate_in_place => {
            let op_args = node.args.get(1..).unwrap_or(&[]);
            let direct = cx.mode.direct_kernels && super::direct_kernels::binary(*op, op_args, env).is_some();
            if !direct {
                exec_node(*op, op_args, env, cx.scalars).map_err(blamed)?;
            }
            Ok(tensor(0)?.clone())
        }
        // On a copy of the root, through the chain replayed on the copy.
        // An operand over the root's storage is read from the copy with its
        // own geometry, so eager's overlap checks see what eager sees (and
        // the values are the same).
        Op::Mutate { op, chain } => {
            let orig = tensor(0)?;
            let root = copy_storage(orig)?;
            let view = replay_checked(&root, chain, cx)?;
            let operands = OnCopy { env, orig, root: &root };
            exec(*op, &view, node.args.get(2..).unwrap_or(&[]), &operands, cx.scalars).map_err(blamed)?;
            Ok(root)
        }
        Op::Prim(p) => Ok(run_prim(p, node, env, cx)?),
        Op::Kernel(k) => super::kernel::run(k, node, env, cx, None, over),
        Op::Load(_) => Err(internal("`load` outside a kernel body".into()).into()),
        Op::Call(_) => Err(internal("a call that was not inlined".into()).into()),
    }
}

/// `e`, naming the function and the argument `node` concerns: the first
/// parameter among its source node's tensor operands (the receiver first).
/// A dtype mismatch blames the first parameter after the receiver: the
/// receiver sets the dtype the operands are expected to have (as in
/// PyTorch's messages), so `x.matmul(w)` with an f32 `x` and an f64 `w`
/// names `w`.
pub(super) fn blame(e: AotError, node: &Node, how: &Blame<'_>) -> AotError {
    let (g, src) = match how {
        Blame::Nobody => return e,
        Blame::Source(g) => (*g, Some(node)),
        Blame::Mapped { graph, src_node } => {
            let k = node.out.and_then(|v| src_node.get(v.index()).copied().flatten());
            (*graph, k.and_then(|k| graph.nodes.get(k)))
        }
    };
    // A tensor read for its metadata only (a factory's device) is not blamed.
    let first_param = |skip: usize| src.and_then(|n| n.data_uses().skip(skip).find_map(|v| g.param_of(v)));
    let p = match e {
        AotError::DTypeMismatch { .. } => first_param(1).or_else(|| first_param(0)),
        _ => first_param(0),
    };
    // Else the first parameter its scalars read (`Tensor::arange(0, n)`).
    let p = p.or_else(|| src.and_then(|n| n.scalar_args().find_map(scalar_param)));
    e.in_function(&g.name, p.map(|p| g.params[p].name.as_str()))
}

/// The first parameter a scalar expression reads (by value or size).
fn scalar_param(e: &aot_ir::ScalarExpr) -> Option<usize> {
    use aot_ir::ScalarExpr as S;
    match e {
        S::Param(p) | S::Size { param: p, .. } => Some(*p),
        S::Neg(x) | S::Cast(_, x) => scalar_param(x),
        S::Bin(_, a, b) => scalar_param(a).or_else(|| scalar_param(b)),
        S::Fn(_, args) => args.iter().find_map(scalar_param),
        S::F64(_) | S::I64(_) | S::Bool(_) | S::ValueSize { .. } => None,
    }
}

/// The environment as a copy-`Mutate`'s operands see it: a tensor over the
/// original root's storage is read from the root's copy, with its own
/// geometry.
struct OnCopy<'a> {
    env: &'a [Option<Tensor>],
    orig: &'a Tensor,
    root: &'a Tensor,
}

impl Values for OnCopy<'_> {
    fn tensor(&self, v: ValueId) -> Result<Cow<'_, Tensor>> {
        let t = get(self.env, v)?;
        if !t.shares_storage_with(self.orig) {
            return Ok(Cow::Borrowed(t));
        }
        // Of the copy's bytes as the operand's dtype (a dtype view of the
        // root reads the same bytes).
        let l = t.layout();
        Ok(Cow::Owned(match t.dtype() == self.root.dtype() {
            true => self.root.alias_with_layout(l),
            false => self.root.as_strided_dtype(t.dtype(), &l.shape, &l.stride, l.offset)?,
        }))
    }
}

/// A chain replayed on `root`; the chain is a view by construction, so a
/// `reshape`/`contiguous` in it that copied means the plan's assumption
/// failed.
fn replay_checked<G: ArgGeometrySource + ?Sized>(root: &Tensor, chain: &[ChainStep], cx: &Ctx<'_, G>) -> std::result::Result<Tensor, Stop> {
    let v = replay(root, chain, cx.geometry, cx.scalars)?;
    if !v.shares_storage_with(root) {
        return Err(Stop::Fallback(RESHAPE_SURPRISE));
    }
    Ok(v)
}

/// Whether every element `view` addresses is one of `of`'s.
fn within(view: &Layout, of: &Layout) -> bool {
    let mut mine: Vec<usize> = of.offsets().collect();
    mine.sort_unstable();
    view.offsets().all(|o| mine.binary_search(&o).is_ok())
}

/// A copy of `t`'s whole storage, viewed with `t`'s geometry.
fn copy_storage(t: &Tensor) -> Result<Tensor> {
    Ok(t.storage_as_1d().copy()?.alias_with_layout(t.layout()))
}

/// A backward-only primitive: dropout's generator state and mask here,
/// the others by the evaluators shared with eager backward.
fn run_prim<G: ArgGeometrySource + ?Sized>(p: &Prim, node: &Node, env: &[Option<Tensor>], cx: &Ctx<'_, G>) -> Result<Tensor> {
    let tensors = node.args.iter().map(|a| a.as_tensor().map(|v| get(env, v).cloned()).transpose()).collect::<Result<Vec<_>>>()?;
    match p {
        Prim::ViewGrad(_) | Prim::ViewOf(_) | Prim::ViewScatter(_) => {
            eval_view_prim(p, &tensors, &|t, chain| replay(t, chain, cx.geometry, cx.scalars))
        }
        Prim::RngTake | Prim::DropoutMask => {
            let at = if matches!(p, Prim::RngTake) { 1 } else { 2 };
            let prob = match scalar(node.args.get(at), cx.scalars)? {
                ScalarValue::F64(p) => p,
                ScalarValue::I64(p) => p as f64,
                ScalarValue::Bool(_) => return Err(internal("dropout: bool probability".into())),
            };
            let x = tensors.first().cloned().flatten().ok_or_else(|| internal("dropout: no tensor argument".into()))?;
            if matches!(p, Prim::RngTake) {
                // The source op's checks, before anything is drawn.
                if !(0.0..=1.0).contains(&prob) || !x.dtype().is_float() {
                    return x.dropout(prob);
                }
                return x.take_dropout_draw(prob);
            }
            let state = tensors.get(1).cloned().flatten().ok_or_else(|| internal("dropout_mask: no generator state".into()))?;
            x.dropout_mask_at(prob, &state)
        }
        _ => eval_prim(p, &node.args, &tensors, cx.scalars),
    }
}

/// Whether `node`'s value is zero: `zeros_like`, a product (`mul`,
/// `matmul`, a quotient's numerator) with a zero operand, or a linear map
/// (a view, a sum, a cast, a gradient-shaping prim) of a zero. Set rather
/// than computed, so a non-finite forward value on such a path (`0 * inf`)
/// cannot reach a gradient, as it cannot in eager, which never runs that
/// path.
pub(super) fn zero_result(node: &Node, zero: &[bool]) -> bool {
    use OpKind as K;
    let z = |i: usize| matches!(node.args.get(i), Some(IrArg::Tensor(v)) if zero.get(v.index()).copied().unwrap_or(false));
    let tensors = || node.args.iter().enumerate().filter(|(_, a)| matches!(a, IrArg::Tensor(_))).map(|(i, _)| i);
    match &node.op {
        Op::Dsl { op, .. } => match op {
            K::ZerosLike => true,
            K::Mul | K::Matmul | K::Mm | K::Bmm => tensors().any(z),
            K::Add | K::Sub => tensors().all(z),
            K::Div | K::Neg | K::Sum | K::SumDim | K::MeanDim | K::Expand | K::Contiguous | K::Copy | K::Reshape => z(0),
            _ => op.class() == aot_ir::OpClass::View && z(0),
        },
        Op::Prim(p) => match p {
            Prim::SumToLike | Prim::CastLike | Prim::ReshapeLike | Prim::ExpandLike | Prim::KeepDims | Prim::MatmulGrad { .. } => z(0),
            Prim::ViewGrad(_) | Prim::ViewOf(_) => z(1),
            Prim::ViewScatter(_) => z(1) && z(2),
            _ => false,
        },
        _ => false,
    }
}

/// The source stage: runs `g` on `args` and returns its outputs.
pub(crate) fn run_source(g: &Graph, args: &[Arg]) -> Result<Vec<Tensor>> {
    run_recording(g, args, &mut Recording::default())
}

/// [`run_source`], recording per node whether a `reshape`/`contiguous`
/// result aliased its receiver (`None` for other nodes).
/// A `matmul` node's operand shapes, from the operands in `env`.
fn matmul_shape(node: &Node, env: &[Option<Tensor>]) -> Option<MatmulShape> {
    if !node.is(OpKind::Matmul) {
        return None;
    }
    let mut operands = node.tensor_args().map(|v| env.get(v.index()).and_then(Option::as_ref));
    let (lhs, rhs) = (operands.next()??, operands.next()??);
    let first = |t: &Tensor| t.shape().first().copied().unwrap_or(1);
    let (lhs_dim, rhs_dim) = (lhs.dim(), rhs.dim());
    // The operand of higher rank is the one `matmul` would fold.
    let big = if lhs_dim >= rhs_dim { lhs } else { rhs };
    let foldable = aot_ir::analysis::matmul_foldable(&big.shape(), &big.stride(), lhs_dim < rhs_dim);
    Some(MatmulShape { lhs_dim, rhs_dim, lhs_first: first(lhs), rhs_first: first(rhs), foldable })
}

pub(crate) fn run_recording(g: &Graph, args: &[Arg], rec: &mut Recording) -> Result<Vec<Tensor>> {
    *rec = Recording::default();
    let scalars = scalar_values(g, args)?;
    let mut env: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (p, a) in g.params.iter().zip(args) {
        if let (Some(v), Some(t)) = (p.value, a.tensor()) {
            env[v.index()] = Some(t.clone());
        }
    }
    // The eager reference has no plan to keep its liveness in.
    let live = Liveness::new(&g.nodes, g.values.len(), &g.outputs);
    let cx = Ctx {
        mode: Mode::SOURCE,
        inputs: Inputs::Bound,
        scalars: &scalars,
        geometry: args,
        skip: &[],
        origin: &[],
        fresh: &[],
        live: &live,
        blame: Blame::Source(g),
    };
    run(&g.nodes, &mut env, &cx, &mut Track::Aliasing(rec)).map_err(Stop::into_error)?;
    g.outputs
        .iter()
        .map(|v| {
            env.get(v.index())
                .cloned()
                .flatten()
                .ok_or_else(|| AotError::Internal { op: "interpreter", msg: format!("output {v} of `{}` was never computed", g.name) })
        })
        .collect()
}
