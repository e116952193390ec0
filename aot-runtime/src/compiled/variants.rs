//! Functions whose body branches on `bool` parameters (`if training { .. }`)
//! are traced once per combination of those parameters' values; the values
//! are part of the call's guard, and each variant is a complete
//! [`CompiledFn`] with its own specialisation cache. The compiled function
//! the macro hands out holds the variants and forwards every call to the
//! one the call's switch arguments select.

use super::CompiledFn;
use crate::arg::Arg;
use crate::error::{AotError, Result};

#[derive(Clone, Debug)]
pub(crate) struct Variants {
    /// The switch parameters' positions among the call's arguments.
    switch_args: Vec<usize>,
    /// Variant `k` was traced with switch `j` equal to bit `j` of `k`.
    fns: Vec<CompiledFn>,
}

impl Variants {
    pub(crate) fn new(fns: Vec<CompiledFn>, switch_args: &[usize]) -> Option<Variants> {
        (fns.len() == 1usize.checked_shl(switch_args.len() as u32)?).then(|| Variants { switch_args: switch_args.to_vec(), fns })
    }

    /// The variant a call with these arguments runs.
    pub(crate) fn pick(&self, args: &[Arg]) -> Result<&CompiledFn> {
        let mut k = 0;
        for (j, &p) in self.switch_args.iter().enumerate() {
            match args.get(p) {
                Some(Arg::Bool(true)) => k |= 1 << j,
                Some(Arg::Bool(false)) => {}
                other => {
                    return Err(AotError::Signature {
                        func: self.fns[0].graph.name.clone(),
                        msg: format!(
                            "argument {p} chooses a branch and must be a bool, but {} was passed",
                            other.map_or("nothing", Arg::kind)
                        ),
                    });
                }
            }
        }
        Ok(&self.fns[k])
    }

    /// Every variant, in order.
    pub(crate) fn all(&self) -> &[CompiledFn] {
        &self.fns
    }
}
