//! Argument templates: a description of a call's arguments, with the alias
//! structure between them, that can be materialised any number of times into
//! independent sets of tensors (fresh storages, same values, same sizes,
//! strides and offsets, same sharing between arguments).
//!
//! A template is a list of storages and, per argument, where its tensor comes
//! from: a storage's base tensor itself, an `as_strided` view of a storage's
//! base, the very tensor of an earlier argument, or a scalar. The generator
//! [`gen_template`] draws every alias pattern the differential tests need:
//! independent tensors, non-contiguous inputs (permuted, strided, padded
//! rows), inputs with a storage offset, the same tensor passed twice, views of
//! one base (overlapping and disjoint), a base passed next to views of it,
//! and (on the CPU) a view of a storage's bytes as another dtype next to the
//! storage's own arguments.

mod generate;

pub use generate::{gen_template, TemplateOptions};

use crate::progen::{contiguous_strides, numel};
use aot_runtime::{Arg, DType, Result, Tensor};
use std::fmt;

/// One storage of a template.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageSpec {
    /// Number of elements.
    pub len: usize,
    /// The shape of the base tensor (contiguous over the whole storage);
    /// `None` for a flat `[len]` base that no argument is.
    pub base_shape: Option<Vec<usize>>,
    /// The base requires grad (a leaf, or a value computed from one: see
    /// `state`).
    pub requires_grad: bool,
    /// Values are `value(seed, i)`.
    pub seed: usize,
    /// How the base and the views of it got their autograd state.
    pub state: GradState,
    /// A dtype other than the template's (a bad argument).
    pub dtype: Option<DType>,
}

/// The autograd history of a storage's base and of the arguments that view
/// it: the ordinary one, and the unusual states a hostile caller can build
/// (each a state eager autograd judges differently on an in-place write).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GradState {
    /// The base is a leaf; `requires_grad` is set before any view is taken.
    #[default]
    Plain,
    /// Views are taken first, then the base gets `requires_grad_(true)`:
    /// the views do not require grad until the storage is written.
    ViewsBeforeRequiresGrad,
    /// The views are made under `no_grad` (after `requires_grad_`).
    NoGradViews,
    /// Views made under `no_grad`; then the base gains history in place
    /// (`base.mul_(one)` with `one` a leaf that requires grad).
    NoGradViewsThenHistory,
    /// Views made with grad on; then the base gains history in place.
    ViewsThenHistory,
    /// The base is a non-leaf (`leaf * 1`) that requires grad.
    NonLeafBase,
}

impl GradState {
    /// Every unusual state, for the generator.
    pub const UNUSUAL: [GradState; 5] = [
        GradState::ViewsBeforeRequiresGrad,
        GradState::NoGradViews,
        GradState::NoGradViewsThenHistory,
        GradState::ViewsThenHistory,
        GradState::NonLeafBase,
    ];

    fn name(self) -> &'static str {
        match self {
            GradState::Plain => "plain",
            GradState::ViewsBeforeRequiresGrad => "views taken before requires_grad_",
            GradState::NoGradViews => "views made under no_grad",
            GradState::NoGradViewsThenHistory => "no_grad views, then the base gained history",
            GradState::ViewsThenHistory => "views, then the base gained history",
            GradState::NonLeafBase => "a non-leaf base",
        }
    }
}

/// Where one argument comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgSpec {
    /// The base tensor of this storage itself.
    Base(usize),
    /// `base.as_strided(size, stride, offset)` of this storage's base.
    View {
        storage: usize,
        size: Vec<usize>,
        stride: Vec<usize>,
        offset: usize,
    },
    /// `base.storage_as_1d().view_dtype(dtype).as_strided(size, stride,
    /// offset)`: the storage's bytes as another dtype (geometry in its
    /// elements).
    DtypeView {
        storage: usize,
        dtype: DType,
        size: Vec<usize>,
        stride: Vec<usize>,
        offset: usize,
    },
    /// The very tensor passed as the argument at this index.
    Same(usize),
    Scalar(f64),
}

/// A description of a call's arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgTemplate {
    pub dtype: DType,
    pub storages: Vec<StorageSpec>,
    pub args: Vec<ArgSpec>,
}

/// The value of element `i` of a storage with `seed`: distinct, of mixed
/// signs, of magnitude below 2.
pub fn value(seed: usize, i: usize) -> f64 {
    1.7 * (0.37 * i as f64 + 0.71 * seed as f64 + 0.1).sin()
}

/// One materialisation of a template.
#[derive(Clone, Debug)]
pub struct Materialised {
    /// The base tensor of each storage.
    pub bases: Vec<Tensor>,
    /// The tensor of each argument (`None` for scalars).
    pub tensors: Vec<Option<Tensor>>,
    pub scalars: Vec<Option<f64>>,
    /// Leaves that are not storage bases (the leaf under a non-leaf base,
    /// the factor a base gained history from), whose gradients count too.
    pub leaves: Vec<Tensor>,
}

impl Materialised {
    /// The call's arguments.
    pub fn args(&self) -> Vec<Arg<'_>> {
        self.tensors
            .iter()
            .zip(&self.scalars)
            .map(|(t, s)| match (t, s) {
                (Some(t), _) => Arg::from(t),
                (None, s) => Arg::from(s.unwrap_or(0.0)),
            })
            .collect()
    }
}

impl ArgTemplate {
    /// Fresh tensors with the template's values, layouts, sharing and
    /// autograd states.
    pub fn materialise(&self) -> Result<Materialised> {
        let dev = crate::test_device();
        let mut bases = Vec::with_capacity(self.storages.len());
        let mut leaves = vec![];
        for s in &self.storages {
            let vals: Vec<f64> = (0..s.len).map(|i| value(s.seed, i)).collect();
            let shape = s.base_shape.clone().unwrap_or_else(|| vec![s.len]);
            let base = match s.dtype.unwrap_or(self.dtype) {
                DType::F32 => Tensor::from_vec(vals.iter().map(|&v| v as f32).collect::<Vec<f32>>(), &shape, &dev)?,
                DType::F64 => Tensor::from_vec(vals, &shape, &dev)?,
                other => Tensor::from_vec(vals, &shape, &dev)?.to_dtype(other)?,
            };
            let base = match s.state {
                _ if !s.requires_grad => base,
                GradState::Plain | GradState::NoGradViews => base.requires_grad_(true)?,
                GradState::NonLeafBase => {
                    leaves.push(base.requires_grad_(true)?);
                    base.mul(1.0)?
                }
                _ => base,
            };
            bases.push(base);
        }
        let mut tensors: Vec<Option<Tensor>> = Vec::with_capacity(self.args.len());
        let mut scalars = Vec::with_capacity(self.args.len());
        for a in &self.args {
            let (t, s) = match a {
                ArgSpec::Base(k) => (Some(bases[*k].clone()), None),
                ArgSpec::View { storage, size, stride, offset } => {
                    let no_grad = matches!(self.storages[*storage].state, GradState::NoGradViews | GradState::NoGradViewsThenHistory);
                    let v = if no_grad {
                        aot_runtime::no_grad(|| bases[*storage].as_strided(size, stride, *offset))?
                    } else {
                        bases[*storage].as_strided(size, stride, *offset)?
                    };
                    (Some(v), None)
                }
                ArgSpec::DtypeView { storage, dtype, size, stride, offset } => {
                    (Some(bases[*storage].storage_as_1d().view_dtype(*dtype)?.as_strided(size, stride, *offset)?), None)
                }
                ArgSpec::Same(j) => (tensors[*j].clone(), None),
                ArgSpec::Scalar(v) => (None, Some(*v)),
            };
            tensors.push(t);
            scalars.push(s);
        }
        // The states that change after the views were taken.
        for (s, base) in self.storages.iter().zip(&bases) {
            match s.state {
                _ if !s.requires_grad => {}
                GradState::ViewsBeforeRequiresGrad => {
                    base.requires_grad_(true)?;
                }
                GradState::NoGradViewsThenHistory | GradState::ViewsThenHistory => {
                    let one = Tensor::ones(&[1], self.dtype, &dev)?.requires_grad_(true)?;
                    base.mul_(&one)?;
                    leaves.push(one);
                }
                _ => {}
            }
        }
        Ok(Materialised { bases, tensors, scalars, leaves })
    }

    /// The storage elements argument `j` covers, and its storage.
    fn elements(&self, j: usize) -> Option<(usize, std::collections::BTreeSet<usize>)> {
        match &self.args[j] {
            ArgSpec::Base(k) => Some((*k, (0..self.storages[*k].len).collect())),
            ArgSpec::View { storage, size, stride, offset } => {
                let mut set = std::collections::BTreeSet::new();
                let n = numel(size);
                for flat in 0..n {
                    let (mut rem, mut off) = (flat, *offset);
                    for d in (0..size.len()).rev() {
                        off += (rem % size[d]) * stride[d];
                        rem /= size[d];
                    }
                    set.insert(off);
                }
                Some((*storage, set))
            }
            ArgSpec::Same(i) => self.elements(*i),
            // In other units: counted as its own feature.
            ArgSpec::DtypeView { .. } | ArgSpec::Scalar(_) => None,
        }
    }

    /// The alias features of the pattern, for coverage statistics.
    pub fn features(&self) -> Vec<&'static str> {
        let mut f = vec![];
        for (j, a) in self.args.iter().enumerate() {
            match a {
                ArgSpec::Same(_) => f.push("same tensor twice"),
                ArgSpec::Scalar(_) => f.push("scalar"),
                ArgSpec::Base(_) => {}
                ArgSpec::DtypeView { .. } => f.push("dtype views of one storage"),
                ArgSpec::View { size, stride, offset, .. } => {
                    let contiguous = size.iter().zip(stride).zip(contiguous_strides(size)).all(|((&n, &s), c)| n <= 1 || s == c);
                    if !contiguous {
                        f.push("non-contiguous input");
                    }
                    if *offset > 0 {
                        f.push("storage offset > 0");
                    }
                }
            }
            for i in 0..j {
                if matches!(a, ArgSpec::Same(_)) || matches!(self.args[i], ArgSpec::Same(_)) {
                    continue;
                }
                if let (Some((si, ei)), Some((sj, ej))) = (self.elements(i), self.elements(j)) {
                    if si == sj {
                        let base = matches!(a, ArgSpec::Base(_)) || matches!(self.args[i], ArgSpec::Base(_));
                        f.push(match (base, ei.is_disjoint(&ej)) {
                            (true, _) => "a base and a view of it",
                            (false, true) => "disjoint views of one storage",
                            (false, false) => "overlapping views of one storage",
                        });
                    }
                }
            }
        }
        if self.requires_grad() {
            f.push("requires_grad");
        }
        for s in self.storages.iter().filter(|s| s.state != GradState::Plain) {
            f.push(s.state.name());
        }
        if f.is_empty() || f == ["scalar"] {
            f.push("independent contiguous tensors only");
        }
        f.sort_unstable();
        f.dedup();
        f
    }

    /// Whether any storage requires grad.
    pub fn requires_grad(&self) -> bool {
        self.storages.iter().any(|s| s.requires_grad)
    }
}

impl fmt::Display for ArgTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "dtype {:?}", self.dtype)?;
        for (k, s) in self.storages.iter().enumerate() {
            write!(f, "storage s{k}: {} elements (seed {})", s.len, s.seed)?;
            if let Some(d) = s.dtype {
                write!(f, ", dtype {d:?}")?;
            }
            match &s.base_shape {
                Some(shape) => write!(f, ", base shape {shape:?}")?,
                None => write!(f, ", flat base")?,
            }
            if s.requires_grad {
                write!(f, ", requires_grad")?;
            }
            if s.state != GradState::Plain {
                write!(f, ", {}", s.state.name())?;
            }
            writeln!(f)?;
        }
        for (j, a) in self.args.iter().enumerate() {
            match a {
                ArgSpec::Base(k) => writeln!(f, "arg {j}: s{k} (the base tensor itself)")?,
                ArgSpec::View { storage, size, stride, offset } => {
                    writeln!(f, "arg {j}: s{storage}.as_strided({size:?}, {stride:?}, {offset})")?
                }
                ArgSpec::DtypeView { storage, dtype, size, stride, offset } => {
                    writeln!(f, "arg {j}: s{storage}'s bytes as {dtype:?}, as_strided(size {size:?}, stride {stride:?}, offset {offset})")?
                }
                ArgSpec::Same(i) => writeln!(f, "arg {j}: the same tensor as arg {i}")?,
                ArgSpec::Scalar(v) => writeln!(f, "arg {j}: {v:?}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materialisations_are_independent_and_alike() {
        let tpl = ArgTemplate {
            dtype: DType::F64,
            storages: vec![StorageSpec {
                len: 6,
                base_shape: Some(vec![2, 3]),
                requires_grad: false,
                seed: 0,
                state: GradState::Plain,
                dtype: None,
            }],
            args: vec![
                ArgSpec::Base(0),
                ArgSpec::View { storage: 0, size: vec![3], stride: vec![1], offset: 2 },
                ArgSpec::Same(0),
                ArgSpec::Scalar(0.5),
            ],
        };
        let a = tpl.materialise().unwrap();
        let b = tpl.materialise().unwrap();
        let ta: Vec<&Tensor> = a.tensors.iter().flatten().collect();
        let tb: Vec<&Tensor> = b.tensors.iter().flatten().collect();
        assert!(ta[0].shares_storage_with(ta[1]) && ta[0].same_tensor(ta[2]));
        assert!(!ta[0].shares_storage_with(tb[0]));
        assert_eq!(ta[1].to_vec::<f64>().unwrap(), tb[1].to_vec::<f64>().unwrap());
        assert_eq!(ta[1].storage_offset(), 2);
        assert_eq!(a.args().len(), 4);
    }
}
