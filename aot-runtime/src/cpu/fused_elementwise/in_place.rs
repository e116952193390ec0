//! Reinplacing on the CPU: a fused program stored over its destinations'
//! own buffers (`executor/kernel/inplace.rs`), one pass for every output.

use super::{run_into, supports, Dst, Input, Program};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;

/// The program `p` stored over its destinations' buffers in place
/// (reinplacing): `dests` pairs an input with the value stored over it,
/// and `dsts` are those inputs' buffers, in order, each with exactly
/// `out`'s layout and of one dtype, the stored values' (their entries in
/// `inputs` stand for them and are not read). Each block of every
/// destination is loaded before any output block at the same positions is
/// stored. Every check that can fail is made before a buffer is taken, so
/// a declined or failing kernel leaves them as they were. `None`: declined.
pub(crate) fn fused_in_place(
    name: &'static str,
    p: &Program<'_>,
    inputs: &[Input<'_>],
    dests: &[(usize, usize)],
    mut dsts: Vec<&mut CpuStorage>,
    out: &Layout,
) -> Option<Result<()>> {
    // A half-precision `rsqrt` reads its input again after the pass.
    if super::scalar_tail::is_half_rsqrt(p) {
        return None;
    }
    let n = inputs.len();
    let dtype = dsts.first()?.dtype();
    let dest_ok = |&(k, v): &(usize, usize), d: &&mut CpuStorage| {
        k < n
            && v < p.num_values
            && d.dtype() == dtype
            && p.dtypes[k] == dtype
            && p.dtypes[v] == dtype
            && d.len() == out.numel()
            && inputs[k].1 == *out
    };
    let is_dest = |i: usize| dests.iter().any(|&(k, _)| k == i);
    let fits = p.dtypes.len() == p.num_values
        && p.read.len() == n
        && dests.len() == dsts.len()
        && supports(p, n)
        && dests.iter().zip(&dsts).all(|(d, s)| dest_ok(d, s))
        && inputs.iter().enumerate().all(|(i, (s, _))| is_dest(i) || p.dtypes.get(i) == Some(&s.dtype()));
    if !fits {
        return None;
    }
    for (i, (s, l)) in inputs.iter().enumerate() {
        if let Err(e) = crate::cpu::strided::check_layout(name, l, if is_dest(i) { out.numel() } else { s.len() }) {
            return Some(Err(e));
        }
    }
    let bufs: Vec<&CpuStorage> = inputs.iter().map(|(s, _)| *s).collect();
    macro_rules! go {
        ($t:ty) => {{
            let taken =
                dsts.iter_mut().map(|d| <$t as crate::backend::CpuElem>::slice_mut(d).map(std::mem::take)).collect::<Option<Vec<_>>>()?;
            let over = dests.iter().zip(taken).map(|(&(k, v), buf)| Dst { own: Some(k), stored: v, buf }).collect();
            let r = run_into::<$t>(name, p, &bufs, inputs, out, over);
            Some(r.map(|bufs| {
                for (d, b) in dsts.iter_mut().zip(bufs) {
                    **d = <$t as crate::backend::CpuElem>::into_storage(b);
                }
            }))
        }};
    }
    match dtype {
        DType::F32 => go!(f32),
        DType::F64 => go!(f64),
        DType::F16 => go!(half::f16),
        DType::BF16 => go!(half::bf16),
        DType::I64 => go!(i64),
        DType::Bool => go!(bool),
    }
}
