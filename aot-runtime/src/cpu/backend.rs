//! The CPU backend: `impl Backend for CpuStorage`, each method one call of
//! the kernels of this module.

use crate::backend::CpuStorage;
use crate::backend::{Backend, Distribution, Indexed, Rng, Targets};
use crate::cpu;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::OpKind;
use std::ops::Range;

/// The CPU constructors are only reached for `Device::Cpu`; anything else
/// is a dispatch bug.
fn expect_cpu(op: &'static str, device: &Device) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        other => Err(AotError::internal(op, format!("the CPU backend was asked to allocate on {other}"))),
    }
}

impl Backend for CpuStorage {
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn dtype(&self) -> DType {
        CpuStorage::dtype(self)
    }
    fn len(&self) -> usize {
        CpuStorage::len(self)
    }

    fn full(op: &'static str, device: &Device, dtype: DType, n: usize, value: f64) -> Result<Self> {
        expect_cpu(op, device)?;
        CpuStorage::full(op, dtype, n, value)
    }
    fn arange(op: &'static str, device: &Device, dtype: DType, n: usize, start: f64, step: f64) -> Result<Self> {
        expect_cpu(op, device)?;
        if dtype == DType::I64 {
            let (a, d) = (start as i64, step as i64);
            return crate::host_alloc::try_collect(op, (0..n).map(|i| a.wrapping_add((i as i64).wrapping_mul(d)))).map(CpuStorage::I64);
        }
        CpuStorage::from_f64s(op, dtype, (0..n).map(|i| start + i as f64 * step))
    }
    fn from_host(op: &'static str, device: &Device, data: CpuStorage) -> Result<Self> {
        expect_cpu(op, device)?;
        Ok(data)
    }
    fn random(op: &'static str, device: &Device, dist: Distribution, dtype: DType, n: usize, rng: &mut Rng) -> Result<Self> {
        expect_cpu(op, device)?;
        match dist {
            Distribution::Uniform => cpu::rand_uniform(dtype, n, rng),
            Distribution::Normal => cpu::randn(dtype, n, rng),
            Distribution::Dropout { p, scale } => cpu::dropout_mask(dtype, n, p, scale, rng),
        }
    }
    fn to_host(&self, _op: &'static str, l: &Layout, dtype: DType) -> Result<CpuStorage> {
        cpu::cast(self, l, dtype, &Layout::contiguous(&l.shape))
    }

    fn unary(&self, op: OpKind, l: &Layout, out: &Layout) -> Result<Self> {
        cpu::unary(op, self, l, out)
    }
    fn clamp(&self, _op: &'static str, l: &Layout, min: Option<f64>, max: Option<f64>, out: &Layout) -> Result<Self> {
        cpu::clamp(self, l, min, max, out)
    }
    fn binary(&self, op: OpKind, la: &Layout, rhs: &Self, lb: &Layout, out: &Layout) -> Result<Self> {
        cpu::binary(op, self, la, rhs, lb, out)
    }
    fn binary_assign(&mut self, op: OpKind, l: &Layout, rhs: &Self, lr: &Layout) -> Result<()> {
        cpu::binary_assign(op, self, l, rhs, lr)
    }
    fn binary_dense(&self, op: OpKind, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<Self> {
        cpu::binary_dense(op, self, ra, rhs, rb)
    }
    fn binary_assign_dense(&mut self, op: OpKind, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<()> {
        cpu::binary_assign_dense(op, self, ra, rhs, rb)
    }
    fn binary_scalar(&self, op: OpKind, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<Self> {
        cpu::binary_scalar(op, self, la, s, scalar_first, out)
    }
    fn where_cond(&self, _op: &'static str, lc: &Layout, a: &Self, la: &Layout, b: &Self, lb: &Layout, out: &Layout) -> Result<Self> {
        cpu::where_cond(self, lc, a, la, b, lb, out)
    }
    fn cast(&self, _op: &'static str, l: &Layout, dtype: DType, out: &Layout) -> Result<Self> {
        cpu::cast(self, l, dtype, out)
    }

    fn copy_strided(&self, _op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()> {
        cpu::copy_strided(self, ls, dst, ld)
    }
    fn scatter_add(&self, _op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()> {
        cpu::scatter_add(self, ls, dst, ld)
    }
    #[cfg(any(test, feature = "test-hooks"))]
    fn fill(&mut self, op: &'static str, l: &Layout, value: f64) -> Result<()> {
        crate::layout::check_layout(op, l, CpuStorage::len(self))?;
        cpu::fill(self, l, value);
        Ok(())
    }

    fn gather(&self, op: &'static str, l: &Layout, ix: Indexed<'_, Self>) -> Result<Self> {
        cpu::gather(op, self, l, ix)
    }
    fn scatter(&self, op: &'static str, ls: &Layout, ix: Indexed<'_, Self>, dst: &mut Self, ld: &Layout, accumulate: bool) -> Result<()> {
        cpu::scatter(op, self, ls, ix, dst, ld, accumulate)
    }

    fn reduce(&self, op: OpKind, l: &Layout, dims: &[usize], keepdim: bool) -> Result<Self> {
        cpu::reduce(op, self, l, dims, keepdim)
    }
    fn var(&self, _op: &'static str, l: &Layout, dims: &[usize], correction: i64, keepdim: bool) -> Result<Self> {
        cpu::var(self, l, dims, correction, keepdim)
    }
    fn softmax(&self, _op: &'static str, l: &Layout, dim: usize, log: bool) -> Result<Self> {
        cpu::softmax(self, l, dim, log)
    }
    fn matmul(&self, _op: &'static str, la: &Layout, rhs: &Self, lb: &Layout) -> Result<Self> {
        cpu::matmul(self, la, rhs, lb)
    }
    fn cumsum(&self, op: &'static str, l: &Layout, dim: usize, reverse: bool) -> Result<Self> {
        cpu::cumsum(op, self, l, dim, reverse)
    }
    fn extreme(&self, op: &'static str, l: &Layout, dim: usize, max: bool) -> Result<(Self, Self)> {
        cpu::extreme(op, self, l, dim, max)
    }
    fn nll_loss(&self, op: &'static str, l: &Layout, t: Targets<'_, Self>) -> Result<Self> {
        cpu::nll_loss(op, self, l, t)
    }
    fn nll_loss_backward(&self, op: &'static str, lg: &Layout, t: Targets<'_, Self>, dtype: DType) -> Result<Self> {
        cpu::nll_loss_backward(op, self, lg, t, dtype)
    }
    fn fused(
        op: &'static str,
        p: &crate::backend::FusedProgram<'_>,
        _: Option<&crate::backend::KernelCall<'_>>,
        inputs: &[(&Self, Layout)],
        out: &Layout,
    ) -> Option<Result<Self>> {
        cpu::fused_elementwise::fused(op, p, inputs, out)
    }
    fn supports_fused(p: &crate::backend::FusedProgram<'_>, inputs: usize) -> bool {
        cpu::fused_elementwise::supports(p, inputs)
    }
    fn fused_over(
        op: &'static str,
        p: &crate::backend::FusedProgram<'_>,
        inputs: &[(&Self, Layout)],
        k: usize,
        dst: Self,
        out: &Layout,
    ) -> std::result::Result<Result<Self>, Self> {
        cpu::fused_elementwise::fused_over(op, p, inputs, k, dst, out)
    }
    fn fused_in_place(
        op: &'static str,
        p: &crate::backend::FusedProgram<'_>,
        _: &crate::backend::KernelCall<'_>,
        inputs: &[(Option<&Self>, Layout)],
        dests: &[(usize, usize)],
        own: Vec<&mut Self>,
        out: &Layout,
    ) -> Option<Result<()>> {
        // The destinations' entries stand for them and are not read.
        let hole = CpuStorage::Bool(Vec::new());
        let inputs: Vec<(&CpuStorage, Layout)> = inputs.iter().map(|(s, l)| (s.unwrap_or(&hole), l.clone())).collect();
        cpu::fused_elementwise::fused_in_place(op, p, &inputs, dests, own, out)
    }
    fn fused_reduce(
        op: &'static str,
        p: &crate::backend::FusedReduceProgram<'_>,
        _: &crate::backend::KernelCall<'_>,
        inputs: &[(&Self, Layout)],
        out: &Layout,
    ) -> Option<Result<Self>> {
        cpu::fused_reduce::fused_reduce(op, p, inputs, out)
    }
}
