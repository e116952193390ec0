use aot_runtime::prelude::*;

const LAYERS: usize = 2;

mod model {
    pub const LAYERS: usize = 2;
}

#[aot_fn]
fn g(x: &mut Tensor) {
    for _ in 0..LAYERS {
        x.mul_(2.0);
    }
}

#[aot_fn]
fn h(x: &mut Tensor) {
    for _ in 0..=model::LAYERS {
        x.mul_(2.0);
    }
}

fn main() {
    let _ = (LAYERS, model::LAYERS);
}
