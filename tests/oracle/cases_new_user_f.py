"""A sixth oracle corpus of programs written as a new user would write
them (issue 16), about mistakes and corners: the errors PyTorch raises
(an in-place op that would broadcast its receiver, `view` of a transposed
tensor, an in-place write to a leaf that requires grad, mismatched matmul shapes, an index past a dim, a class
target out of range), dtype promotion of integer and bool tensors with
floats (true division, sums of masks, `cat` of mixed dtypes), empty
tensors (sums, means, matmuls with a zero-sized dim), and in-place writes
of inputs that require grad, returned or viewed. PyTorch runs each with
`aot_function` and eagerly; the Rust side must fail where PyTorch fails,
and otherwise compares outputs (values and dtypes), inputs after the call
and gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_f.py tests/oracle/new_user_f.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

IDS = V("ids", [2, 3], [0, 3, 1, 2, 2, 5], "i64")
MASK = V("mask", [2, 3], [1, 0, 1, 1, 0, 0], "bool")

add(case("new_user_f_inplace_broadcast_receiver", """
def f(a, b):
    a.add_(b)
    return a.sum()
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(b);
    a.sum()
}""", calls([("a", [3]), ("b", [2, 3])], mutated=["a"])))

add(case("new_user_f_view_of_transpose", """
def f(x):
    return x.t().reshape(-1), x.t().view(-1)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    (x.t().reshape(&[-1]), x.t().view(&[-1]))
}""", calls([("x", [2, 3])])))

add(case("new_user_f_reshape_of_transpose", """
def f(x):
    return x.t().reshape(-1) * 2, x.t().contiguous().view(3, 2)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    (x.t().reshape(&[-1]) * 2.0, x.t().contiguous().view(&[3, 2]))
}""", calls([("x", [2, 3])])))

add(case("new_user_f_leaf_inplace", """
def f(w, g):
    w.sub_(g * 0.1)
    return w.sum()
""", """
fn f(w: &mut Tensor, g: &Tensor) -> Tensor {
    w.sub_(&(g * 0.1));
    w.sum()
}""", calls([("w", [2, 3]), ("g", [2, 3])])))

add(case("new_user_f_matmul_mismatch", """
def f(a, b):
    return a @ b
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    a.matmul(b)
}""", calls([("a", [2, 3]), ("b", [2, 3])])))

add(case("new_user_f_index_past_dim", """
def f(x):
    return x.select(0, 2) + x.narrow(1, 1, 3).sum()
""", """
fn f(x: &Tensor) -> Tensor {
    x.select(0, 2) + x.narrow(1, 1, 3).sum()
}""", calls([("x", [2, 3])])))

add(case("new_user_f_target_out_of_range", """
def f(logits, ids):
    return torch.nn.functional.cross_entropy(logits, ids.reshape(-1))
""", """
fn f(logits: &Tensor, ids: &Tensor) -> Tensor {
    logits.cross_entropy(&ids.reshape(&[-1]))
}""", calls([("logits", [6, 4])], [IDS])))

add(case("new_user_f_int_promotion", """
def f(ids, x):
    a = ids * 0.5
    b = ids / 2
    c = ids.sum()
    d = (ids > 1).sum()
    e = ids + x
    g = (ids * 2 - 1) // 1
    return a, b, c, d, e, g
""", """
fn f(ids: &Tensor, x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) {
    let a = ids * 0.5;
    let b = ids / 2;
    let c = ids.sum();
    let d = ids.gt(1).sum();
    let e = ids + x;
    let g = ids * 2 - 1;
    (a, b, c, d, e, g)
}""", calls([("x", [2, 3])], [IDS], args=["ids", "x"])))

add(case("new_user_f_mask_arithmetic", """
def f(x, mask):
    m = mask.to(x.dtype)
    kept = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    frac = mask.sum() / mask.numel()
    return kept, frac, torch.where(mask, x, torch.zeros_like(x))
""", """
fn f(x: &Tensor, mask: &Tensor) -> (Tensor, Tensor, Tensor) {
    let m = mask.to_dtype(DType::F32);
    let kept = (x * &m).sum_dim(&[-1], false) / m.sum_dim(&[-1], false).clamp(1.0, f64::INFINITY);
    let frac = mask.sum() / 6;
    (kept, frac, x.where_(mask, &x.zeros_like()))
}""", calls([("x", [2, 3])], [MASK])))

add(case("new_user_f_cat_mixed_dtypes", """
def f(x, ids):
    return torch.cat([x, ids.to(torch.float64)], 0) * 2, torch.stack([x, x * 2], -1).sum(-1)
""", """
fn f(x: &Tensor, ids: &Tensor) -> (Tensor, Tensor) {
    (Tensor::cat(&[x, &ids.to_dtype(DType::F64)], 0) * 2.0, Tensor::stack(&[x, &(x * 2.0)], -1).sum_dim(&[-1], false))
}""", calls([("x", [2, 3])], [IDS])))

add(case("new_user_f_empty_tensors", """
def f(x, w):
    e = x.narrow(0, 0, 0)
    return e.sum(), e.sum(0), e @ w, (e * 2).mean(0), x.sum()
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    let e = x.narrow(0, 0, 0);
    (e.sum(), e.sum_dim(&[0], false), e.matmul(w), (&e * 2.0).mean_dim(&[0], false), x.sum())
}""", calls([("x", [2, 3]), ("w", [3, 4])])))

add(case("new_user_f_mutated_input_returned", """
def f(a, b):
    a.mul_(b)
    return a, a.view(-1)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.mul_(b);
    (a, a.view(&[-1]))
}""", calls([("a", [2, 3]), ("b", [3])], mutated=["a"])))

add(case("new_user_f_mutated_input_returned_order", """
def f(a, b):
    a.mul_(b)
    return a.view(-1), a
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.mul_(b);
    (a.view(&[-1]), a)
}""", calls([("a", [2, 3]), ("b", [3])], mutated=["a"])))

add(case("new_user_f_detached_and_view_outputs", """
def f(x):
    return x.detach(), x.view(-1), x.t()
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    (x.detach(), x.view(&[-1]), x.t())
}""", calls([("x", [2, 3])])))

add(case("new_user_f_softmax_of_integers", """
def f(ids):
    return ids.softmax(-1)
""", """
fn f(ids: &Tensor) -> Tensor {
    ids.softmax(-1)
}""", [C("nograd", [IDS], ["ids"])]))
