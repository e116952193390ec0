"""A tenth oracle corpus of programs written as a new user would write
them (issue 16): the model ops combined with views, aliasing and in-place
writes. Gathers and index_selects with repeated indices (gradients that
accumulate), cat and stack of overlapping views of one input that is
written afterwards, max/min over a dim with ties and keepdim, tril/triu
with offsets on non-square inputs, cumsum along a transposed dim, a KV
cache written with index_copy_ and returned as a view, index_add_ into a
narrowed input, flatten and view_as outputs that alias inputs, clamp with
one bound, and half-precision gathers and cumsums.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_j.py tests/oracle/new_user_j.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

IDX0 = V("idx", [2, 3], [0, 2, 0, 2, 2, 1], "i64")
add(case("new_user_j_gather_dim0_repeated", """
def f(x, idx):
    g = x.gather(0, idx)
    return (g * g).sum(0), g.t()
""", """
fn f(x: &Tensor, idx: &Tensor) -> (Tensor, Tensor) {
    let g = x.gather(0, idx);
    ((&g * &g).sum_dim(&[0], false), g.t())
}""", calls([("x", [3, 3])], [IDX0])))

SEL = V("sel", [5], [1, 1, 0, 3, 1], "i64")
add(case("new_user_j_index_select_repeated_dim1", """
def f(x, w, sel):
    cols = x.index_select(1, sel)
    return cols @ w, cols.transpose(0, 1)
""", """
fn f(x: &Tensor, w: &Tensor, sel: &Tensor) -> (Tensor, Tensor) {
    let cols = x.index_select(1, sel);
    (cols.matmul(w), cols.transpose(0, 1))
}""", calls([("x", [2, 4]), ("w", [5, 3])], [SEL])))

IDS = V("ids", [2, 3], [3, 1, 3, 0, 3, 1], "i64")
add(case("new_user_j_embedding_sgd_in_place", """
def f(emb, head, ids):
    h = torch.nn.functional.embedding(ids, emb)
    logits = h.mean(1) @ head
    m = logits.amax(-1, keepdim=True)
    loss = ((logits - m).exp().sum(-1, keepdim=True).log() + m).mean()
    with torch.no_grad():
        emb.mul_(0.9)
    return loss, h
""", """
fn f(emb: &mut Tensor, head: &Tensor, ids: &Tensor) -> (Tensor, Tensor) {
    let h = ids.embedding(emb);
    let logits = h.mean_dim(&[1], false).matmul(head);
    let m = logits.amax_dim(&[-1], true);
    let loss = ((&logits - &m).exp().sum_dim(&[-1], true).log() + &m).mean();
    no_grad! { emb.mul_(0.9); }
    (loss, h)
}""", [C("nograd", [L("emb", [4, 3]), L("head", [3, 2]), IDS], ["emb", "head", "ids"]),
       C("grad_head", [L("emb", [4, 3]), L("head", [3, 2], True), IDS], ["emb", "head", "ids"])]))

add(case("new_user_j_cat_overlapping_views_then_write", """
def f(x):
    y = torch.cat([x[:, :2], x[:, 1:]], 1)
    x.mul_(2)
    return y + x.sum(), x.narrow(1, 0, 2)
""", """
fn f(x: &mut Tensor) -> (Tensor, Tensor) {
    let y = Tensor::cat(&[&x.narrow(1, 0, 2), &x.narrow(1, 1, 2)], 1);
    x.mul_(2.0);
    (y + x.sum(), x.narrow(1, 0, 2))
}""", calls([("x", [2, 3])], mutated=("x",))))

add(case("new_user_j_stack_last_dim_max", """
def f(a, b, c):
    s = torch.stack([a, b, c], -1)
    v, i = s.max(-1)
    w, j = s.min(-1, keepdim=True)
    return v - w.squeeze(-1), i, j
""", """
fn f(a: &Tensor, b: &Tensor, c: &Tensor) -> (Tensor, Tensor, Tensor) {
    let s = Tensor::stack(&[a, b, c], -1);
    let (v, i) = s.max_dim(-1, false);
    let (w, j) = s.min_dim(-1, true);
    (v - w.squeeze(-1), i, j)
}""", calls([("a", [2, 3]), ("b", [2, 3]), ("c", [2, 3])])))

TIES = V("x", [2, 4], [1.0, 3.0, 3.0, 0.0, -2.0, -2.0, 5.0, 5.0])
add(case("new_user_j_max_min_ties_keepdim", """
def f(x):
    m, i = x.max(1, keepdim=True)
    n, j = x.min(0)
    return (x - m).exp().sum() + n.sum(), i, j, x.argmax(1), x.argmin(0, keepdim=True)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    let (m, i) = x.max_dim(1, true);
    let (n, j) = x.min_dim(0, false);
    ((x - &m).exp().sum() + n.sum(), i, j, x.argmax(1, false), x.argmin(0, true))
}""", [C("nograd", [TIES], ["x"]),
       C("grad", [dict(TIES, requires_grad=True)], ["x"])]))

add(case("new_user_j_tril_triu_offsets", """
def f(x, y):
    a = x.tril(-1)
    b = x.triu(2)
    c = y.t().tril(1)
    return a + b, c * 3, (a * b).sum()
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor) {
    let a = x.tril(-1);
    let b = x.triu(2);
    let c = y.t().tril(1);
    (&a + &b, c * 3.0, (&a * &b).sum())
}""", calls([("x", [3, 5]), ("y", [4, 2])])))

add(case("new_user_j_cumsum_transposed_expm1", """
def f(x):
    c = x.t().cumsum(0)
    d = x.cumsum(-1).expm1()
    return c, d.log1p(), (c * c).mean()
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let c = x.t().cumsum(0);
    let d = x.cumsum(-1).expm1();
    (c.copy(), d.log1p(), (&c * &c).mean())
}""", calls([("x", [3, 4])])))

POS = V("pos", [2], [3, 1], "i64")
add(case("new_user_j_kv_cache_index_copy_view_out", """
def f(cache, k, pos):
    cache.index_copy_(1, pos, k)
    window = cache.narrow(1, 1, 3)
    return window, (window * 2).sum(-1)
""", """
fn f(cache: &mut Tensor, k: &Tensor, pos: &Tensor) -> (Tensor, Tensor) {
    cache.index_copy_(1, pos, k);
    let window = cache.narrow(1, 1, 3);
    let s = (&window * 2.0).sum_dim(&[-1], false);
    (window, s)
}""", [C("nograd", [V("cache", [2, 5, 3], [0.0] * 30), L("k", [2, 2, 3]), POS], ["cache", "k", "pos"]),
       C("grad_k", [V("cache", [2, 5, 3], [0.0] * 30), L("k", [2, 2, 3], True), POS], ["cache", "k", "pos"])]))

ROWS = V("rows", [3], [0, 2, 0], "i64")
add(case("new_user_j_index_add_into_narrow", """
def f(buf, src, rows):
    part = buf.narrow(1, 1, 2)
    part.index_add_(0, rows, src)
    return buf.sum(1), part
""", """
fn f(buf: &mut Tensor, src: &Tensor, rows: &Tensor) -> (Tensor, Tensor) {
    let part = buf.narrow(1, 1, 2);
    part.index_add_(0, rows, src);
    (buf.sum_dim(&[1], false), part)
}""", [C("nograd", [L("buf", [3, 4]), L("src", [3, 2]), ROWS], ["buf", "src", "rows"]),
       C("grad_src", [L("buf", [3, 4]), L("src", [3, 2], True), ROWS], ["buf", "src", "rows"])]))

add(case("new_user_j_flatten_view_as_aliases", """
def f(x, y):
    flat = x.flatten(1, 2)
    same = y.view_as(flat)
    return flat, same, flat * same
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor) {
    let flat = x.flatten(1, 2);
    let same = y.view_as(&flat);
    let prod = &flat * &same;
    (flat, same, prod)
}""", calls([("x", [2, 3, 2]), ("y", [12])])))

add(case("new_user_j_clamp_one_bound", """
def f(x):
    lo = x.clamp(0.0, float("inf"))
    hi = x.clamp(float("-inf"), 0.25)
    x.clamp_(-0.5, 0.5)
    return lo * hi, x
""", """
fn f(x: &mut Tensor) -> (Tensor, Tensor) {
    let lo = x.clamp(0.0, f64::INFINITY);
    let hi = x.clamp(f64::NEG_INFINITY, 0.25);
    x.clamp_(-0.5, 0.5);
    (&lo * &hi, x)
}""", calls([("x", [3, 4])], mutated=("x",))))

HIDX = V("hidx", [3, 2], [1, 0, 1, 1, 0, 0], "i64")
add(case("new_user_j_half_gather_cumsum", """
def f(x, hidx):
    h = x.to(torch.float16)
    g = h.gather(1, hidx)
    c = h.cumsum(1)
    b = x.to(torch.bfloat16).cumsum(0)
    return g.float().sum(), c, b
""", """
fn f(x: &Tensor, hidx: &Tensor) -> (Tensor, Tensor, Tensor) {
    let h = x.to_dtype(DType::F16);
    let g = h.gather(1, hidx);
    let c = h.cumsum(1);
    let b = x.to_dtype(DType::BF16).cumsum(0);
    (g.to_dtype(DType::F32).sum(), c, b)
}""", calls([("x", [3, 6])], [HIDX])))

SCAT = V("sidx", [2, 3], [0, 1, 0, 1, 1, 1], "i64")
add(case("new_user_j_scatter_add_both_grads", """
def f(base, src, sidx):
    out = base.scatter_add(0, sidx, src)
    return out.sigmoid().sum(), out
""", """
fn f(base: &Tensor, src: &Tensor, sidx: &Tensor) -> (Tensor, Tensor) {
    let out = base.scatter_add(0, sidx, src);
    (out.sigmoid().sum(), out)
}""", calls([("base", [2, 3]), ("src", [2, 3])], [SCAT])))

TGT = V("tgt", [4], [2, 0, 1, 2], "i64")
add(case("new_user_j_nll_of_sliced_log_softmax", """
def f(x, tgt):
    lp = x.log_softmax(-1)
    a = torch.nn.functional.nll_loss(lp[:, :3], tgt)
    b = torch.nn.functional.cross_entropy(x.narrow(1, 1, 3), tgt)
    return a, b, lp.argmax(-1)
""", """
fn f(x: &Tensor, tgt: &Tensor) -> (Tensor, Tensor, Tensor) {
    let lp = x.log_softmax(-1);
    let a = lp.narrow(1, 0, 3).nll_loss(tgt);
    let b = x.narrow(1, 1, 3).cross_entropy(tgt);
    (a, b, lp.argmax(-1, false))
}""", calls([("x", [4, 4])], [TGT])))
