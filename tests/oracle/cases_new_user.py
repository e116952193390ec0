"""Oracle corpus of programs written as a new user would write them
(issue 16): a KV cache written at a position, batch norm updating its
running statistics, an Adam step, gradient clipping, slice assignment,
LayerNorm + GELU, an unrolled RNN, causal attention with call-time sizes,
an f16 layer, and `torch.arange` (a causal mask, positions for an
embedding, a float step and a negative one, returned directly and through
a view). PyTorch runs each with `aot_function` and eagerly; the
Rust side compares outputs, inputs after the call and gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user.py tests/oracle/new_user.json
    python3 tests/oracle/gen_cases.py
"""


from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

add(case("new_user_kv_cache_write", """
def f(ck, cv, k, v, q):
    ck.narrow(2, 3, 1).copy_(k)
    cv.narrow(2, 3, 1).copy_(v)
    att = (q @ ck.transpose(-2, -1)).softmax(-1)
    return att @ cv
""", """
fn f(ck: &mut Tensor, cv: &mut Tensor, k: &Tensor, v: &Tensor, q: &Tensor) -> Tensor {
    ck.narrow(2, 3, 1).copy_(k);
    cv.narrow(2, 3, 1).copy_(v);
    let att = q.matmul(&ck.transpose(-2, -1)).softmax(-1);
    att.matmul(cv)
}""", calls([("ck", [1, 2, 5, 4]), ("cv", [1, 2, 5, 4]), ("k", [1, 2, 1, 4]), ("v", [1, 2, 1, 4]), ("q", [1, 2, 1, 4])],
            mutated=("ck", "cv"))))

RM = V("rm", [3], [0.1, -0.2, 0.3])
RV = V("rv", [3], [1.0, 0.5, 2.0])
add(case("new_user_batch_norm_running_stats", """
def f(x, rm, rv, w, b, momentum, eps):
    mean = x.mean(0)
    var = x.var(0, correction=0)
    with torch.no_grad():
        rm.mul_(1.0 - momentum).add_(mean * momentum)
        rv.mul_(1.0 - momentum).add_(x.var(0, correction=1) * momentum)
    return (x - mean) / (var + eps).sqrt() * w + b
""", """
fn f(x: &Tensor, rm: &mut Tensor, rv: &mut Tensor, w: &Tensor, b: &Tensor, momentum: f64, eps: f64) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        rm.mul_(1.0 - momentum).add_(&(mean * momentum));
        rv.mul_(1.0 - momentum).add_(&(x.var_dim(&[0], 1, false) * momentum));
    }
    (x - &mean) / (var + eps).sqrt() * w + b
}""", calls([("x", [6, 3]), ("w", [3]), ("b", [3])], [RM, RV], ["x", "rm", "rv", "w", "b", 0.1, 1e-5])))

P = V("p", [2, 3], [0.5, -0.25, 1.0, 0.0, 2.0, -1.5])
G = V("g", [2, 3], [0.1, -0.3, 0.2, 0.05, -0.4, 0.3])
M = V("m", [2, 3], [0.01, 0.0, -0.02, 0.03, 0.01, 0.0])
VV = V("v", [2, 3], [0.001, 0.002, 0.0, 0.004, 0.001, 0.003])
add(case("new_user_adam_step", """
def f(p, g, m, v, lr, b1, t):
    b2 = 0.999
    eps = 1e-8
    with torch.no_grad():
        m.mul_(b1).add_(g * (1.0 - b1))
        v.mul_(b2).add_(g * g * (1.0 - b2))
        step = lr * (1.0 - b2 ** t) ** 0.5 / (1.0 - b1 ** t)
        p.sub_(m / (v.sqrt() + eps) * step)
    return ()
""", """
fn f(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, lr: f64, b1: f64, t: f64) {
    let b2 = 0.999;
    let eps = 1e-8;
    no_grad! {
        m.mul_(b1).add_(g * (1.0 - b1));
        v.mul_(b2).add_(g * g * (1.0 - b2));
        let step = lr * (1.0 - b2.powf(t)).sqrt() / (1.0 - b1.powf(t));
        p.sub_(m / (v.sqrt() + eps) * step);
    }
}""", [C("nograd", [P, G, M, VV], ["p", "g", "m", "v", 1e-3, 0.9, 3.0])]))

add(case("new_user_clip_grad_norm", """
def f(g, max_norm):
    norm = g.square().sum().sqrt()
    coef = (max_norm / (norm + 1e-6)).clamp(0.0, 1.0)
    g.mul_(coef)
    return ()
""", """
fn f(g: &mut Tensor, max_norm: f64) {
    let norm = g.square().sum().sqrt();
    let coef = (max_norm / (norm + 1e-6)).clamp(0.0, 1.0);
    g.mul_(coef);
}""", [C("nograd", [L("g", [4, 5])], ["g", 0.5]), C("nograd_no_clip", [L("g", [4, 5])], ["g", 100.0])]))

add(case("new_user_slice_assignment", """
def f(x, y):
    x[1:3].copy_(y)
    x[0].fill_(0.0)
    return x.sum(1)
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.slice(0, 1, 3, 1).copy_(y);
    x.select(0, 0).fill_(0.0);
    x.sum_dim(&[1], false)
}""", calls([("x", [4, 3]), ("y", [2, 3])], mutated=("x",))))

add(case("new_user_layer_norm_gelu", """
def f(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, correction=0)
    return torch.nn.functional.gelu((x - mu) / (var + 1e-5).sqrt() * w + b)
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let mu = x.mean_dim(&[-1], true);
    let var = x.var_dim(&[-1], 0, true);
    ((x - mu) / (var + 1e-5).sqrt() * w + b).gelu()
}""", calls([("x", [3, 8]), ("w", [8]), ("b", [8])])))

add(case("new_user_rnn", """
def f(x, h0, wx, wh):
    h = h0.clone()
    for t in range(4):
        h = (x.select(1, t) @ wx + h @ wh).tanh()
    return h
""", """
fn f(x: &Tensor, h0: &Tensor, wx: &Tensor, wh: &Tensor) -> Tensor {
    let mut h = h0.copy();
    for t in 0..4 {
        h = (x.select(1, t).matmul(wx) + h.matmul(wh)).tanh();
    }
    h
}""", calls([("x", [2, 4, 3]), ("h0", [2, 5]), ("wx", [3, 5]), ("wh", [5, 5])])))

add(case("new_user_causal_attention", """
def f(q, k, v):
    scale = 1.0 / q.size(-1) ** 0.5
    att = q @ k.transpose(-2, -1) * scale
    mask = torch.ones_like(att).tril(0) == 0
    return att.masked_fill(mask, float("-inf")).softmax(-1) @ v
""", """
fn f(q: &Tensor, k: &Tensor, v: &Tensor) -> Tensor {
    let scale = 1.0 / (q.size(-1) as f64).sqrt();
    let att = q.matmul(&k.transpose(-2, -1)) * scale;
    let mask = att.ones_like().tril(0).eq(0.0);
    att.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1).matmul(v)
}""", calls([("q", [2, 5, 4]), ("k", [2, 5, 4]), ("v", [2, 5, 4])])))

add(case("new_user_f16_layer", """
def f(x, w):
    return (x.half() @ w.half()).relu().float()
""", """
fn f(x: &Tensor, w: &Tensor) -> Tensor {
    x.to_dtype(DType::F16).matmul(&w.to_dtype(DType::F16)).relu().to_dtype(DType::F32)
}""", calls([("x", [4, 8]), ("w", [8, 3])])))


add(case("new_user_arange_causal_mask", """
def f(q, k, v):
    t = q.size(-2)
    i = torch.arange(t, device=q.device)
    mask = i.unsqueeze(0) > i.unsqueeze(1)
    att = q @ k.transpose(-2, -1) * (1.0 / q.size(-1) ** 0.5)
    return att.masked_fill(mask, float("-inf")).softmax(-1) @ v
""", """
fn f(q: &Tensor, k: &Tensor, v: &Tensor) -> Tensor {
    let t = q.size(-2);
    let i = Tensor::arange(0, t);
    let mask = i.unsqueeze(0).gt(&i.unsqueeze(1));
    let att = q.matmul(&k.transpose(-2, -1)) * (1.0 / (q.size(-1) as f64).sqrt());
    att.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1).matmul(v)
}""", calls([("q", [2, 5, 4]), ("k", [2, 5, 4]), ("v", [2, 5, 4])])))

IDS = {"name": "ids", "shape": [2, 3], "values": [4, 0, 2, 1, 1, 3], "dtype": "i64"}
add(case("new_user_arange_position_embedding", """
def f(tok, pos, ids):
    p = torch.arange(0, ids.size(1), 1, dtype=torch.int64, device=ids.device)
    h = torch.nn.functional.embedding(ids, tok) + torch.nn.functional.embedding(p, pos)
    return h.relu()
""", """
fn f(tok: &Tensor, pos: &Tensor, ids: &Tensor) -> Tensor {
    let p = Tensor::arange(0, ids.size(1), 1, DType::I64, &ids.device());
    let h = ids.embedding(tok) + p.embedding(pos);
    h.relu()
}""", calls([("tok", [5, 4]), ("pos", [3, 4])], [IDS])))

add(case("new_user_arange_outputs", """
def f(x, n):
    r = torch.arange(0.0, n, 0.3)
    s = torch.arange(x.size(0), 0, -2)
    k = torch.arange(-3.5, 10, 2.9, dtype=torch.int64)
    return r, s, s.unsqueeze(1), x * r.sum(), k
""", """
fn f(x: &Tensor, n: f64) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    let r = Tensor::arange(0.0, n, 0.3);
    let s = Tensor::arange(x.size(0), 0, -2);
    let k = Tensor::arange(-3.5, 10, 2.9, DType::I64);
    (r, s, s.unsqueeze(1), x * r.sum(), k)
}""", calls([("x", [5])], args=["x", 1.0])))
