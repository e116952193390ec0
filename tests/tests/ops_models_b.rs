//! The "ops for models", part B: `index_select`, `gather`, `scatter_add`,
//! `embedding`, `index_copy_`/`index_add_`, `Tensor::cat` and
//! `Tensor::stack`.
//!
//! - Eager values against hand-computed ones, negative dims included.
//! - Errors (out-of-range and negative indices, index dtypes, shapes) are
//!   `AotError`s naming the op, in eager and compiled calls, and an
//!   in-place op that fails has written nothing.
//! - Gradients: eager and compiled against central finite differences of
//!   the loss `sum(out * w)`, in f64, and compiled against eager.
//! - A KV cache: a compiled function writing `cache.index_copy_(1, &pos,
//!   &kv)` into a `&mut Tensor` equals eager, call after call.

use aot_runtime::prelude::*;
use aot_runtime::Arg;

fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap()
}

fn ids(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// 0, 1, 2, .. as f64 in `shape`.
fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f64s(&(0..n).map(|i| i as f64).collect::<Vec<_>>(), shape)
}

fn op_of(e: &AotError) -> String {
    e.to_string()
}

// ---------------------------------------------------------------------------
// Eager values

#[test]
fn index_select_picks_slices_in_index_order() {
    let x = iota(&[3, 4]);
    let rows = x.index_select(0, &ids(&[2, 0, 2], &[3])).unwrap();
    assert_eq!(rows.shape(), &[3, 4]);
    assert_eq!(vals(&rows), vec![8., 9., 10., 11., 0., 1., 2., 3., 8., 9., 10., 11.]);
    let cols = x.index_select(-1, &ids(&[3, 1], &[2])).unwrap();
    assert_eq!(cols.shape(), &[3, 2]);
    assert_eq!(vals(&cols), vec![3., 1., 7., 5., 11., 9.]);
    // a strided receiver and a strided index
    let xt = x.t().unwrap();
    let idx = ids(&[1, 9, 0, 9], &[4]).slice(0, 0, 4, 2).unwrap();
    assert_eq!(vals(&xt.index_select(0, &idx).unwrap()), vec![1., 5., 9., 0., 4., 8.]);
    // an empty index
    assert_eq!(x.index_select(1, &ids(&[], &[0])).unwrap().shape(), &[3, 0]);
}

#[test]
fn gather_follows_the_index_shape() {
    let x = iota(&[2, 3]);
    let g = x.gather(1, &ids(&[2, 0, 1, 1], &[2, 2])).unwrap();
    assert_eq!(g.shape(), &[2, 2]);
    assert_eq!(vals(&g), vec![2., 0., 4., 4.]);
    let g0 = x.gather(-2, &ids(&[1, 0, 1], &[1, 3])).unwrap();
    assert_eq!(vals(&g0), vec![3., 1., 5.]);
}

#[test]
fn scatter_add_accumulates_repeated_positions() {
    let x = f64s(&[1.0; 6], &[2, 3]);
    let src = iota(&[2, 3]);
    let out = x.scatter_add(1, &ids(&[0, 0, 2, 1, 1, 1], &[2, 3]), &src).unwrap();
    assert_eq!(vals(&out), vec![1. + 0. + 1., 1., 1. + 2., 1., 1. + 3. + 4. + 5., 1.]);
    // a smaller index uses the matching corner of src; x is untouched
    let out = x.scatter_add(0, &ids(&[1, 0], &[1, 2]), &src).unwrap();
    assert_eq!(vals(&out), vec![1., 2., 1., 1., 1., 1.]);
    assert_eq!(vals(&x), vec![1.0; 6]);
}

#[test]
fn embedding_gathers_rows_for_ids_of_any_shape() {
    let w = iota(&[4, 2]);
    let e = ids(&[3, 0, 1, 3], &[2, 2]).embedding(&w).unwrap();
    assert_eq!(e.shape(), &[2, 2, 2]);
    assert_eq!(vals(&e), vec![6., 7., 0., 1., 2., 3., 6., 7.]);
    let one = ids(&[2], &[]).embedding(&w).unwrap();
    assert_eq!((one.shape(), vals(&one)), (vec![2], vec![4., 5.]));
}

#[test]
fn index_copy_and_index_add_in_place() {
    let x = Tensor::zeros(&[2, 4], DType::F32, &Device::Cpu).unwrap();
    let src = Tensor::from_vec(vec![1.0f32, 2., 3., 4.], &[2, 2], &Device::Cpu).unwrap();
    let r = x.index_copy_(1, &ids(&[3, 0], &[2]), &src).unwrap();
    assert!(r.same_tensor(&x));
    assert_eq!(vals(&x), vec![2., 0., 0., 1., 4., 0., 0., 3.]);
    x.index_add_(-1, &ids(&[3, 3], &[2]), &src).unwrap();
    assert_eq!(vals(&x), vec![2., 0., 0., 4., 4., 0., 0., 10.]);
    // out of place: the receiver is unchanged
    let y = x.index_add(0, &ids(&[1], &[1]), &Tensor::ones(&[1, 4], DType::F32, &Device::Cpu).unwrap()).unwrap();
    assert_eq!(vals(&y), vec![2., 0., 0., 4., 5., 1., 1., 11.]);
    assert_eq!(vals(&x), vec![2., 0., 0., 4., 4., 0., 0., 10.]);
    // into a view: the base sees the write
    let base = Tensor::zeros(&[3, 3], DType::F64, &Device::Cpu).unwrap();
    base.narrow(0, 1, 2).unwrap().index_copy_(1, &ids(&[1], &[1]), &f64s(&[7., 8.], &[2, 1])).unwrap();
    assert_eq!(vals(&base), vec![0., 0., 0., 0., 7., 0., 0., 8., 0.]);
}

#[test]
fn cat_and_stack_join_and_promote() {
    let a = iota(&[2, 2]);
    let b = Tensor::from_vec(vec![10.0f32, 11.], &[2, 1], &Device::Cpu).unwrap();
    let c = Tensor::cat(&[&a, &b], -1).unwrap();
    assert_eq!((c.shape(), c.dtype()), (vec![2, 3], DType::F64));
    assert_eq!(vals(&c), vec![0., 1., 10., 2., 3., 11.]);
    let r = Tensor::cat(&[&a, &a.t().unwrap()], 0).unwrap();
    assert_eq!(vals(&r), vec![0., 1., 2., 3., 0., 2., 1., 3.]);
    let s = Tensor::stack(&[&a, &a.mul(2.0).unwrap()], 1).unwrap();
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(vals(&s), vec![0., 1., 0., 2., 2., 3., 4., 6.]);
    let s = Tensor::stack(&[&a, &a], -1).unwrap();
    assert_eq!((s.shape(), vals(&s)), (vec![2, 2, 2], vec![0., 0., 1., 1., 2., 2., 3., 3.]));
    let i = Tensor::cat(&[&ids(&[1], &[1]), &ids(&[2, 3], &[2])], 0).unwrap();
    assert_eq!((i.dtype(), i.to_vec::<i64>().unwrap()), (DType::I64, vec![1, 2, 3]));
}

#[test]
fn cat_skips_one_dim_empty_tensors_beside_others() {
    let empty = Tensor::zeros(&[0], DType::F32, &Device::Cpu).unwrap();
    let a = iota(&[2, 2]);
    let c = Tensor::cat(&[&empty, &a, &empty], 1).unwrap();
    assert_eq!((c.shape(), c.dtype(), vals(&c)), (vec![2, 2], DType::F64, vals(&a)));
    let only = Tensor::cat(&[&empty, &empty], 0).unwrap();
    assert_eq!(only.shape(), &[0]);
    // not for stack, and not for other empty shapes
    assert!(Tensor::stack(&[&empty, &a], 0).is_err());
    assert!(Tensor::cat(&[&Tensor::zeros(&[0, 2], DType::F64, &Device::Cpu).unwrap(), &iota(&[2])], 0).is_err());
    gradcheck("cat with an empty", &|l| Tensor::cat(&[&l[1], &l[0], &l[1]], 0).unwrap(), &[leaf(14, &[2, 3]), leaf(15, &[0])]);
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn bad_indices_and_shapes_are_errors_naming_the_op() {
    let x = iota(&[2, 3]);
    let cases: Vec<(&str, AotError)> = vec![
        ("index_select", x.index_select(1, &ids(&[3], &[1])).unwrap_err()),
        ("index_select", x.index_select(0, &ids(&[-1], &[1])).unwrap_err()),
        ("index_select", x.index_select(0, &f64s(&[0.], &[1])).unwrap_err()),
        ("index_select", x.index_select(0, &ids(&[0, 1], &[1, 2])).unwrap_err()),
        ("index_select", x.index_select(2, &ids(&[0], &[1])).unwrap_err()),
        ("gather", x.gather(1, &ids(&[0, 5], &[1, 2])).unwrap_err()),
        ("gather", x.gather(1, &ids(&[0], &[1])).unwrap_err()),
        ("gather", x.gather(0, &ids(&[0; 4], &[1, 4])).unwrap_err()),
        ("scatter_add", x.scatter_add(0, &ids(&[2], &[1, 1]), &x).unwrap_err()),
        ("scatter_add", x.scatter_add(0, &ids(&[0], &[1, 1]), &x.to_dtype(DType::F32).unwrap()).unwrap_err()),
        ("embedding", ids(&[4], &[1]).embedding(&iota(&[4, 2])).unwrap_err()),
        ("embedding", f64s(&[0.], &[1]).embedding(&iota(&[4, 2])).unwrap_err()),
        ("embedding", ids(&[0], &[1]).embedding(&iota(&[4])).unwrap_err()),
        ("cat", Tensor::cat(&[&x, &iota(&[2, 2])], 0).unwrap_err()),
        ("cat", Tensor::cat(&[&x, &iota(&[3])], 0).unwrap_err()),
        ("cat", Tensor::cat(&[], 0).unwrap_err()),
        ("cat", Tensor::cat(&[&x], 2).unwrap_err()),
        ("stack", Tensor::stack(&[&x, &x.t().unwrap()], 0).unwrap_err()),
        ("stack", Tensor::stack(&[&x], 3).unwrap_err()),
    ];
    for (op, e) in cases {
        assert!(op_of(&e).starts_with(op) || op_of(&e).contains(&format!("{op}:")), "{op}: {e}");
    }
}

#[test]
fn failed_in_place_index_ops_write_nothing() {
    let x = iota(&[2, 3]);
    let before = vals(&x);
    let v0 = x.version();
    let src = f64s(&[9.; 4], &[2, 2]);
    for e in [
        x.index_copy_(1, &ids(&[0, 3], &[2]), &src).unwrap_err(),
        x.index_add_(1, &ids(&[-1, 0], &[2]), &src).unwrap_err(),
        x.index_add_(1, &ids(&[0, 1, 2], &[3]), &src).unwrap_err(),
        x.index_copy_(1, &ids(&[0, 1], &[2]), &src.to_dtype(DType::F32).unwrap()).unwrap_err(),
        x.index_copy_(1, &f64s(&[0., 1.], &[2]), &src).unwrap_err(),
    ] {
        let m = e.to_string();
        assert!(m.contains("index_copy_") || m.contains("index_add_"), "{m}");
    }
    assert_eq!(vals(&x), before);
    assert_eq!(x.version(), v0);
}

#[aot_fn]
fn pick_rows(x: &Tensor, idx: &Tensor) -> Tensor {
    x.index_select(0, &idx).mul(2.0)
}

#[aot_fn]
fn write_rows(buf: &mut Tensor, idx: &Tensor, src: &Tensor) {
    buf.index_copy_(0, &idx, &src);
}

#[test]
fn compiled_calls_report_bad_indices_and_write_nothing() {
    let x = iota(&[3, 2]);
    let e = pick_rows(&x, &ids(&[3], &[1])).unwrap_err();
    assert!(e.to_string().contains("index_select"), "{e}");
    let mut buf = iota(&[3, 2]);
    let e = write_rows(&mut buf, &ids(&[0, 7], &[2]), &f64s(&[5.; 4], &[2, 2])).unwrap_err();
    assert!(e.to_string().contains("index_copy_"), "{e}");
    assert_eq!(vals(&buf), vals(&iota(&[3, 2])));
    write_rows(&mut buf, &ids(&[2, 0], &[2]), &f64s(&[5., 6., 7., 8.], &[2, 2])).unwrap();
    assert_eq!(vals(&buf), vec![7., 8., 2., 3., 5., 6.]);
}

// ---------------------------------------------------------------------------
// Gradients

const EPS: f64 = 1e-6;

/// Fixed weights of both signs for the loss `sum(out * w)`.
fn weights(n: usize) -> Vec<f64> {
    (0..n).map(|i| (0.7 * i as f64 + 0.3).sin() + 0.2).collect()
}

fn loss(out: &Tensor) -> Tensor {
    let w = f64s(&weights(out.numel()), &out.shape());
    out.mul(&w).unwrap().sum().unwrap()
}

/// Central differences of `loss(f(leaves))` for every element of every leaf.
fn numeric(f: &dyn Fn(&[Tensor]) -> Tensor, leaves: &[Tensor]) -> Vec<Vec<f64>> {
    (0..leaves.len())
        .map(|k| {
            let base = vals(&leaves[k]);
            (0..base.len())
                .map(|e| {
                    let at = |d: f64| {
                        let mut v = base.clone();
                        v[e] += d;
                        let mut ls: Vec<Tensor> = leaves.iter().map(|l| l.detach().unwrap()).collect();
                        ls[k] = f64s(&v, &leaves[k].shape());
                        vals(&loss(&f(&ls)))[0]
                    };
                    (at(EPS) - at(-EPS)) / (2.0 * EPS)
                })
                .collect()
        })
        .collect()
}

/// `loss(f(leaves)).backward()`'s gradients against finite differences.
fn gradcheck(name: &str, f: &dyn Fn(&[Tensor]) -> Tensor, leaves: &[Tensor]) -> Vec<Vec<f64>> {
    let ls: Vec<Tensor> = leaves.iter().map(|l| l.detach().unwrap().requires_grad_(true).unwrap()).collect();
    loss(&f(&ls)).backward().unwrap();
    let want = numeric(f, leaves);
    let mut got_all = vec![];
    for (k, l) in ls.iter().enumerate() {
        let got = l.grad().map(|g| vals(&g)).unwrap_or_else(|| vec![0.0; l.numel()]);
        assert_eq!(got.len(), want[k].len(), "{name}: leaf {k}");
        for (e, (a, n)) in got.iter().zip(&want[k]).enumerate() {
            assert!((a - n).abs() <= 1e-6 + 1e-5 * n.abs(), "{name}: leaf {k} element {e}: analytic {a}, numeric {n}");
        }
        got_all.push(got);
    }
    got_all
}

fn leaf(seed: u64, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f64s(&(0..n).map(|i| ((i as f64 + 1.0) * (seed as f64 + 0.37)).sin()).collect::<Vec<_>>(), shape)
}

#[test]
fn eager_gradients_match_finite_differences() {
    let idx = ids(&[2, 0, 2], &[3]);
    gradcheck("index_select", &|l| l[0].index_select(1, &idx).unwrap(), &[leaf(1, &[2, 3])]);
    let gi = ids(&[1, 1, 0, 2, 0, 0], &[2, 3]);
    gradcheck("gather", &|l| l[0].gather(-1, &gi).unwrap(), &[leaf(2, &[2, 3])]);
    let si = ids(&[1, 0, 1, 0], &[1, 4]);
    gradcheck("scatter_add", &|l| l[0].scatter_add(0, &si, &l[1]).unwrap(), &[leaf(3, &[2, 4]), leaf(4, &[1, 4])]);
    // a src larger than the index: its extra elements get a zero gradient
    let si = ids(&[1, 0, 1], &[1, 3]);
    gradcheck("scatter_add, small index", &|l| l[0].scatter_add(1, &si, &l[1]).unwrap(), &[leaf(3, &[2, 4]), leaf(4, &[2, 4])]);
    let e = ids(&[3, 0, 3, 1], &[2, 2]);
    gradcheck("embedding", &|l| e.embedding(&l[0]).unwrap(), &[leaf(5, &[4, 3])]);
    let ci = ids(&[2, 0], &[2]);
    gradcheck("index_copy", &|l| l[0].index_copy(0, &ci, &l[1]).unwrap(), &[leaf(6, &[3, 2]), leaf(7, &[2, 2])]);
    let ai = ids(&[1, 1], &[2]);
    gradcheck("index_add", &|l| l[0].index_add(1, &ai, &l[1]).unwrap(), &[leaf(8, &[2, 3]), leaf(9, &[2, 2])]);
    gradcheck(
        "index_add_ on a non-leaf",
        &|l| {
            let y = l[0].mul(1.5).unwrap();
            y.index_add_(1, &ai, &l[1]).unwrap();
            y
        },
        &[leaf(8, &[2, 3]), leaf(9, &[2, 2])],
    );
    gradcheck("cat", &|l| Tensor::cat(&[&l[0], &l[1], &l[0]], 1).unwrap(), &[leaf(10, &[2, 1]), leaf(11, &[2, 3])]);
    gradcheck("stack", &|l| Tensor::stack(&[&l[0], &l[1]], -1).unwrap(), &[leaf(12, &[2, 3]), leaf(13, &[2, 3])]);
}

#[aot_fn]
fn model_b(x: &Tensor, w: &Tensor, emb: &Tensor, tok: &Tensor, idx: &Tensor, gidx: &Tensor) -> (Tensor, Tensor) {
    let e = tok.embedding(&emb);
    let h = Tensor::cat(&[&x, &e], 1);
    let picked = h.index_select(-1, &idx);
    let s = Tensor::stack(&[&picked, &picked.mul(&w)], 0);
    let g = s.gather(2, &gidx);
    let sc = picked.scatter_add(1, &gidx.select(0, 0), &w);
    (g.sum_dim(&[0], false), sc.tanh())
}

#[test]
fn compiled_gradients_match_eager_and_finite_differences() {
    let (tok, idx, gidx) = (ids(&[2, 0], &[2]), ids(&[3, 0, 1], &[3]), ids(&[1, 1, 0, 2], &[2, 1, 2]));
    let run = |l: &[Tensor], eager: bool| -> Vec<Tensor> {
        if eager {
            model_b::compiled()
                .run_eager(&[Arg::from(&l[0]), Arg::from(&l[1]), Arg::from(&l[2]), Arg::from(&tok), Arg::from(&idx), Arg::from(&gidx)])
                .unwrap()
        } else {
            let (a, b) = model_b(&l[0], &l[1], &l[2], &tok, &idx, &gidx).unwrap();
            vec![a, b]
        }
    };
    let both = |l: &[Tensor], eager: bool| {
        let o = run(l, eager);
        Tensor::cat(&[&o[0].view(&[-1]).unwrap(), &o[1].view(&[-1]).unwrap()], 0).unwrap()
    };
    let leaves = [leaf(21, &[2, 2]), leaf(22, &[2, 3]), leaf(23, &[4, 2])];
    let compiled = gradcheck("model_b compiled", &|l| both(l, false), &leaves);
    let eager = gradcheck("model_b eager", &|l| both(l, true), &leaves);
    for (c, e) in compiled.iter().zip(&eager) {
        for (a, b) in c.iter().zip(e) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "compiled {a} eager {b}");
        }
    }
    // the training call took the compiled path
    let ls: Vec<Tensor> = leaves.iter().map(|l| l.detach().unwrap().requires_grad_(true).unwrap()).collect();
    let out = run(&ls, false);
    assert!(out[0].requires_grad() && out[1].requires_grad());
}

// ---------------------------------------------------------------------------
// A KV cache written at positions held in a tensor

#[aot_fn]
fn attend_step(cache: &mut Tensor, pos: &Tensor, kv: &Tensor, q: &Tensor) -> Tensor {
    cache.index_copy_(1, &pos, &kv);
    let scores = cache.matmul(&q).softmax(1);
    (scores * cache.sum_dim(&[2], true)).sum_dim(&[1], false)
}

#[test]
fn kv_cache_index_copy_into_a_mut_input_matches_eager() {
    let (b, t, d) = (2, 5, 3);
    let mut cache = Tensor::zeros(&[b, t, d], DType::F64, &Device::Cpu).unwrap();
    let eager_cache = cache.copy().unwrap();
    let q = leaf(31, &[b, d, 1]);
    for step in 0..4i64 {
        let pos = ids(&[step], &[1]);
        let kv = leaf(40 + step as u64, &[b, 1, d]);
        let out = attend_step(&mut cache, &pos, &kv, &q).unwrap();
        let want = attend_step::compiled().run_eager(&[Arg::from(&eager_cache), Arg::from(&pos), Arg::from(&kv), Arg::from(&q)]).unwrap();
        assert_eq!(vals(&out), vals(&want[0]), "step {step}");
        assert_eq!(vals(&cache), vals(&eager_cache), "step {step}");
        // the row just written holds kv, the later rows are still zero
        let row = cache.select(1, step).unwrap();
        assert_eq!(vals(&row), vals(&kv.select(1, 0).unwrap()));
        if step + 1 < t as i64 {
            assert!(vals(&cache.narrow(1, step + 1, t as i64 - step - 1).unwrap()).iter().all(|&v| v == 0.0));
        }
    }
    // the cache is mutated in the graph (inference call, data only)
    let report = attend_step::compiled()
        .explain(&[Arg::from(&cache), Arg::from(&ids(&[0], &[1])), Arg::from(&leaf(50, &[b, 1, d])), Arg::from(&q)])
        .unwrap();
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["fw_metadata"]["input_info"][0]["mutates_data"], true);
    assert_eq!(v["fw_metadata"]["input_info"][0]["mutation_type"], "mutated_in_graph");
}
