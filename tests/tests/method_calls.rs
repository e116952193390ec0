//! Calls between `#[aot_fn]` methods: `self.mlp(x)` inside a method, and `Block::forward(&self.blk,
//! x)` for a method of a field's type, are inlined like calls of free
//! functions. Each compiled call is checked against the same computation
//! written with eager ops.

use aot_runtime::prelude::*;

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    let (g, w) = (vals(got), vals(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, &Device::Cpu, seed).expect("randn")
}

#[derive(TensorTree)]
struct Block {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Block {
    #[aot_fn]
    fn mlp(&self, x: &Tensor) -> Tensor {
        (x.matmul(&self.w1) + self.b1).relu().matmul(&self.w2)
    }

    /// A residual block: calls `mlp` on itself.
    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.mlp(x);
        x + h
    }

    #[aot_fn]
    fn shrink_(&mut self, s: f64) {
        self.w1.mul_(s);
        self.w2.mul_(s);
    }

    /// Writes through a method of `&mut self`, then reads the written
    /// weights through another.
    #[aot_fn]
    fn shrink_then_forward(&mut self, x: &Tensor, s: f64) -> Tensor {
        self.shrink_(s);
        self.forward(x)
    }

    fn eager_forward(&self, x: &Tensor) -> Result<Tensor> {
        x.add(&x.matmul(&self.w1)?.add(&self.b1)?.relu()?.matmul(&self.w2)?)
    }

    fn copy(&self) -> Result<Block> {
        Ok(Block { w1: self.w1.copy()?, b1: self.b1.copy()?, w2: self.w2.copy()? })
    }
}

fn block(seed: u64) -> Block {
    Block { w1: randn(&[3, 4], seed), b1: randn(&[4], seed + 1), w2: randn(&[4, 3], seed + 2) }
}

#[derive(TensorTree)]
struct Model {
    blk: Block,
    head: Tensor,
}

impl Model {
    /// A method of a field's type, called through its type.
    #[aot_fn]
    fn loss(&self, x: &Tensor) -> Tensor {
        let h = Block::forward(&self.blk, x);
        h.matmul(&self.head).square().mean()
    }
}

#[test]
fn a_method_calls_a_method_of_self() -> Result<()> {
    let b = block(1);
    let x = randn(&[2, 3], 9);
    assert_close("forward", &b.forward(&x)?, &b.eager_forward(&x)?);
    // Inlined: the traced program holds no call, and its inputs are the
    // fields the callee reads.
    let g = Block::forward_compiled().graph().to_string();
    assert!(!g.contains("call"), "{g}");
    let sig = Block::forward_compiled().graph_signature(&[Arg::tree(&b), Arg::from(&x)])?;
    let sig = serde_json::to_value(&sig).expect("json");
    assert_eq!(sig["parameters"], serde_json::json!(["self.w1", "self.b1", "self.w2"]));
    Ok(())
}

#[test]
fn a_mutating_method_writes_the_callers_fields() -> Result<()> {
    let mut b = block(3);
    let want_block = b.copy()?;
    want_block.w1.mul_(0.5)?;
    want_block.w2.mul_(0.5)?;
    let x = randn(&[2, 3], 10);
    let y = b.shrink_then_forward(&x, 0.5)?;
    assert_close("w1 written", &b.w1, &want_block.w1);
    assert_close("w2 written", &b.w2, &want_block.w2);
    assert_close("b1 untouched", &b.b1, &want_block.b1);
    assert_close("forward after the write", &y, &want_block.eager_forward(&x)?);
    Ok(())
}

#[test]
fn a_field_method_called_through_its_type_gives_gradients() -> Result<()> {
    let m = Model { blk: block(5), head: randn(&[3, 2], 8) };
    let e = Model { blk: m.blk.copy()?, head: m.head.copy()? };
    for t in [&m.blk.w1, &m.blk.b1, &m.blk.w2, &m.head] {
        t.requires_grad_(true)?;
    }
    let x = randn(&[2, 3], 11);
    let loss = m.loss(&x)?;
    loss.backward()?;

    for t in [&e.blk.w1, &e.blk.b1, &e.blk.w2, &e.head] {
        t.requires_grad_(true)?;
    }
    let want = e.blk.eager_forward(&x)?.matmul(&e.head)?.square()?.mean()?;
    want.backward()?;
    assert_close("loss", &loss, &want);
    for (name, got, w) in
        [("w1", &m.blk.w1, &e.blk.w1), ("b1", &m.blk.b1, &e.blk.b1), ("w2", &m.blk.w2, &e.blk.w2), ("head", &m.head, &e.head)]
    {
        let (g, w) = (got.grad(), w.grad());
        assert!(g.is_some() && w.is_some(), "{name}: compiled grad {}, eager grad {}", g.is_some(), w.is_some());
        assert_close(name, &g.expect("grad"), &w.expect("grad"));
    }
    let sig = Model::loss_compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x)])?;
    let sig = serde_json::to_value(&sig).expect("json");
    assert_eq!(sig["parameters"], serde_json::json!(["self.blk.w1", "self.blk.b1", "self.blk.w2", "self.head"]));
    Ok(())
}
