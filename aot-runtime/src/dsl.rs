//! The `#[aot_fn]` DSL reference: what the body of a compiled function may
//! contain, its parameters and return forms, and every op, with examples.
//!
//! This module holds documentation only. Compile errors of `#[aot_fn]`
//! point here. The op table at the end (`dsl/ops.md`) is checked against
//! the IR's op table (`aot_ir::op::OP_TABLE`) by a test, so it lists every
//! op.
//!
//! # A function
//!
//! `#[aot_fn]` traces the function at compile time into a graph, analyses
//! its mutations and aliasing as PyTorch's AOTAutograd does, and replaces
//! the body by a call to the runtime. The function returns
//! `aot_runtime::Result` of its declared type; gradients flow through it
//! when an argument requires grad.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn f(a: &mut Tensor, b: &Tensor, lr: f64) -> (Tensor, Tensor) {
//!     a.mul_(2.0);
//!     let c = a + b * lr;
//!     (c, a.view(&[-1]))
//! }
//!
//! let mut a = Tensor::ones(&[2, 2], DType::F32, &Device::Cpu)?;
//! let b = Tensor::full(&[2, 2], 3.0, DType::F32, &Device::Cpu)?;
//! let (c, v) = f(&mut a, &b, 0.5)?;
//! assert_eq!(c.to_vec::<f32>()?, vec![3.5; 4]);
//! assert_eq!(v.shape(), vec![4]);
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Parameters
//!
//! - `&Tensor`, and `&mut Tensor` for a tensor the body mutates (data or
//!   metadata; an in-place op on a `&Tensor` parameter is a compile error).
//! - Scalars `f64`, `f32`, `i64`, `usize`, `bool`. They stay parameters of
//!   the graph: a call with another value reuses the same compiled code
//!   (except `bool`s that choose a branch, below).
//! - `&S` / `&mut S` for a struct `S` that derives
//!   [`TensorTree`](crate::TensorTree): the fields the body reads
//!   (`m.w1`, `m.layers[0].b`) become graph inputs named by their paths.
//! - `&self` / `&mut self` in an `impl` block of such a struct (see
//!   [Methods](#methods)).
//! - `&S` for a tensor subclass `S` (see [Tensor subclasses](#tensor-subclasses)).
//!
//! # Return forms
//!
//! - nothing: the function returns `Result<()>`;
//! - `Tensor`; a tuple `(Tensor, Tensor, ..)`; `Vec<Tensor>`, with a
//!   `vec![a, b]` tail expression;
//! - a struct of tensors, built by a struct literal at the end of the body
//!   (its non-tensor fields, if any, given as literals).
//!
//! Returning an input returns that very tensor (same identity); the same
//! tensor may be returned twice.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn parts(x: &Tensor) -> Vec<Tensor> {
//!     vec![x.exp(), x.narrow(0, 0, 1), x]
//! }
//!
//! let x = Tensor::zeros(&[3], DType::F64, &Device::Cpu)?;
//! let out = parts(&x)?;
//! assert_eq!(out.len(), 3);
//! assert!(out[2].same_tensor(&x));
//! # Ok::<(), AotError>(())
//! ```
//!
//! # The body
//!
//! - `let` bindings (with or without `mut`; an in-place op needs no `mut`),
//!   `name = value;` to a `let mut` binding, expression statements (in-place
//!   calls, which may be chained: `buf.mul_(m).add_(g)`), and a tail
//!   expression;
//! - operators `+ - * /` and unary `-` between tensors and scalars (either
//!   side), `!` on a `bool` parameter;
//! - method calls from the [op table](#ops), `Tensor::cat(&[&a, &b], 0)`
//!   / `Tensor::stack(..)`, and `Tensor::arange(..)` (see
//!   [Ranges](#ranges));
//! - `no_grad! { .. }` blocks, which may end in an expression that is their
//!   value;
//! - `for i in a..b` / `a..=b` loops, unrolled as the macro expands, or
//!   per call when a bound is a parameter or a size (`i` is an integer
//!   usable as a dim or index; see [Loops](#loops));
//! - `if flag { .. } else { .. }` on a `bool` parameter (below);
//! - `&` on operands is accepted and ignored (`a.add(&b)` is `a.add(b)`), and
//!   so is `*` (`&*buf`, as plain Rust reborrows a `&mut Tensor`).
//!
//! - `let blk = &m.blocks[l];` names a part of a struct parameter: read
//!   its fields through the name (`blk.w`), or use it as the tensor it is
//!   (`let w = &m.w1;`); the graph input is still named `m.blocks.1.w`;
//!
//! `.clone()` on a tensor is a compile error: write `.copy()` for a copy of
//! the data (PyTorch's `clone()`). Closures, `match`, `while`, `?`,
//! `return` and other items are compile errors pointing at the tokens.
//! Unread `let` bindings, loop variables and parameters get rustc's
//! `unused_variables` warning, as in plain Rust.
//!
//! # Loops
//!
//! A `for` loop over a range of integers runs its body that many times,
//! as in Rust; the graph holds the body unrolled. When the bounds are
//! known as the macro expands (integer literals, `let` names bound to
//! them, an outer such loop's variable and arithmetic on these: `for j in
//! i + 1..4`), the macro unrolls it. When they are known only at call time
//! (a scalar parameter or a size: `0..n`, `0..x.size(1)`, `1..=h.size(0)`
//! of a tensor the body computes), the body is traced once and the
//! runtime unrolls it for each call's trip count: one specialisation per
//! count, built on the first call with it and cached, so `explain()`,
//! `kernels()`, `graph_for(&args)` and training see the unrolled program
//! (`graph()` shows the loop, `for t in 0..x.size(1) over (..)`). Such a
//! loop may write outer tensors in place (`out.select(0, i).copy_(..)`),
//! reassign outer tensors (`h = ..`: the value carried to the next
//! iteration), call other `#[aot_fn]`s and nest; a trip count of 0 leaves
//! everything as it was. It may not reassign a scalar, nor index a `Vec`
//! field with its variable (`m.blocks[t]`: fields are resolved as the
//! macro expands), both compile errors. A loop whose end is below its
//! start, or one that would unroll to more than 50,000 ops, is an
//! `AotError` at the call, before anything is written.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn rnn(x: &Tensor, h0: &Tensor, wx: &Tensor, wh: &Tensor) -> Tensor {
//!     let mut h = h0.copy();
//!     for t in 0..x.size(1) {
//!         h = (x.select(1, t).matmul(wx) + h.matmul(wh)).tanh();
//!     }
//!     h
//! }
//!
//! let ones = |s: &[usize]| Tensor::ones(s, DType::F32, &Device::Cpu);
//! let (h0, wx, wh) = (Tensor::zeros(&[1, 2], DType::F32, &Device::Cpu)?, ones(&[3, 2])?, ones(&[2, 2])?.mul(0.0)?);
//! // 4 steps, then 7 steps: two specialisations of one function.
//! for steps in [4, 7] {
//!     let h = rnn(&ones(&[1, steps, 3])?, &h0, &wx, &wh)?;
//!     assert_eq!(h.to_vec::<f32>()?, vec![3f32.tanh(); 2]);
//! }
//! # Ok::<(), AotError>(())
//! ```
//!
//! A `const` item as a bound (`0..LAYERS`) is a compile error: a macro
//! sees only the function's tokens, not other items. Write the literal and
//! keep it in step with the constant by an assertion beside the function,
//! `const _: () = assert!(LAYERS == 2);`, or pass the count as a parameter.
//! The variable of a loop with literal bounds may index a `Vec` field:
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! const LAYERS: usize = 2;
//! const _: () = assert!(LAYERS == 2);
//!
//! #[derive(TensorTree)]
//! struct Block { w: Tensor, b: Tensor }
//! #[derive(TensorTree)]
//! struct Model { blocks: Vec<Block> }
//!
//! #[aot_fn]
//! fn forward(m: &Model, x: &Tensor) -> Tensor {
//!     let mut h = x.relu();
//!     for l in 0..2 {
//!         let blk = &m.blocks[l];
//!         h = h.matmul(&blk.w) + blk.b;
//!     }
//!     h
//! }
//!
//! let blk = || -> Result<Block> { Ok(Block { w: Tensor::ones(&[2, 2], DType::F32, &Device::Cpu)?, b: Tensor::ones(&[2], DType::F32, &Device::Cpu)? }) };
//! let m = Model { blocks: (0..LAYERS).map(|_| blk()).collect::<Result<_>>()? };
//! let x = Tensor::ones(&[1, 2], DType::F32, &Device::Cpu)?;
//! assert_eq!(forward(&m, &x)?.to_vec::<f32>()?, vec![7.0, 7.0]);
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Scalars
//!
//! Scalar parameters and literals combine with `+ - * /`, `as f64` /
//! `as i64` (and the other numeric casts), the methods of Rust's numbers
//! `sqrt exp ln log2 log10 sin cos tan tanh floor ceil round recip abs
//! powi powf min max`, and the constants `f64::consts::*` (also
//! `std::f64::consts::PI`), `f64::EPSILON`, `f64::INFINITY`,
//! `f64::NEG_INFINITY` (or `-f64::INFINITY`), `f64::MAX` and friends (a
//! causal mask: `att.masked_fill(&mask, f64::NEG_INFINITY)`). They are
//! evaluated at call time, with Rust's rules (integer arithmetic stays
//! integer; `powi` takes an integer exponent, `i64` or
//! `i32`). A method may also be called as in `f64::powi(b2, t)`. An AdamW
//! step with bias correction:
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn adamw(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, lr: f64, b1: f64, b2: f64, wd: f64, t: i64) {
//!     let bc1 = 1.0 - b1.powi(t);
//!     let bc2 = 1.0 - b2.powi(t);
//!     p.mul_(1.0 - lr * wd);
//!     m.mul_(b1).add_(&(g * (1.0 - b1)));
//!     v.mul_(b2).add_(&(g * g * (1.0 - b2)));
//!     p.sub_(&(m / (v.sqrt() / bc2.sqrt() + 1e-8) * (lr / bc1)));
//! }
//!
//! let z = || Tensor::zeros(&[2], DType::F64, &Device::Cpu);
//! let (mut p, mut m, mut v) = (Tensor::ones(&[2], DType::F64, &Device::Cpu)?, z()?, z()?);
//! let g = Tensor::full(&[2], 0.5, DType::F64, &Device::Cpu)?;
//! adamw(&mut p, &g, &mut m, &mut v, 0.1, 0.9, 0.999, 0.0, 1)?;
//! // The first bias-corrected step moves each element by about `lr`.
//! assert!(p.to_vec::<f64>()?.iter().all(|x| (x - 0.9).abs() < 1e-6));
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Sizes
//!
//! `x.size(d)` and `x.shape()[d]` (`d` an integer literal or loop variable,
//! negative from the end) are integers known at call time: use them in
//! `view`, `reshape`, `narrow`, .. arguments and in scalar arithmetic.
//! - Of a tensor parameter, or of a field of a struct parameter, the size
//!   is read from the call's argument.
//! - Of a tensor the body computes (`logits.size(-1)`), or of a parameter
//!   after an in-place change of its shape (`t_()`), the size is what the
//!   shapes of the call's arguments give at that point of the body: the
//!   runtime propagates them through the ops before the call runs (no
//!   value is computed for it), so a call whose shapes do not fit fails
//!   before anything is written, with the op's own shape error.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn split_heads(x: &Tensor, heads: i64) -> Tensor {
//!     let (b, t) = (x.size(0), x.size(1));
//!     x.view(&[b, t, heads, x.shape()[2] / heads]).transpose(1, 2)
//! }
//!
//! #[aot_fn]
//! fn lm_loss(h: &Tensor, w: &Tensor, targets: &Tensor) -> Tensor {
//!     let logits = h.matmul(w);
//!     logits.reshape(&[-1, logits.size(-1)]).cross_entropy(&targets.flatten(0, -1))
//! }
//!
//! let x = Tensor::zeros(&[2, 5, 8], DType::F32, &Device::Cpu)?;
//! assert_eq!(split_heads(&x, 4)?.shape(), vec![2, 4, 5, 2]);
//! let w = Tensor::zeros(&[8, 3], DType::F32, &Device::Cpu)?;
//! let targets = Tensor::zeros(&[2, 5], DType::I64, &Device::Cpu)?;
//! // Uniform logits over 3 classes: the loss is ln 3.
//! let loss = lm_loss(&x, &w, &targets)?.to_vec::<f32>()?[0];
//! assert!((loss - 3f32.ln()).abs() < 1e-6);
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Ranges
//!
//! `Tensor::arange` makes a tensor from scalars alone, with
//! `torch.arange`'s semantics: the values `start + i * step` below `end`
//! (above it for a negative step), `ceil((end - start) / step)` of them.
//! Its bounds are scalar expressions evaluated at call time (literals,
//! scalar parameters, `x.size(d)`, arithmetic on them), so the length may
//! change from call to call with the same compiled code. The forms:
//!
//! - `Tensor::arange(start, end, step, DType::I64, &x.device())`: the
//!   eager function's own arguments;
//! - PyTorch's short forms `Tensor::arange(end)`, `(start, end)`,
//!   `(start, end, step)` and `(start, end, step, dtype)`: start 0, step 1;
//!   the dtype is `I64` when every bound written is an integer, else
//!   `F32` (PyTorch's default dtype).
//!
//! The result lives on the device of `&x.device()` when it is given, else
//! on the device of the function's tensor arguments (a call's tensors
//! share one device; the first tensor parameter is read for it, and for
//! nothing else: it does not count as a use of that input, and rustc
//! warns of a parameter used that way only, as of any unused one: name it
//! `_x`). A function without tensor parameters cannot make one: that is a
//! compile error.
//! A step of 0, a step whose sign points away from `end`, or a range too
//! long to allocate is an error of the call naming the function and the
//! op. The result never requires grad.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn causal_softmax(att: &Tensor) -> Tensor {
//!     let i = Tensor::arange(0, att.size(-1));
//!     let mask = i.unsqueeze(0).gt(&i.unsqueeze(1));
//!     att.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1)
//! }
//!
//! #[aot_fn]
//! fn ramp(x: &Tensor, step: f64) -> Tensor {
//!     Tensor::arange(0.0, x.size(0) as f64, step, DType::F64, &x.device()) * x.sum()
//! }
//!
//! let att = Tensor::zeros(&[2, 2], DType::F32, &Device::Cpu)?;
//! assert_eq!(causal_softmax(&att)?.to_vec::<f32>()?, vec![1.0, 0.0, 0.5, 0.5]);
//! let x = Tensor::ones(&[3], DType::F64, &Device::Cpu)?;
//! assert_eq!(ramp(&x, 1.5)?.to_vec::<f64>()?, vec![0.0, 4.5]);
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Branches
//!
//! `if` takes a `bool` parameter (or `!` of one) as its condition: the
//! function is traced once for each combination of the values of such
//! parameters (at most 4 of them), and each call runs the variant its
//! arguments select; the value is part of the call's guard. A branch on a
//! tensor's values cannot be traced (the values are not known when
//! tracing): select elementwise with `a.where_(&cond, &other)`.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn block(x: &Tensor, training: bool) -> Tensor {
//!     let h = x.relu();
//!     if training { h.dropout(0.1) } else { h }
//! }
//!
//! let x = Tensor::ones(&[4], DType::F32, &Device::Cpu)?;
//! assert_eq!(block(&x, false)?.to_vec::<f32>()?, vec![1.0; 4]);
//! let args = [Arg::from(&x), Arg::from(true)];
//! assert!(block::compiled().graph_for(&args)?.to_string().contains("dropout"));
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Methods
//!
//! `#[aot_fn]` on a method with `&self` or `&mut self` of a struct that
//! derives [`TensorTree`](crate::TensorTree): `self.w` reads a field, and
//! `&mut self` allows in-place updates of the fields. The compiled form is
//! the associated function `NAME_compiled()` (an `impl` block cannot hold
//! the struct `NAME` that a free function gets). Associated functions
//! without `self` are not supported inside `impl` blocks: make them free
//! functions.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[derive(TensorTree)]
//! struct Linear {
//!     w: Tensor,
//!     b: Tensor,
//! }
//!
//! impl Linear {
//!     #[aot_fn]
//!     fn forward(&self, x: &Tensor) -> Tensor {
//!         x.matmul(&self.w) + self.b
//!     }
//! }
//!
//! let lin = Linear { w: Tensor::ones(&[3, 2], DType::F32, &Device::Cpu)?, b: Tensor::ones(&[2], DType::F32, &Device::Cpu)? };
//! let x = Tensor::ones(&[1, 3], DType::F32, &Device::Cpu)?;
//! assert_eq!(lin.forward(&x)?.to_vec::<f32>()?, vec![4.0, 4.0]);
//! let sig = Linear::forward_compiled().graph_signature(&[Arg::tree(&lin), Arg::from(&x)])?;
//! assert_eq!(sig.parameters, vec!["self.w".to_string(), "self.b".to_string()]);
//! # Ok::<(), AotError>(())
//! ```
//!
//! # Calls between functions
//!
//! A body may call another `#[aot_fn]` function by name or path
//! (`gelu_mlp(&x, &w, 0.5)`, `layers::block(&h, &m.blocks[l])`): the
//! callee's graph is inlined into the caller's when `NAME::compiled()` is
//! first built, so [`graph`](crate::CompiledFn::graph) lists the callee's
//! nodes (their `let` names read `callee::name`), and `explain()`,
//! `kernels()` (fusion crosses the call), calls and gradients are those of
//! the same program written in one body. It behaves as if the callee's
//! body were written in place:
//! - a tensor passed `&mut` is written by the callee (the caller's
//!   parameter must itself be `&mut Tensor`: passing `&mut x` for an
//!   `x: &Tensor` is a compile error), and a callee returning its
//!   argument returns that very tensor;
//! - scalars are the caller's scalar expressions, evaluated at call time;
//!   a `bool` that the callee branches on must be a literal or a `bool`
//!   parameter of the caller (the caller is traced for each of its values);
//! - a struct argument is a field path of the caller's struct parameter
//!   (`&m.blocks[l]`, or `blk` after `let blk = &m.blocks[l];`);
//! - the result is bound as a tensor, a tuple (`let (a, b) = split(&x);`),
//!   or not at all (`step(&mut p, &g, lr);`);
//! - a callee that reads `x.size(d)` of a tensor the caller computes gets
//!   that tensor's size, propagated at call time (see "Sizes");
//! - in a method, `self.other(&x)` calls the `#[aot_fn]` method `other`
//!   with `self` (a `&self` method may call only `&self` methods, as in
//!   plain Rust), and `Block::forward(&self.blk, &x)` calls a method of a
//!   field's type through the type (`self.blk.forward(..)` cannot name
//!   the method's traced graph without the type: the compile error says
//!   so). A path whose last but one segment is capitalised names a type.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[derive(TensorTree)]
//! struct Block {
//!     w: Tensor,
//! }
//!
//! impl Block {
//!     #[aot_fn]
//!     fn project(&self, x: &Tensor) -> Tensor {
//!         x.matmul(&self.w)
//!     }
//!
//!     #[aot_fn]
//!     fn forward(&self, x: &Tensor) -> Tensor {
//!         x + self.project(x).relu()
//!     }
//! }
//!
//! #[derive(TensorTree)]
//! struct Model {
//!     blk: Block,
//! }
//!
//! impl Model {
//!     #[aot_fn]
//!     fn forward(&self, x: &Tensor) -> Tensor {
//!         Block::forward(&self.blk, x).tanh()
//!     }
//! }
//!
//! let m = Model { blk: Block { w: Tensor::ones(&[2, 2], DType::F32, &Device::Cpu)? } };
//! let x = Tensor::ones(&[1, 2], DType::F32, &Device::Cpu)?;
//! assert_eq!(m.forward(&x)?.to_vec::<f32>()?, vec![3.0f32.tanh(); 2]);
//! # Ok::<(), AotError>(())
//! ```
//!
//! rustc checks each call against the callee's signature, at the call:
//! the number of arguments, `&` where it takes `&mut`, a tensor where it
//! takes a scalar, the result's form. Only `#[aot_fn]` functions can be
//! called (their graph is what gets inlined); a function calling itself is
//! a compile error, and a cycle through several functions is an
//! [`AotError::Signature`](crate::AotError::Signature) naming it, from
//! every call.
//! # Tensor subclasses
//!
//! A struct that derives [`TensorTree`](crate::TensorTree) and is marked
//! `#[tensor_subclass]` stands for one tensor made of inner tensors (its
//! `Tensor` fields) and non-tensor attributes (its `#[skip]` fields); see
//! [`subclass`](crate::subclass). As a parameter it is unwrapped into its
//! inner tensors (`w.q`, `w.scale`: the graph sees only plain tensors, and
//! gradients reach the inner tensors that require grad). A function that
//! returns it builds it with a struct literal whose attributes are
//! literals (`bits: 8`), recorded when the body is traced and given to
//! every result. Changing the metadata of an inner tensor in place
//! (`w.q.t_()`) is a compile error, as PyTorch refuses it.
//!
//! ```
//! use aot_runtime::prelude::*;
//!
//! #[aot_fn]
//! fn gelu_mlp(x: &Tensor, w: &Tensor, s: f64) -> Tensor {
//!     x.matmul(w).gelu() * s
//! }
//!
//! #[aot_fn]
//! fn sgd(p: &mut Tensor, g: &Tensor, lr: f64) {
//!     p.sub_(&(g * lr));
//! }
//!
//! #[aot_fn]
//! fn step(x: &Tensor, w: &mut Tensor, g: &Tensor, lr: f64) -> Tensor {
//!     let y = gelu_mlp(&x, &w, 0.5);
//!     sgd(&mut w, &g, lr * 2.0);
//!     y
//! }
//!
//! let x = Tensor::ones(&[1, 2], DType::F32, &Device::Cpu)?;
//! let mut w = Tensor::ones(&[2, 2], DType::F32, &Device::Cpu)?;
//! let g = Tensor::ones(&[2, 2], DType::F32, &Device::Cpu)?;
//! let y = step(&x, &mut w, &g, 0.25)?;
//! assert_eq!(w.to_vec::<f32>()?, vec![0.5; 4]);
//! assert_eq!(y.shape(), vec![1, 2]);
//! let listing = step::compiled().graph().to_string();
//! assert!(listing.contains("gelu(") && listing.contains("sub_("), "{listing}");
//! #[derive(TensorTree)]
//! #[tensor_subclass]
//! struct Int8Weight {
//!     q: Tensor,
//!     scale: Tensor,
//!     #[skip]
//!     bits: u8,
//! }
//!
//! #[aot_fn]
//! fn quantize(w: &Tensor) -> Int8Weight {
//!     let scale = w.abs().amax_dim(&[1], false) / 127.0;
//!     Int8Weight { q: (w / scale.unsqueeze(1)).to_dtype(DType::I64), scale, bits: 8 }
//! }
//!
//! #[aot_fn]
//! fn qmatmul(x: &Tensor, w: &Int8Weight) -> Tensor {
//!     x.matmul(&(w.q.to_dtype(DType::F32) * w.scale.unsqueeze(1)).t())
//! }
//!
//! let w = Tensor::from_vec(vec![127.0f32, -63.5, -254.0, 127.0], &[2, 2], &Device::Cpu)?;
//! let qw = quantize(&w)?;
//! assert_eq!(qw.bits, 8);
//! assert_eq!(qw.q.to_vec::<i64>()?, [127, -63, -127, 63]);
//! let qw = Int8Weight { scale: qw.scale.requires_grad_(true)?, ..qw };
//! let x = Tensor::ones(&[1, 2], DType::F32, &Device::Cpu)?;
//! qmatmul(&x, &qw)?.sum()?.backward()?;
//! assert!(qw.scale.grad().is_some() && qw.q.grad().is_none());
//! assert_eq!(qmatmul::compiled().graph().params[1].name, "w.q");
//! # Ok::<(), AotError>(())
//! ```
//!
//! # A renamed dependency
//!
//! The generated code names the runtime `::aot_runtime`. When the
//! dependency is renamed, say so as with serde's `#[serde(crate = ..)]`:
//! `#[aot_fn(crate = my_aot)]` (or `crate = "my_aot"`).
//!
//! # Introspection
//!
//! For `#[aot_fn] fn NAME`, `NAME::compiled()` is the
//! [`CompiledFn`](crate::CompiledFn): [`graph`](crate::CompiledFn::graph)
//! (the traced IR; its `Display` is a listing),
//! [`explain`](crate::CompiledFn::explain) (PyTorch's metadata for a call),
//! [`graph_signature`](crate::CompiledFn::graph_signature),
//! [`kernels`](crate::CompiledFn::kernels) and
//! [`call_path`](crate::CompiledFn::call_path) (whether a call runs the
//! inference path, compiled training, or the eager reference).
#![doc = ""]
#![doc = include_str!("dsl/ops.md")]

#[cfg(test)]
mod tests {
    /// Every row of the IR's op table is listed here, with its usage.
    #[test]
    fn every_op_is_documented() {
        let doc = [include_str!("dsl.rs"), include_str!("dsl/ops.md")].concat();
        for sig in aot_ir::op::OP_TABLE {
            let row = format!("| `{}` | `{}` |", sig.name, sig.usage.replace('|', "\\|"));
            assert!(doc.contains(&row), "the `aot_runtime::dsl` docs lack the op `{}` (row `{row}`)", sig.name);
        }
        for f in aot_ir::ScalarFn::ALL {
            let name = f.name();
            assert!(doc.contains(&format!(" {name}")) || doc.contains(&format!("`{name}")), "the docs lack the scalar method `{name}`");
        }
    }
}
