//! Casts, strided copies and fills: [`cast`] makes a new buffer in a given
//! layout, [`copy_strided`], [`scatter_add`] and [`fill`] write into an existing one.

use super::elem::{typed, Elem};
use super::output::OutOrder;
use super::strided::{check_layout, for_each_pair, map1, map1_into};
use crate::backend::CpuStorage;
use crate::dtype::{DType, WithDType};
use crate::error::{AotError, Result};
use crate::layout::Layout;

/// The elements of `l` as a new buffer of `dtype` laid out as `out` (dense,
/// of `l.shape`): float -> I64 truncates toward zero, anything -> Bool is
/// `!= 0`, Bool -> anything is 0/1. Same dtype is a copy.
pub fn cast(src: &CpuStorage, l: &Layout, dtype: DType, out: &Layout) -> Result<CpuStorage> {
    fn go<T: Elem>(v: &[T], l: &Layout, dtype: DType) -> Result<CpuStorage> {
        if T::DTYPE == dtype {
            return Ok(T::into_storage(map1(OP, v, l, |x| x)?));
        }
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(map1(OP, v, l, Elem::cast)?),
            DType::F64 => CpuStorage::F64(map1(OP, v, l, Elem::cast)?),
            DType::F16 => CpuStorage::F16(map1(OP, v, l, Elem::cast)?),
            DType::BF16 => CpuStorage::BF16(map1(OP, v, l, Elem::cast)?),
            DType::I64 => CpuStorage::I64(map1(OP, v, l, Elem::cast)?),
            DType::Bool => CpuStorage::Bool(map1(OP, v, l, Elem::cast)?),
        })
    }
    const OP: &str = "cast";
    check_layout(OP, l, src.len())?;
    let l = &*OutOrder::new(OP, out, &l.shape)?.input(l);
    crate::dispatch_cpu!(src, v => go(v, l, dtype))
}

/// Writes `f` of the elements of `s` (through `ls`) into the positions of
/// `ld` in `d`; both layouts have one shape.
fn copy_with<S: Copy + Sync, D: Copy + Send>(s: &[S], ls: &Layout, d: &mut [D], ld: &Layout, f: impl Fn(S) -> D + Sync) {
    let n = ld.numel();
    if n == 0 {
        return;
    }
    if ld.is_contiguous() {
        map1_into(&mut d[ld.offset..ld.offset + n], s, ls, f);
    } else {
        for_each_pair(&ld.shape, ld, ls, |di, si| d[di] = f(s[si]));
    }
}

/// Writes the elements of `src` (read through `ls`, row-major) into `dst` at
/// the positions of `ld` (row-major), casting if the dtypes differ. The
/// layouts must have the same number of elements; `src` and `dst` are
/// different buffers.
pub fn copy_strided(src: &CpuStorage, ls: &Layout, dst: &mut CpuStorage, ld: &Layout) -> Result<()> {
    const OP: &str = "copy_";
    if ls.numel() != ld.numel() {
        return Err(AotError::shape(
            OP,
            format!("cannot copy {} elements of shape {:?} into {} elements of shape {:?}", ls.numel(), ls.shape, ld.numel(), ld.shape),
        ));
    }
    check_layout(OP, ls, src.len())?;
    check_layout(OP, ld, dst.len())?;
    if ls.shape != ld.shape {
        // Same count, other shape: read in row-major order first.
        let tmp = cast(src, ls, dst.dtype(), &Layout::contiguous(&ls.shape))?;
        return copy_strided(&tmp, &Layout::contiguous(&ld.shape), dst, ld);
    }
    fn same<T: Elem>(src: &CpuStorage, ls: &Layout, d: &mut [T], ld: &Layout) -> Result<()> {
        copy_with(typed::<T>(OP, src)?, ls, d, ld, |x| x);
        Ok(())
    }
    fn other<D: Elem>(src: &CpuStorage, ls: &Layout, d: &mut [D], ld: &Layout) {
        crate::dispatch_cpu!(src, s => copy_with(s, ls, d, ld, Elem::cast::<D>))
    }
    if src.dtype() == dst.dtype() {
        crate::dispatch_cpu!(dst, d => same(src, ls, d, ld))
    } else {
        crate::dispatch_cpu!(dst, d => other(src, ls, d, ld));
        Ok(())
    }
}

/// Sets the positions of `l` in `dst` to `v` converted to the dtype of `dst`.
#[cfg(any(test, feature = "test-hooks"))]
pub fn fill(dst: &mut CpuStorage, l: &Layout, v: f64) {
    fn go<T: Elem>(d: &mut [T], l: &Layout, x: T) {
        let n = l.numel();
        if n == 0 {
            return;
        }
        if l.is_contiguous() {
            d[l.offset..l.offset + n].fill(x);
        } else {
            let plan = super::strided::Plan::new(&l.shape, [l]);
            let [st] = plan.inner_stride();
            plan.for_each_run(0, n, |_, [s], len| {
                for j in 0..len {
                    d[s + j * st] = x;
                }
            });
        }
    }
    crate::dispatch_cpu!(dst, d => go(d, l, Elem::cast(v)))
}

/// Adds the elements of `src` (read through `ls`, row-major) into `dst` at
/// the positions of `ld` (row-major), in f64. A position that `ld` visits
/// more than once (the gradient of an overlapping view) gets every addend,
/// summed in f64 in row-major order and rounded to `dst`'s dtype once, as
/// eager's reductions round a sum once (per-addend rounding drifts by
/// ulps in f16/bf16); i64 into i64 adds exactly (wrapping). `src` and
/// `dst` are different buffers.
pub fn scatter_add(src: &CpuStorage, ls: &Layout, dst: &mut CpuStorage, ld: &Layout) -> Result<()> {
    const OP: &str = "scatter_add";
    if ls.numel() != ld.numel() {
        return Err(AotError::shape(OP, format!("cannot add {} elements into {} positions", ls.numel(), ld.numel())));
    }
    check_layout(OP, ls, src.len())?;
    check_layout(OP, ld, dst.len())?;
    add_at(OP, src, dst, ld.offsets().zip(ls.offsets()), !ld.is_non_overlapping())
}

/// `dst[o] += src[i]` for each pair `(o, i)` of `pairs`: i64 into i64
/// exactly (wrapping, as PyTorch's), floats summed per position in f64 in
/// the pairs' order and rounded once. `repeats`: a position may come more
/// than once (its addends are then gathered by a stable sort).
pub(super) fn add_at(
    op: &'static str,
    src: &CpuStorage,
    dst: &mut CpuStorage,
    pairs: impl ExactSizeIterator<Item = (usize, usize)>,
    repeats: bool,
) -> Result<()> {
    if let (CpuStorage::I64(s), CpuStorage::I64(d)) = (src, &mut *dst) {
        for (o, i) in pairs {
            d[o] = d[o].wrapping_add(s[i]);
        }
        return Ok(());
    }
    let mut adds = crate::host_alloc::try_collect(op, pairs.map(|(o, i)| (o, src.get_f64(i))))?;
    // Many addends into a destination not much larger (an embedding's
    // backward) sum in a dense f64 buffer, in the pairs' order: the same
    // additions as the sorted road, without the sort.
    if repeats && dst.len() <= adds.len().saturating_mul(4) {
        let mut acc = crate::host_alloc::try_filled(op, dst.len(), f64::NAN)?;
        let mut seen = crate::host_alloc::try_filled(op, dst.len(), false)?;
        crate::dispatch_cpu!(dst, d => {
            for &(o, v) in &adds {
                if !std::mem::replace(&mut seen[o], true) {
                    acc[o] = d[o].to_f64();
                }
                acc[o] += v;
            }
            for ((x, &a), &s) in d.iter_mut().zip(&acc).zip(&seen) {
                if s {
                    *x = WithDType::from_f64(a);
                }
            }
        });
        return Ok(());
    }
    if repeats {
        adds.sort_by_key(|&(o, _)| o);
    }
    crate::dispatch_cpu!(dst, d => {
        let mut i = 0;
        while i < adds.len() {
            let o = adds[i].0;
            let mut acc = d[o].to_f64();
            while i < adds.len() && adds[i].0 == o {
                acc += adds[i].1;
                i += 1;
            }
            d[o] = WithDType::from_f64(acc);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_scatter_add_is_exact() {
        let big = (1i64 << 60) + 1;
        let src = CpuStorage::I64(vec![big, 1, -3]);
        let mut dst = CpuStorage::I64(vec![big, 0]);
        // All three addends into position 0 (stride 0), in order.
        scatter_add(&src, &Layout::contiguous(&[3]), &mut dst, &Layout::new(vec![3], vec![0], 0)).unwrap();
        assert_eq!(dst, CpuStorage::I64(vec![big.wrapping_add(big) - 2, 0]));
    }

    /// Repeated positions sum in the pairs' order, in f64, rounded once per
    /// position: the dense buffer (a destination at most four times the
    /// addends) and the sorted road (a larger one) give the same f32 bits.
    #[test]
    fn repeated_float_addends_sum_alike_on_both_roads() {
        let src: Vec<f32> = (0..64).map(|i| 1.0e-8 + (i as f32) * 0.37 - 11.0).collect();
        let positions: Vec<usize> = (0..64).map(|i| (i * 7) % 5).collect();
        for len in [5, 1000] {
            let mut dst = CpuStorage::F32((0..len).map(|i| i as f32 * 0.5).collect());
            let pairs = positions.iter().copied().zip(0..src.len());
            add_at("scatter_add", &CpuStorage::F32(src.clone()), &mut dst, pairs, true).unwrap();
            let CpuStorage::F32(got) = dst else { panic!("dtype changed") };
            for (o, &g) in got.iter().enumerate() {
                let mut want = o as f64 * 0.5;
                for (&p, &v) in positions.iter().zip(&src) {
                    if p == o {
                        want += f64::from(v);
                    }
                }
                assert_eq!(g, want as f32, "position {o} of {len}");
            }
        }
    }
}
