//! The template generator: draws, from a [`Choices`] stream, the storages
//! and argument sources of a call to a program's parameters (see the
//! module docs of [`crate::alias`] for the patterns).

use super::{ArgSpec, ArgTemplate, GradState, StorageSpec};
use crate::choice::Choices;
use crate::progen::{contiguous_strides, extent, numel, ParamSpec};
use aot_runtime::DType;

/// Knobs of the template generator.
#[derive(Clone, Debug, Default)]
pub struct TemplateOptions {
    /// Chance, in percent, that a storage's base requires grad.
    pub requires_grad_percent: u32,
    /// Chance, in percent, that a storage is in an unusual autograd state
    /// ([`GradState::UNUSUAL`]).
    pub unusual_state_percent: u32,
    /// Chance, in percent, that the call gets one bad argument: a tensor of
    /// another shape, or a scalar that is not finite or is huge.
    pub bad_arg_percent: u32,
    /// Chance, in percent, that one argument becomes a dtype view (the
    /// dtype of half the element size) of a storage another argument
    /// uses: two arguments over one storage as different dtypes.
    pub dtype_view_percent: u32,
}

/// A layout of `shape`: contiguous, permuted, every other element, with
/// padded rows, or (rarely) expanded along one dim (stride 0, elements that
/// overlap: writes to it are refused). Returns strides.
fn gen_strides(c: &mut Choices, shape: &[usize]) -> Vec<usize> {
    let r = shape.len();
    match c.weighted(&[30, 30, 20, 20, 3]) {
        4 if r > 0 => {
            let mut s = contiguous_strides(shape);
            let d = c.below(r);
            s[d] = 0;
            s
        }
        0 => contiguous_strides(shape),
        1 => {
            // The layout of `base.permute(p)` for a contiguous base, read back:
            // a transposed input when r == 2.
            let p = if r == 2 { vec![1, 0] } else { c.permutation(r) };
            let base_shape: Vec<usize> = p.iter().map(|&k| shape[k]).collect();
            let base_strides = contiguous_strides(&base_shape);
            let mut stride = vec![0; r];
            for (pos, &k) in p.iter().enumerate() {
                stride[k] = base_strides[pos];
            }
            stride
        }
        2 => contiguous_strides(shape).into_iter().map(|s| s * 2).collect(),
        _ => {
            // Rows padded by one or two elements (a slice of a wider matrix).
            let mut padded = shape.to_vec();
            if let Some(last) = padded.last_mut() {
                *last += 1 + c.below(2);
            }
            let mut s = contiguous_strides(&padded);
            if let Some(last) = s.last_mut() {
                *last = 1;
            }
            s
        }
    }
}

/// Per storage: how far its arguments reach, and whether it can still grow.
struct Place {
    used: usize,
    growable: bool,
}

/// The template being drawn: its storages, how far each is used, and the
/// arguments so far.
struct Builder<'o> {
    opts: &'o TemplateOptions,
    storages: Vec<StorageSpec>,
    places: Vec<Place>,
    args: Vec<ArgSpec>,
    /// For each argument: its storage, when it is a tensor.
    arg_storage: Vec<Option<usize>>,
    next_seed: usize,
}

/// Draws an alias pattern for the parameters of a program.
pub fn gen_template(c: &mut Choices, params: &[ParamSpec], dtype: DType, opts: &TemplateOptions) -> ArgTemplate {
    let mut t = Builder { opts, storages: vec![], places: vec![], args: vec![], arg_storage: vec![], next_seed: 0 };
    for (j, p) in params.iter().enumerate() {
        match p {
            ParamSpec::Scalar { value } => t.push_arg(ArgSpec::Scalar(*value), None),
            ParamSpec::Tensor { shape, .. } => t.tensor_arg(c, params, j, shape.clone()),
        }
    }
    let mut tpl = ArgTemplate { dtype, storages: t.storages, args: t.args };
    if opts.dtype_view_percent > 0 && c.chance(opts.dtype_view_percent, 100) {
        dtype_view_one_arg(c, &mut tpl);
    }
    if opts.bad_arg_percent > 0 && c.chance(opts.bad_arg_percent, 100) {
        spoil_one_arg(c, &mut tpl);
    }
    tpl
}

impl Builder<'_> {
    fn push_arg(&mut self, arg: ArgSpec, storage: Option<usize>) {
        self.args.push(arg);
        self.arg_storage.push(storage);
    }

    /// A new storage (its base may require grad, its state is drawn).
    fn new_storage(&mut self, c: &mut Choices, len: usize, base_shape: Option<Vec<usize>>, place: Place) -> usize {
        let requires_grad = self.opts.requires_grad_percent > 0 && c.chance(self.opts.requires_grad_percent, 100);
        let state = gen_state(c, self.opts);
        self.storages.push(StorageSpec { len, base_shape, requires_grad, seed: self.next_seed, state, dtype: None });
        self.places.push(place);
        self.next_seed += 1;
        self.storages.len() - 1
    }

    /// Argument `j`, a tensor of `shape`: one of the alias patterns.
    fn tensor_arg(&mut self, c: &mut Choices, params: &[ParamSpec], j: usize, shape: Vec<usize>) {
        let n = numel(&shape);
        // Earlier tensor arguments of the same shape (not themselves `Same`).
        let dups: Vec<usize> = (0..j)
            .filter(|&i| params[i].shape() == Some(&shape[..]) && matches!(self.args[i], ArgSpec::Base(_) | ArgSpec::View { .. }))
            .collect();
        let earlier: Vec<usize> = (0..self.storages.len()).collect();
        let base_candidates: Vec<usize> =
            earlier.iter().copied().filter(|&s| self.places[s].growable && n >= self.places[s].used).collect();
        let kind = c.weighted(&[
            4,                                              // fresh contiguous base
            3,                                              // fresh storage, strided / offset view
            if dups.is_empty() { 0 } else { 3 },            // the same tensor again
            if earlier.is_empty() { 0 } else { 4 },         // a view of an earlier storage
            if base_candidates.is_empty() { 0 } else { 1 }, // the base of earlier views
        ]);
        match kind {
            1 => self.fresh_view(c, shape),
            2 => {
                let i = *c.pick(&dups);
                self.push_arg(ArgSpec::Same(i), self.arg_storage[i]);
            }
            3 => {
                let s = *c.pick(&earlier);
                self.view_of(c, s, shape);
            }
            4 => {
                let s = *c.pick(&base_candidates);
                self.storages[s].len = n;
                self.storages[s].base_shape = Some(shape);
                self.places[s].growable = false;
                self.places[s].used = n;
                self.push_arg(ArgSpec::Base(s), Some(s));
            }
            _ => self.push_base(c, shape),
        }
    }

    /// A strided view, maybe with an offset, of a fresh storage.
    fn fresh_view(&mut self, c: &mut Choices, shape: Vec<usize>) {
        let s = self.new_storage(c, 0, None, Place { used: 0, growable: true });
        let stride = gen_strides(c, &shape);
        let offset = c.below(3);
        let end = extent(&shape, &stride, offset);
        let len = end + c.below(2);
        self.storages[s].len = len;
        self.places[s].used = end;
        self.push_arg(ArgSpec::View { storage: s, size: shape, stride, offset }, Some(s));
    }

    /// A view of storage `s`, disjoint from or overlapping what its earlier
    /// arguments use; a fresh base when it does not fit in a fixed storage.
    fn view_of(&mut self, c: &mut Choices, s: usize, shape: Vec<usize>) {
        let mut stride = gen_strides(c, &shape);
        let mut ext = extent(&shape, &stride, 0);
        let growable = self.places[s].growable;
        if !growable && ext > self.storages[s].len {
            stride = contiguous_strides(&shape);
            ext = extent(&shape, &stride, 0);
        }
        if !growable && ext > self.storages[s].len {
            // Does not fit in that base: a fresh base instead.
            return self.push_base(c, shape);
        }
        let offset = if growable {
            if c.chance(1, 2) {
                // disjoint: after everything placed so far
                self.places[s].used + c.below(2)
            } else {
                // overlapping: somewhere in what is used
                c.below(self.places[s].used.max(1))
            }
        } else {
            c.below(self.storages[s].len - ext + 1)
        };
        let end = offset + ext;
        if growable {
            self.storages[s].len = self.storages[s].len.max(end);
        }
        self.places[s].used = self.places[s].used.max(end);
        self.push_arg(ArgSpec::View { storage: s, size: shape, stride, offset }, Some(s));
    }

    /// A fresh contiguous base of `shape`, passed itself.
    fn push_base(&mut self, c: &mut Choices, shape: Vec<usize>) {
        let n = numel(&shape);
        let s = self.new_storage(c, n, Some(shape), Place { used: n, growable: false });
        self.push_arg(ArgSpec::Base(s), Some(s));
    }
}

/// Makes one tensor argument a contiguous view, as the dtype of half the
/// element size (f64 as f32, f32 as f16), of the bytes of a storage another
/// argument uses, at an offset drawn over those bytes: it and that argument
/// share a storage as different dtypes.
fn dtype_view_one_arg(c: &mut Choices, tpl: &mut ArgTemplate) {
    let half = match tpl.dtype {
        DType::F64 => DType::F32,
        DType::F32 => DType::F16,
        _ => return,
    };
    let storage_of = |a: &ArgSpec| match a {
        ArgSpec::Base(k) | ArgSpec::View { storage: k, .. } => Some(*k),
        _ => None,
    };
    let mut pairs = vec![];
    for j in (0..tpl.args.len()).filter(|&j| storage_of(&tpl.args[j]).is_some()) {
        for (i, b) in tpl.args.iter().enumerate() {
            match storage_of(b) {
                Some(s) if i != j && tpl.storages[s].dtype.is_none() && !pairs.contains(&(j, s)) => pairs.push((j, s)),
                _ => {}
            }
        }
    }
    if pairs.is_empty() {
        return;
    }
    let (j, s) = *c.pick(&pairs);
    let Some(size) = arg_shape(tpl, j) else { return };
    let (n, avail) = (numel(&size), 2 * tpl.storages[s].len);
    if n > avail {
        return;
    }
    let offset = c.below(avail - n + 1);
    let stride = contiguous_strides(&size);
    tpl.args[j] = ArgSpec::DtypeView { storage: s, dtype: half, size, stride, offset };
}

/// The shape argument `j` has in the template.
fn arg_shape(tpl: &ArgTemplate, j: usize) -> Option<Vec<usize>> {
    match &tpl.args[j] {
        ArgSpec::Base(k) => Some(tpl.storages[*k].base_shape.clone().unwrap_or_else(|| vec![tpl.storages[*k].len])),
        ArgSpec::View { size, .. } | ArgSpec::DtypeView { size, .. } => Some(size.clone()),
        ArgSpec::Same(i) => arg_shape(tpl, *i),
        ArgSpec::Scalar(_) => None,
    }
}

fn gen_state(c: &mut Choices, opts: &TemplateOptions) -> GradState {
    if opts.unusual_state_percent > 0 && c.chance(opts.unusual_state_percent, 100) {
        *c.pick(&GradState::UNUSUAL)
    } else {
        GradState::Plain
    }
}

/// Replaces one argument with a bad one: a fresh tensor of a shape the
/// program did not ask for (one more or one fewer dim, a size changed, an
/// empty size) or of another dtype, or a scalar that is NaN, infinite or
/// huge.
fn spoil_one_arg(c: &mut Choices, tpl: &mut ArgTemplate) {
    if tpl.args.is_empty() {
        return;
    }
    let j = c.below(tpl.args.len());
    if let ArgSpec::Scalar(v) = &mut tpl.args[j] {
        *v = *c.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300, 9.223372036854776e18, 0.0]);
        return;
    }
    // Keep the same-tensor links consistent: later `Same(j)` follow the new tensor.
    let shape: Vec<usize> = match c.below(4) {
        0 => vec![],
        1 => vec![2, 1, 3],
        2 => vec![0, 2],
        _ => vec![5],
    };
    // Or the expected shape in another dtype.
    let (shape, dtype) = match (c.chance(1, 3), arg_shape(tpl, j)) {
        (true, Some(expected)) => (expected, Some(*c.pick(&[DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool]))),
        _ => (shape, None),
    };
    let n = numel(&shape);
    let seed = tpl.storages.len() + 100;
    let requires_grad = c.chance(1, 3) && dtype.unwrap_or(tpl.dtype).is_float();
    tpl.storages.push(StorageSpec { len: n, base_shape: Some(shape), requires_grad, seed, state: GradState::Plain, dtype });
    tpl.args[j] = ArgSpec::Base(tpl.storages.len() - 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use aot_runtime::Tensor;

    #[test]
    fn generated_templates_materialise() {
        let params = vec![
            ParamSpec::Tensor { shape: vec![2, 3], mutable: true },
            ParamSpec::Scalar { value: 1.0 },
            ParamSpec::Tensor { shape: vec![2, 3], mutable: false },
            ParamSpec::Tensor { shape: vec![3], mutable: true },
        ];
        for seed in 0..500u32 {
            let data: Vec<u32> = (0..64).map(|k| seed.wrapping_mul(2654435761).wrapping_add(k * 40503) >> 7).collect();
            let tpl = gen_template(
                &mut Choices::new(&data),
                &params,
                DType::F32,
                &TemplateOptions { requires_grad_percent: 20, unusual_state_percent: 30, ..Default::default() },
            );
            let m = tpl.materialise().unwrap_or_else(|e| panic!("{tpl}: {e}"));
            for (p, t) in params.iter().zip(&m.tensors) {
                assert_eq!(p.shape().map(<[usize]>::to_vec), t.as_ref().map(Tensor::shape), "{tpl}");
            }
        }
    }
}
