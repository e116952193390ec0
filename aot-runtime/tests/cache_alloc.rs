//! The specialisation cache's hit path allocates nothing: a counting global
//! allocator (its own test binary, so that no other test shares it) counts
//! the allocations of this thread while the guard key of a call is
//! computed and looked up.

use aot_runtime::prelude::*;
use aot_runtime::CompiledFn;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    // `const` and without a destructor: usable from inside the allocator,
    // never lazily initialised (which could itself allocate).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with` fails only while the thread is torn down; nothing to count then.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments,
// so `System`'s guarantees carry over; counting touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How many allocations this thread made while running `f`.
fn allocations_in<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (r, ALLOCATIONS.with(Cell::get) - before)
}

/// Reads only: its key leaves out the alias pattern.
#[aot_fn]
fn scaled_dot(x: &Tensor, y: &Tensor, s: f64) -> Tensor {
    (x * y).sum() * s
}

/// Writes an input: its key compares every pair of tensor arguments.
#[aot_fn]
fn axpy(dst: &mut Tensor, x: &Tensor, y: &Tensor, a: f64) {
    dst.add_(x * a + y);
}

/// Warms the cache with one call, then checks that the guard and lookup of
/// the next call with the same pattern hit and allocate nothing.
fn assert_hit_allocates_nothing(f: &CompiledFn, args: &[Arg], what: &str) {
    assert!(!aot_runtime::testing::cache_probe(f, args), "{what}: cold cache");
    f.__call(args).expect("warm-up call");
    let (hit, n) = allocations_in(|| aot_runtime::testing::cache_probe(f, args));
    assert!(hit, "{what}: the warm-up call should have cached its specialisation");
    assert_eq!(n, 0, "{what}: a cache hit allocated {n} times");
    // The counter does see this thread's allocations: a whole call makes outputs.
    let (_, n) = allocations_in(|| f.__call(args).expect("call"));
    assert!(n > 0, "{what}: a whole call allocated nothing?");
}

#[test]
fn a_cache_hit_allocates_nothing() -> Result<()> {
    let dev = Device::Cpu;
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2], &dev)?;
    let y = Tensor::ones(&[2, 2], DType::F64, &dev)?;
    let f = scaled_dot::compiled();
    assert_hit_allocates_nothing(f, &[Arg::from(&x), Arg::from(&y), Arg::from(0.5)], "scaled_dot");
    // Arguments that require grad, and a view, with grad mode on and off.
    let w = Tensor::ones(&[2, 2], DType::F64, &dev)?.requires_grad_(true)?;
    let row = x.narrow(0, 1, 1)?;
    assert_hit_allocates_nothing(f, &[Arg::from(&w), Arg::from(&row), Arg::from(2.0)], "scaled_dot, grad");
    let args = [Arg::from(&row), Arg::from(&w), Arg::from(2.0)];
    aot_runtime::no_grad(|| assert_hit_allocates_nothing(f, &args, "scaled_dot, no_grad"));

    // A mutating function: distinct storages, then one tensor passed twice.
    let dst = Tensor::zeros(&[2, 2], DType::F64, &dev)?;
    let g = axpy::compiled();
    assert_hit_allocates_nothing(g, &[Arg::from(&dst), Arg::from(&x), Arg::from(&y), Arg::from(3.0)], "axpy");
    assert_hit_allocates_nothing(g, &[Arg::from(&dst), Arg::from(&x), Arg::from(&x), Arg::from(3.0)], "axpy, x twice");
    // The calls computed what they should: dst = 2 * (3x + y) + 2 * (3x + x).
    let expect: Vec<f64> = [1.0, 2.0, 3.0, 4.0].iter().map(|v| 2.0 * (3.0 * v + 1.0) + 2.0 * (4.0 * v)).collect();
    assert_eq!(dst.to_vec::<f64>()?, expect);
    Ok(())
}

/// W1: six tiny inputs, two written in place, one add returned.
#[aot_fn]
fn w1(a: &mut Tensor, b: &mut Tensor, c: &Tensor, d: &Tensor, e: &Tensor, f: &Tensor) -> Tensor {
    a.add_(c);
    b.add_(d);
    e + f
}

/// Heap allocations of one new tensor: its buffer, its storage and the
/// tensor object (a layout of up to `INLINE_DIMS` dims is held inline).
const PER_TENSOR: usize = 3;

#[test]
fn a_w1_call_allocates_only_its_tensors() -> Result<()> {
    let dev = Device::Cpu;
    let t = |s: u64| Tensor::randn(&[4], DType::F32, &dev, s);
    let (mut a, mut b, c, d, e, f) = (t(0)?, t(1)?, t(2)?, t(3)?, t(4)?, t(5)?);
    let (a0, b0) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    w1(&mut a, &mut b, &c, &d, &e, &f)?;
    let args = [Arg::from(&a), Arg::from(&b), Arg::from(&c), Arg::from(&d), Arg::from(&e), Arg::from(&f)];
    let (hit, n) = allocations_in(|| aot_runtime::testing::cache_probe(w1::compiled(), &args));
    assert!(hit && n == 0, "the guard and lookup of a W1 call allocated {n} times");
    let (out, n) = allocations_in(|| w1(&mut a, &mut b, &c, &d, &e, &f));
    // The output tensor and nothing else: the value table and the list of
    // outputs are held inline, and the two writes need no copies (they
    // wait for the epilogue and go straight to the caller's storage).
    assert_eq!(n, PER_TENSOR, "a warmed-up W1 call allocated {n} times, not just its output tensor");
    // And it computed W1, twice on the written inputs.
    let twice = |x0: &[f32], y: &Tensor| -> Result<Vec<f32>> { Ok(x0.iter().zip(y.to_vec::<f32>()?).map(|(x, y)| x + y + y).collect()) };
    assert_eq!(a.to_vec::<f32>()?, twice(&a0, &c)?);
    assert_eq!(b.to_vec::<f32>()?, twice(&b0, &d)?);
    assert_eq!(out?.to_vec::<f32>()?, e.add(&f)?.to_vec::<f32>()?);
    Ok(())
}

/// W1's three ops run eagerly: the two in-place adds (nothing recorded)
/// write straight into their targets, and the add makes one tensor, whose
/// layout (also after a view op) is held inline.
#[test]
fn small_eager_ops_allocate_only_their_tensors() -> Result<()> {
    let dev = Device::Cpu;
    let t = |s: u64| Tensor::randn(&[2, 3], DType::F32, &dev, s);
    let (a, c, e, f) = (t(0)?, t(1)?, t(2)?, t(3)?);
    let (a0, c0) = (a.to_vec::<f32>()?, c.to_vec::<f32>()?);
    let v0 = a.version();
    let (r, n) = allocations_in(|| a.add_(&c));
    r?;
    assert_eq!(n, 0, "an in-place add that records nothing allocated {n} times");
    assert_eq!(a.version(), v0 + 1, "one write, one version bump");
    assert_eq!(a.to_vec::<f32>()?, a0.iter().zip(&c0).map(|(x, y)| x + y).collect::<Vec<_>>());
    // A broadcast operand (through a view of the target) is written directly too.
    let row = Tensor::randn(&[3], DType::F32, &dev, 9)?;
    let at = a.t()?;
    let before = a.to_vec::<f32>()?;
    let v = at.t()?;
    let (r, n) = allocations_in(|| v.sub_(&row));
    r?;
    // The general kernel computes the broadcast op into a scratch buffer
    // and copies it over the target: no tensor is made.
    assert!(n < PER_TENSOR, "an in-place sub of a broadcast operand allocated {n} times");
    let row0 = row.to_vec::<f32>()?;
    let expect: Vec<f32> = before.iter().enumerate().map(|(i, x)| x - row0[i % 3]).collect();
    assert_eq!(a.to_vec::<f32>()?, expect);
    let (out, n) = allocations_in(|| e.add(&f));
    assert_eq!(n, PER_TENSOR, "an eager add allocated {n} times");
    let expect: Vec<f32> = e.to_vec::<f32>()?.iter().zip(f.to_vec::<f32>()?).map(|(x, y)| x + y).collect();
    assert_eq!(out?.to_vec::<f32>()?, expect);
    Ok(())
}
