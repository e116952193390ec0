"""A second oracle corpus of programs written as a new user would write
them (issue 16), combining the ops for models: a character-level language
model step with tied embeddings, a classifier reporting its accuracy, a
hand-written NLL through `gather`, heads joined with `cat` and `stack`,
gradient accumulation with `index_add_`, a KV cache written with
`index_copy_` at positions held in a tensor, label smoothing, a cumulative
softmax-free normaliser, a flattened feature layer, clamping a slice of an
input in place, masked mean pooling, a one-hot built with `scatter_add`,
and a max-pooled sequence encoder. PyTorch runs each with `aot_function`
and eagerly; the Rust side compares outputs, inputs after the call and
gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_b.py tests/oracle/new_user_b.json
    python3 tests/oracle/gen_cases.py
"""


from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

IDS = V("ids", [2, 4], [1, 0, 3, 2, 4, 4, 0, 1], "i64")
TGT = V("tgt", [2, 4], [0, 3, 2, 4, 4, 0, 1, 2], "i64")
add(case("new_user_b_char_lm_tied", """
def f(wte, wpe, ids, tgt):
    t = ids.size(1)
    h = torch.nn.functional.embedding(ids, wte) + wpe.narrow(0, 0, t)
    h = torch.nn.functional.gelu(h)
    logits = h @ wte.t()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
""", """
fn f(wte: &Tensor, wpe: &Tensor, ids: &Tensor, tgt: &Tensor) -> Tensor {
    let t = ids.size(1);
    let h = ids.embedding(wte) + wpe.narrow(0, 0, t);
    let h = h.gelu();
    let logits = h.matmul(&wte.t());
    logits.reshape(&[-1, logits.size(-1)]).cross_entropy(&tgt.reshape(&[-1]))
}""", calls([("wte", [5, 3]), ("wpe", [6, 3])], [IDS, TGT])))

Y = V("y", [6], [2, 0, 1, 1, 2, 0], "i64")
add(case("new_user_b_classifier_accuracy", """
def f(x, w, b, y):
    logits = x @ w + b
    loss = torch.nn.functional.cross_entropy(logits, y)
    acc = (logits.argmax(-1) == y).float().mean()
    return loss, acc
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let logits = x.matmul(w) + b;
    let loss = logits.cross_entropy(y);
    let acc = logits.argmax(-1, false).eq(y).to_dtype(DType::F32).mean();
    (loss, acc)
}""", calls([("x", [6, 4]), ("w", [4, 3]), ("b", [3])], [Y])))

add(case("new_user_b_manual_nll_gather", """
def f(x, y):
    lp = x.log_softmax(-1)
    picked = lp.gather(1, y.unsqueeze(1))
    return -picked.mean(), lp.exp().sum(-1)
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let lp = x.log_softmax(-1);
    let picked = lp.gather(1, &y.unsqueeze(1));
    (-picked.mean(), lp.exp().sum_dim(&[-1], false))
}""", calls([("x", [6, 3])], [Y])))

add(case("new_user_b_heads_cat_stack", """
def f(x, wa, wb, wo):
    ha = (x @ wa).relu()
    hb = (x @ wb).tanh()
    h = torch.cat([ha, hb], -1)
    both = torch.stack([ha, hb], 0)
    return h @ wo, both.sum(0)
""", """
fn f(x: &Tensor, wa: &Tensor, wb: &Tensor, wo: &Tensor) -> (Tensor, Tensor) {
    let ha = x.matmul(wa).relu();
    let hb = x.matmul(wb).tanh();
    let h = Tensor::cat(&[&ha, &hb], -1);
    let both = Tensor::stack(&[&ha, &hb], 0);
    (h.matmul(wo), both.sum_dim(&[0], false))
}""", calls([("x", [3, 4]), ("wa", [4, 2]), ("wb", [4, 2]), ("wo", [4, 5])])))

TOK = V("tok", [5], [2, 0, 2, 3, 0], "i64")
add(case("new_user_b_grad_accumulate_index_add", """
def f(acc, g, tok):
    acc.index_add_(0, tok, g * 0.5)
    return acc.abs().sum()
""", """
fn f(acc: &mut Tensor, g: &Tensor, tok: &Tensor) -> Tensor {
    acc.index_add_(0, tok, &(g * 0.5));
    acc.abs().sum()
}""", calls([("acc", [4, 3]), ("g", [5, 3])], [TOK], mutated=("acc",))))

POS = V("pos", [2], [3, 1], "i64")
add(case("new_user_b_kv_cache_index_copy", """
def f(ck, cv, k, v, q, pos):
    ck.index_copy_(1, pos, k)
    cv.index_copy_(1, pos, v)
    att = (q @ ck.transpose(-2, -1)) / 2.0
    return att.softmax(-1) @ cv
""", """
fn f(ck: &mut Tensor, cv: &mut Tensor, k: &Tensor, v: &Tensor, q: &Tensor, pos: &Tensor) -> Tensor {
    ck.index_copy_(1, pos, k);
    cv.index_copy_(1, pos, v);
    let att = q.matmul(&ck.transpose(-2, -1)) / 2.0;
    att.softmax(-1).matmul(cv)
}""", calls([("ck", [2, 5, 4]), ("cv", [2, 5, 4]), ("k", [2, 2, 4]), ("v", [2, 2, 4]), ("q", [2, 1, 4])], [POS],
            mutated=("ck", "cv"))))

add(case("new_user_b_label_smoothing", """
def f(x, y, eps):
    lp = x.log_softmax(-1)
    nll = torch.nn.functional.nll_loss(lp, y)
    smooth = -lp.mean(-1).mean()
    return nll * (1.0 - eps) + smooth * eps
""", """
fn f(x: &Tensor, y: &Tensor, eps: f64) -> Tensor {
    let lp = x.log_softmax(-1);
    let nll = lp.nll_loss(y);
    let smooth = -lp.mean_dim(&[-1], false).mean();
    nll * (1.0 - eps) + smooth * eps
}""", calls([("x", [6, 3])], [Y], ["x", "y", 0.1])))

add(case("new_user_b_cumsum_log1p", """
def f(x):
    p = x.sigmoid()
    c = p.cumsum(1)
    return (c / c.narrow(1, 3, 1)).log1p(), x.expm1().clamp(-0.5, 2.0)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    let p = x.sigmoid();
    let c = p.cumsum(1);
    ((&c / c.narrow(1, 3, 1)).log1p(), x.expm1().clamp(-0.5, 2.0))
}""", calls([("x", [2, 4])])))

add(case("new_user_b_flatten_features", """
def f(x, w, r):
    h = x.flatten(1, -1) @ w
    return h.view_as(r) + r
""", """
fn f(x: &Tensor, w: &Tensor, r: &Tensor) -> Tensor {
    let h = x.flatten(1, -1).matmul(w);
    h.view_as(r) + r
}""", calls([("x", [2, 3, 4]), ("w", [12, 6]), ("r", [2, 2, 3])])))

add(case("new_user_b_clamp_slice_in_place", """
def f(x, y):
    x.narrow(1, 0, 2).clamp_(-0.5, 0.5)
    x[:, 2].mul_(y)
    return (x * x).sum(0)
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.narrow(1, 0, 2).clamp_(-0.5, 0.5);
    x.select(1, 2).mul_(y);
    (x * x).sum_dim(&[0], false)
}""", calls([("x", [3, 4]), ("y", [3])], mutated=("x",))))

MASK = V("mask", [2, 4], [1, 1, 0, 0, 1, 1, 1, 0], "bool")
add(case("new_user_b_masked_mean_pool", """
def f(h, mask):
    m = mask.float().unsqueeze(-1)
    pooled = (h * m).sum(1) / m.sum(1).clamp(1.0, 1e9)
    return pooled, h.masked_fill(mask.unsqueeze(-1) == 0, -1e4).amax(1)
""", """
fn f(h: &Tensor, mask: &Tensor) -> (Tensor, Tensor) {
    let m = mask.to_dtype(DType::F32).unsqueeze(-1);
    let pooled = (h * &m).sum_dim(&[1], false) / m.sum_dim(&[1], false).clamp(1.0, 1e9);
    (pooled, h.masked_fill(&mask.unsqueeze(-1).eq(0.0), -1e4).amax_dim(&[1], false))
}""", calls([("h", [2, 4, 3])], [MASK])))

LAB = V("lab", [4, 1], [2, 0, 3, 1], "i64")
add(case("new_user_b_one_hot_scatter_add", """
def f(x, lab):
    one = torch.zeros(4, 5).scatter_add(1, lab, torch.ones(4, 1))
    return (x.log_softmax(-1) * one).sum(-1).neg().mean()
""", """
fn f(x: &Tensor, lab: &Tensor) -> Tensor {
    let one = x.zeros_like().scatter_add(1, lab, &lab.to_dtype(DType::F32).ones_like());
    (x.log_softmax(-1) * one).sum_dim(&[-1], false).neg().mean()
}""", calls([("x", [4, 5])], [LAB])))

add(case("new_user_b_max_pool_encoder", """
def f(x, w):
    h = (x @ w).tanh()
    v, i = h.max(1)
    u, j = h.min(1)
    return v - u, i, j, h.triu(1).sum()
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let h = x.matmul(w).tanh();
    let (v, i) = h.max_dim(1, false);
    let (u, j) = h.min_dim(1, false);
    (v - u, i, j, h.triu(1).sum())
}""", calls([("x", [2, 3, 4]), ("w", [4, 4])])))
