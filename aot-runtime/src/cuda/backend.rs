//! `impl Backend for CudaStorage` (feature `cuda`).
//!
//! Elementwise float ops run as kernels of the kernel stage: each is a
//! one-op [`Kernel`], rendered to CUDA C by the one renderer
//! (`aot_ir::kernel::render`) for the operands' dtype and rank, compiled
//! once per (op, dtype, rank) and launched with the operands' layouts as
//! run-time parameters, so the GPU computes what the CPU backend computes
//! from the same op definition. Scalar operands are a parameter slot, so
//! one compiled kernel serves every value.
//!
//! Matmul on a GPU goes through cuBLAS (`cublas.rs`); the simulator, which
//! has no cuBLAS, computes it on the host with the CPU's gemm.
//!
//! The other primitives (integer and bool elementwise ops, casts, copies,
//! reductions, softmax, random fills) do not have kernels yet.
//! They run on the host: the operands are downloaded, the CPU backend
//! computes, and the result is uploaded. That is correct everywhere and
//! slow on a GPU; [`host_round_trips`] counts them, so tests can tell
//! which ops ran kernels.

use super::device::Gpu;
use super::sim::Entry;
use super::CudaStorage;
use crate::backend::{Backend, BinaryOp, Distribution, FusedProgram, ReduceOp, Rng, UnaryOp};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::CpuStorage;
use aot_ir::kernel::render::{pack_params, render_cuda, KernelDType, Operand, ScalarSlots};
use aot_ir::kernel::Kernel;
use aot_ir::{Arg, Node, Op, OpKind, ScalarExpr, ValueId};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

static HOST_ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);
static KERNEL_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many CUDA primitives ran on the host (no kernel yet), and how many
/// launched a kernel, in this process.
pub fn host_round_trips() -> (u64, u64) {
    (HOST_ROUND_TRIPS.load(Ordering::Relaxed), KERNEL_LAUNCHES.load(Ordering::Relaxed))
}

/// The bytes of a host buffer, in memory order.
fn to_bytes(s: &CpuStorage) -> Vec<u8> {
    match s {
        CpuStorage::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    }
}

/// A host buffer of `dtype` from its bytes.
fn from_bytes(dtype: DType, b: &[u8]) -> CpuStorage {
    fn chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
    }
    match dtype {
        DType::F32 => CpuStorage::F32(chunks::<4>(b).map(f32::from_le_bytes).collect()),
        DType::F64 => CpuStorage::F64(chunks::<8>(b).map(f64::from_le_bytes).collect()),
        DType::F16 => CpuStorage::F16(chunks::<2>(b).map(half::f16::from_le_bytes).collect()),
        DType::BF16 => CpuStorage::BF16(chunks::<2>(b).map(half::bf16::from_le_bytes).collect()),
        DType::I64 => CpuStorage::I64(chunks::<8>(b).map(i64::from_le_bytes).collect()),
        DType::Bool => CpuStorage::Bool(b.iter().map(|&x| x != 0).collect()),
    }
}

impl CudaStorage {
    /// The whole buffer on the host.
    fn host(&self, op: &'static str) -> Result<CpuStorage> {
        let bytes = self.gpu(op)?.download(op, &self.mem, self.len * self.dtype.size_in_bytes())?;
        Ok(from_bytes(self.dtype, &bytes))
    }

    /// `data` uploaded to device `ordinal`.
    fn upload(op: &'static str, ordinal: usize, data: &CpuStorage) -> Result<CudaStorage> {
        let gpu = super::device::gpu(op, ordinal)?;
        let mem = gpu.upload(op, &to_bytes(data))?;
        Ok(CudaStorage { mem, dtype: data.dtype(), len: data.len(), ordinal })
    }

    /// Runs `f` on the host copy of `self` and uploads its result.
    fn on_host(&self, op: &'static str, f: impl FnOnce(&CpuStorage) -> Result<CpuStorage>) -> Result<CudaStorage> {
        HOST_ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
        let out = f(&self.host(op)?)?;
        CudaStorage::upload(op, self.ordinal, &out)
    }

    /// Runs `f` on host copies of `self` and `dst`, then writes `dst` back.
    fn write_on_host(
        &self,
        op: &'static str,
        dst: &mut CudaStorage,
        f: impl FnOnce(&CpuStorage, &mut CpuStorage) -> Result<()>,
    ) -> Result<()> {
        HOST_ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
        let src = self.host(op)?;
        let mut d = dst.host(op)?;
        f(&src, &mut d)?;
        *dst = CudaStorage::upload(op, dst.ordinal, &d)?;
        Ok(())
    }
}

/// The renderer's dtype for `d`, if it renders it.
fn kernel_dtype(d: DType) -> Option<KernelDType> {
    Some(match d {
        DType::F32 => KernelDType::F32,
        DType::F64 => KernelDType::F64,
        DType::F16 => KernelDType::F16,
        DType::BF16 => KernelDType::BF16,
        _ => return None,
    })
}

/// The second operand of a one-op kernel.
#[derive(Clone, Copy)]
enum Rhs<'a> {
    None,
    Tensor(&'a CudaStorage, &'a Layout),
    Scalar(f64),
}

/// The one-op kernel `op(in0[, in1 | scalar slot 0])`.
fn one_op_kernel(op: OpKind, rhs: &Rhs<'_>) -> Kernel {
    let t = |v: u32| Arg::Tensor(ValueId(v));
    let mut body = vec![Node::new(Op::Load(0), vec![], Some(ValueId(0)))];
    let (args, out) = match rhs {
        Rhs::None => (vec![t(0)], 1),
        Rhs::Tensor(..) => {
            body.push(Node::new(Op::Load(1), vec![], Some(ValueId(1))));
            (vec![t(0), t(1)], 2)
        }
        Rhs::Scalar(_) => (vec![t(0), Arg::Scalar(ScalarExpr::Param(0))], 1),
    };
    body.push(Node::new(op, args, Some(ValueId(out))));
    let num_values = out as usize + 1;
    Kernel {
        name: format!("aot_{}", op.name()),
        body,
        num_values,
        out: ValueId(out),
        stage_values: (0..num_values as u32).map(ValueId).collect(),
    }
}

fn operand(l: &Layout) -> (i64, Vec<i64>) {
    let strides = l.stride.iter().zip(l.shape.iter()).map(|(&s, &n)| if n == 1 { 0 } else { s as i64 }).collect();
    (l.offset as i64, strides)
}

/// Launches `op` over `a` (and `rhs`) into `out` laid out as `lo`. `out`
/// may be `a`'s buffer only with `a`'s exact layout (an in-place op).
fn launch_one_op(
    name: &'static str,
    op: OpKind,
    a: (u64, &Layout),
    rhs: &Rhs<'_>,
    dtype: KernelDType,
    out: (u64, &Layout),
    gpu: &Gpu,
) -> Result<()> {
    let k = one_op_kernel(op, rhs);
    let (lo, rank) = (out.1, out.1.shape.len());
    let r = render_cuda(&k, dtype, rank, &ScalarSlots::of(&k)).map_err(|e| AotError::internal(name, e.to_string()))?;
    let st = dtype.storage();
    let mut bufs = vec![out.0, a.0];
    let mut layouts = vec![operand(a.1)];
    let mut scalars = Vec::new();
    match rhs {
        Rhs::Tensor(b, lb) => {
            bufs.push(b.mem.address(gpu));
            layouts.push(operand(lb));
        }
        Rhs::Scalar(s) => scalars.push(*s),
        Rhs::None => {}
    }
    let mut pointers = vec![format!("{st} *")];
    pointers.extend((1..bufs.len()).map(|_| format!("const {st} *")));
    let entry = Entry { name: r.name.clone(), pointers, sync: false };
    let sizes: Vec<i64> = lo.shape.iter().map(|&n| n as i64).collect();
    let (oo, os) = operand(lo);
    let ins: Vec<Operand<'_>> = layouts.iter().map(|(o, s)| Operand { offset: *o, strides: s }).collect();
    let words =
        pack_params(&sizes, Operand { offset: oo, strides: &os }, &ins, &scalars).map_err(|e| AotError::internal(name, e.to_string()))?;
    let numel: usize = lo.shape.iter().product();
    let block = 256u32;
    let grid = u32::try_from(numel.div_ceil(256).clamp(1, 1024)).unwrap_or(1024);
    KERNEL_LAUNCHES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the buffers are live buffers of `gpu` of the storage type;
    // the layouts were checked against them by the eager op that called
    // the backend; `out` is borrowed mutably by the caller, or is `a` with
    // `a`'s layout.
    unsafe { gpu.launch(name, &r.source, &entry, (grid, block), &bufs, &words) }
}

impl CudaStorage {
    /// `op(self[l], rhs)` into a new buffer laid out as `out`; `None` when
    /// the dtype has no rendered kernels.
    fn one_op(&self, name: &'static str, op: OpKind, l: &Layout, rhs: Rhs<'_>, out: &Layout) -> Option<Result<CudaStorage>> {
        let dtype = kernel_dtype(self.dtype)?;
        if matches!(rhs, Rhs::Tensor(b, _) if b.dtype != self.dtype) {
            return None;
        }
        Some((|| {
            let gpu = self.gpu(name)?;
            let n: usize = out.shape.iter().product();
            let mem = gpu.alloc(name, n * self.dtype.size_in_bytes())?;
            if n > 0 {
                launch_one_op(name, op, (self.mem.address(gpu), l), &rhs, dtype, (mem.address(gpu), out), gpu)?;
            }
            Ok(CudaStorage { mem, dtype: self.dtype, len: n, ordinal: self.ordinal })
        })())
    }
}

fn unary_kind(op: UnaryOp) -> OpKind {
    match op {
        UnaryOp::Neg => OpKind::Neg,
        UnaryOp::Exp => OpKind::Exp,
        UnaryOp::Log => OpKind::Log,
        UnaryOp::Sqrt => OpKind::Sqrt,
        UnaryOp::Rsqrt => OpKind::Rsqrt,
        UnaryOp::Abs => OpKind::Abs,
        UnaryOp::Sin => OpKind::Sin,
        UnaryOp::Cos => OpKind::Cos,
        UnaryOp::Tanh => OpKind::Tanh,
        UnaryOp::Sigmoid => OpKind::Sigmoid,
        UnaryOp::Relu => OpKind::Relu,
        UnaryOp::Gelu => OpKind::Gelu,
        UnaryOp::Silu => OpKind::Silu,
        UnaryOp::Reciprocal => OpKind::Reciprocal,
        UnaryOp::Square => OpKind::Square,
    }
}

/// The arithmetic binary ops, which render; comparisons do not yet.
fn binary_kind(op: BinaryOp) -> Option<OpKind> {
    Some(match op {
        BinaryOp::Add => OpKind::Add,
        BinaryOp::Sub => OpKind::Sub,
        BinaryOp::Mul => OpKind::Mul,
        BinaryOp::Div => OpKind::Div,
        BinaryOp::Pow => OpKind::Pow,
        BinaryOp::Maximum => OpKind::Maximum,
        BinaryOp::Minimum => OpKind::Minimum,
        _ => return None,
    })
}

/// A contiguous layout of `range` (for the dense primitives).
fn run(range: &Range<usize>) -> Layout {
    let mut l = Layout::contiguous(&[range.len()]);
    l.offset = range.start;
    l
}

fn expect_cuda(op: &'static str, device: &Device) -> Result<usize> {
    match device {
        Device::Cuda(i) => Ok(*i),
        other => Err(AotError::internal(op, format!("the CUDA backend was asked to allocate on {other}"))),
    }
}

impl Backend for CudaStorage {
    fn device(&self) -> Device {
        CudaStorage::device(self)
    }
    fn dtype(&self) -> DType {
        CudaStorage::dtype(self)
    }
    fn len(&self) -> usize {
        CudaStorage::len(self)
    }
    fn full(op: &'static str, device: &Device, dtype: DType, n: usize, value: f64) -> Result<Self> {
        let ordinal = expect_cuda(op, device)?;
        let host = <CpuStorage as Backend>::full(op, &Device::Cpu, dtype, n, value)?;
        CudaStorage::upload(op, ordinal, &host)
    }
    fn from_host(op: &'static str, device: &Device, data: CpuStorage) -> Result<Self> {
        CudaStorage::upload(op, expect_cuda(op, device)?, &data)
    }
    fn random(op: &'static str, device: &Device, dist: Distribution, dtype: DType, n: usize, rng: &mut Rng) -> Result<Self> {
        let ordinal = expect_cuda(op, device)?;
        // The device must exist before anything is drawn.
        super::device::gpu(op, ordinal)?;
        let host = <CpuStorage as Backend>::random(op, &Device::Cpu, dist, dtype, n, rng)?;
        CudaStorage::upload(op, ordinal, &host)
    }
    fn to_host(&self, op: &'static str, l: &Layout, dtype: DType) -> Result<CpuStorage> {
        self.host(op)?.to_host(op, l, dtype)
    }
    fn unary(&self, op: UnaryOp, l: &Layout, out: &Layout) -> Result<Self> {
        if let Some(r) = self.one_op(op.name(), unary_kind(op), l, Rhs::None, out) {
            return r;
        }
        self.on_host(op.name(), |h| h.unary(op, l, out))
    }
    fn clamp(&self, op: &'static str, l: &Layout, min: Option<f64>, max: Option<f64>, out: &Layout) -> Result<Self> {
        self.on_host(op, |h| h.clamp(op, l, min, max, out))
    }
    fn binary(&self, op: BinaryOp, la: &Layout, rhs: &Self, lb: &Layout, out: &Layout) -> Result<Self> {
        if let Some(r) = binary_kind(op).and_then(|k| self.one_op(op.name(), k, la, Rhs::Tensor(rhs, lb), out)) {
            return r;
        }
        let b = rhs.host(op.name())?;
        self.on_host(op.name(), |h| h.binary(op, la, &b, lb, out))
    }
    fn binary_assign(&mut self, op: BinaryOp, l: &Layout, rhs: &Self, lr: &Layout) -> Result<()> {
        if let (Some(kind), Some(dtype)) = (binary_kind(op), kernel_dtype(self.dtype)) {
            if rhs.dtype == self.dtype {
                let gpu = self.gpu(op.name())?;
                let at = self.mem.address(gpu);
                return launch_one_op(op.name(), kind, (at, l), &Rhs::Tensor(rhs, lr), dtype, (at, l), gpu);
            }
        }
        let r = rhs.host(op.name())?;
        let mut me = self.host(op.name())?;
        HOST_ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
        me.binary_assign(op, l, &r, lr)?;
        *self = CudaStorage::upload(op.name(), self.ordinal, &me)?;
        Ok(())
    }
    fn binary_dense(&self, op: BinaryOp, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<Self> {
        let out = Layout::contiguous(&[ra.len()]);
        self.binary(op, &run(&ra), rhs, &run(&rb), &out)
    }
    fn binary_assign_dense(&mut self, op: BinaryOp, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<()> {
        self.binary_assign(op, &run(&ra), rhs, &run(&rb))
    }
    fn binary_scalar(&self, op: BinaryOp, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<Self> {
        if !scalar_first {
            if let Some(r) = binary_kind(op).and_then(|k| self.one_op(op.name(), k, la, Rhs::Scalar(s), out)) {
                return r;
            }
        }
        self.on_host(op.name(), |h| h.binary_scalar(op, la, s, scalar_first, out))
    }
    fn where_cond(&self, op: &'static str, lc: &Layout, a: &Self, la: &Layout, b: &Self, lb: &Layout, out: &Layout) -> Result<Self> {
        let (ha, hb) = (a.host(op)?, b.host(op)?);
        let ordinal = a.ordinal;
        HOST_ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
        let r = self.host(op)?.where_cond(op, lc, &ha, la, &hb, lb, out)?;
        CudaStorage::upload(op, ordinal, &r)
    }
    fn cast(&self, op: &'static str, l: &Layout, dtype: DType, out: &Layout) -> Result<Self> {
        self.on_host(op, |h| h.cast(op, l, dtype, out))
    }
    fn copy_strided(&self, op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()> {
        self.write_on_host(op, dst, |s, d| s.copy_strided(op, ls, d, ld))
    }
    fn scatter_add(&self, op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()> {
        self.write_on_host(op, dst, |s, d| s.scatter_add(op, ls, d, ld))
    }
    fn fill(&mut self, op: &'static str, l: &Layout, value: f64) -> Result<()> {
        HOST_ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
        let mut me = self.host(op)?;
        me.fill(op, l, value)?;
        *self = CudaStorage::upload(op, self.ordinal, &me)?;
        Ok(())
    }
    fn reduce(&self, op: ReduceOp, l: &Layout, dims: &[usize], keepdim: bool) -> Result<Self> {
        self.on_host(op.name(), |h| h.reduce(op, l, dims, keepdim))
    }
    fn var(&self, op: &'static str, l: &Layout, dims: &[usize], correction: i64, keepdim: bool) -> Result<Self> {
        self.on_host(op, |h| h.var(op, l, dims, correction, keepdim))
    }
    fn softmax(&self, op: &'static str, l: &Layout, dim: usize, log: bool) -> Result<Self> {
        self.on_host(op, |h| h.softmax(op, l, dim, log))
    }
    fn matmul(&self, op: &'static str, la: &Layout, rhs: &Self, lb: &Layout) -> Result<Self> {
        let gpu = self.gpu(op)?;
        let (&[batch, m, _], Some(&n)) = (&la.shape[..], lb.shape.get(2)) else {
            return Err(AotError::internal(op, "matmul takes 3-D layouts"));
        };
        // The simulator has no cuBLAS: its matmul is the CPU's, on the host.
        if self.dtype == rhs.dtype && matches!(gpu, Gpu::Real(_)) {
            let len = batch * m * n;
            let mem = gpu.alloc(op, len * self.dtype.size_in_bytes())?;
            let (a, b, out) = (self.mem.address(gpu), rhs.mem.address(gpu), mem.address(gpu));
            // SAFETY: both operands are live buffers of this device holding
            // their layouts' elements (checked by the eager op); `mem` is new.
            if len == 0 || unsafe { gpu.gemm(op, self.dtype, (a, la), (b, lb), out)? } {
                return Ok(CudaStorage { mem, dtype: self.dtype, len, ordinal: self.ordinal });
            }
        }
        let b = rhs.host(op)?;
        self.on_host(op, |h| h.matmul(op, la, &b, lb))
    }
    /// Declined for now: the kernel's ops run one by one, each a kernel of
    /// its own where it has one.
    fn fused(_: &'static str, _: &FusedProgram<'_>, _: &[(&Self, Layout)], _: &Layout) -> Option<Result<Self>> {
        None
    }
}
