"""A fourth oracle corpus of programs written as a new user would write
them (issue 16): an RMSNorm + SwiGLU block, rotary embeddings, a GRU cell,
a focal loss, a hand-written logsumexp and softplus, Huber plus triplet
margin losses, a CLIP-style contrastive loss with `arange` targets, a
masked language-model loss with ignored targets, weight normalisation with
an EMA of the weights, multi-head causal attention with sizes read from
the input, SGD with Nesterov momentum and weight decay, a vector quantiser
with a straight-through estimator, an LSTM over literal time steps, and
permute/expand/var gradients. PyTorch runs each with `aot_function` and
eagerly; the Rust side compares outputs, inputs after the call and
gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_d.py tests/oracle/new_user_d.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

add(case("new_user_d_rmsnorm_swiglu", """
def f(x, g, w1, w2, w3):
    n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g
    return (torch.nn.functional.silu(n @ w1) * (n @ w3)) @ w2
""", """
fn f(x: &Tensor, g: &Tensor, w1: &Tensor, w2: &Tensor, w3: &Tensor) -> Tensor {
    let n = x * (x.pow(2.0).mean_dim(&[-1], true) + 1e-6).rsqrt() * g;
    (n.matmul(w1).silu() * n.matmul(w3)).matmul(w2)
}""", calls([("x", [2, 3, 4]), ("g", [4]), ("w1", [4, 6]), ("w2", [6, 4]), ("w3", [4, 6])])))

add(case("new_user_d_rotary", """
def f(x, cos, sin):
    d = x.size(-1) // 2
    x1 = x.narrow(-1, 0, d)
    x2 = x.narrow(-1, d, d)
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin
""", """
fn f(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let d = x.size(-1) / 2;
    let x1 = x.narrow(-1, 0, d);
    let x2 = x.narrow(-1, d, d);
    let rot = Tensor::cat(&[&(-x2), &x1], -1);
    x * cos + rot * sin
}""", calls([("x", [2, 3, 6]), ("cos", [3, 6]), ("sin", [3, 6])])))

add(case("new_user_d_gru_cell", """
def f(x, h, wx, wh, b):
    gx = x @ wx + b
    gh = h @ wh
    H = h.size(1)
    r = torch.sigmoid(gx.narrow(1, 0, H) + gh.narrow(1, 0, H))
    z = torch.sigmoid(gx.narrow(1, H, H) + gh.narrow(1, H, H))
    n = torch.tanh(gx.narrow(1, 2 * H, H) + r * gh.narrow(1, 2 * H, H))
    return (1 - z) * n + z * h
""", """
fn f(x: &Tensor, h: &Tensor, wx: &Tensor, wh: &Tensor, b: &Tensor) -> Tensor {
    let gx = x.matmul(wx) + b;
    let gh = h.matmul(wh);
    let hs = h.size(1);
    let r = (gx.narrow(1, 0, hs) + gh.narrow(1, 0, hs)).sigmoid();
    let z = (gx.narrow(1, hs, hs) + gh.narrow(1, hs, hs)).sigmoid();
    let n = (gx.narrow(1, 2 * hs, hs) + r * gh.narrow(1, 2 * hs, hs)).tanh();
    (1.0 - &z) * n + z * h
}""", calls([("x", [2, 3]), ("h", [2, 4]), ("wx", [3, 12]), ("wh", [4, 12]), ("b", [12])])))

Y = V("y", [5], [2, 0, 1, 3, 2], "i64")
add(case("new_user_d_focal_loss", """
def f(x, y):
    lp = x.log_softmax(-1).gather(1, y.unsqueeze(1)).squeeze(1)
    p = lp.exp()
    return (-(1 - p).pow(2.0) * lp).mean()
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    let lp = x.log_softmax(-1).gather(1, &y.unsqueeze(1)).squeeze(1);
    let p = lp.exp();
    (-(1.0 - p).pow(2.0) * lp).mean()
}""", calls([("x", [5, 4])], [Y])))

add(case("new_user_d_logsumexp_softplus", """
def f(x):
    m = x.amax(-1, keepdim=True)
    lse = (x - m).exp().sum(-1, keepdim=True).log() + m
    sp = torch.log1p(x.exp())
    return lse, sp, (x - lse).exp().sum(-1)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let m = x.amax_dim(&[-1], true);
    let lse = (x - &m).exp().sum_dim(&[-1], true).log() + m;
    let sp = x.exp().log1p();
    let total = (x - &lse).exp().sum_dim(&[-1], false);
    (lse, sp, total)
}""", calls([("x", [3, 5])])))

add(case("new_user_d_huber_triplet", """
def f(a, p, n, y):
    d = (a - y).abs()
    huber = torch.where(d < 1.0, 0.5 * d * d, d - 0.5).mean()
    dp = (a - p).pow(2).sum(-1)
    dn = (a - n).pow(2).sum(-1)
    trip = torch.maximum(dp - dn + 0.2, torch.zeros_like(dp)).mean()
    return huber + trip
""", """
fn f(a: &Tensor, p: &Tensor, n: &Tensor, y: &Tensor) -> Tensor {
    let d = (a - y).abs();
    let huber = (&d * &d * 0.5).where_(&d.lt(1.0), &(&d - 0.5)).mean();
    let dp = (a - p).pow(2.0).sum_dim(&[-1], false);
    let dn = (a - n).pow(2.0).sum_dim(&[-1], false);
    let trip = (&dp - dn + 0.2).maximum(&dp.zeros_like()).mean();
    huber + trip
}""", calls([("a", [4, 3]), ("p", [4, 3]), ("n", [4, 3]), ("y", [4, 3])])))

add(case("new_user_d_contrastive_arange", """
def f(a, b, temp):
    an = a / a.pow(2).sum(-1, keepdim=True).sqrt()
    bn = b / b.pow(2).sum(-1, keepdim=True).sqrt()
    logits = an @ bn.t() / temp
    labels = torch.arange(a.size(0))
    return (torch.nn.functional.cross_entropy(logits, labels) + torch.nn.functional.cross_entropy(logits.t(), labels)) / 2
""", """
fn f(a: &Tensor, b: &Tensor, temp: f64) -> Tensor {
    let an = a / a.pow(2.0).sum_dim(&[-1], true).sqrt();
    let bn = b / b.pow(2.0).sum_dim(&[-1], true).sqrt();
    let logits = an.matmul(&bn.t()) / temp;
    let labels = Tensor::arange(0, a.size(0));
    (logits.cross_entropy(&labels) + logits.t().cross_entropy(&labels)) / 2.0
}""", calls([("a", [4, 3]), ("b", [4, 3])], args=["a", "b", 0.07])))

MLM = V("tgt", [2, 3], [1, -100, 4, -100, 0, 2], "i64")
add(case("new_user_d_masked_lm_ignore", """
def f(h, w, tgt):
    logits = h @ w
    return torch.nn.functional.cross_entropy(logits.reshape(-1, w.size(1)), tgt.reshape(-1))
""", """
fn f(h: &Tensor, w: &Tensor, tgt: &Tensor) -> Tensor {
    let logits = h.matmul(w);
    logits.reshape(&[-1, w.size(1)]).cross_entropy(&tgt.reshape(&[-1]))
}""", calls([("h", [2, 3, 4]), ("w", [4, 5])], [MLM])))

add(case("new_user_d_weight_norm_ema", """
def f(v, g, x, ema):
    w = g * v / v.pow(2).sum(0, keepdim=True).sqrt()
    y = x @ w
    with torch.no_grad():
        ema.mul_(0.9).add_(w * 0.1)
    return y.tanh().sum()
""", """
fn f(v: &Tensor, g: &Tensor, x: &Tensor, ema: &mut Tensor) -> Tensor {
    let w = g * v / v.pow(2.0).sum_dim(&[0], true).sqrt();
    let y = x.matmul(&w);
    no_grad! {
        ema.mul_(0.9).add_(&(&w * 0.1));
    }
    y.tanh().sum()
}""", calls([("v", [3, 4]), ("g", [4]), ("x", [2, 3])], [V("ema", [3, 4], [0.1 * i for i in range(12)])])))

add(case("new_user_d_mha_causal", """
def f(x, wqkv, wo):
    B, T, C = x.shape
    H = 2
    qkv = x @ wqkv
    q = qkv.narrow(-1, 0, C).view(B, T, H, C // H).transpose(1, 2)
    k = qkv.narrow(-1, C, C).view(B, T, H, C // H).transpose(1, 2)
    v = qkv.narrow(-1, 2 * C, C).view(B, T, H, C // H).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
    mask = torch.ones_like(att).triu(1) > 0.5
    att = att.masked_fill(mask, float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    return y @ wo
""", """
fn f(x: &Tensor, wqkv: &Tensor, wo: &Tensor) -> Tensor {
    let (b, t, c) = (x.size(0), x.size(1), x.size(2));
    let h = 2;
    let qkv = x.matmul(wqkv);
    let q = qkv.narrow(-1, 0, c).view(&[b, t, h, c / h]).transpose(1, 2);
    let k = qkv.narrow(-1, c, c).view(&[b, t, h, c / h]).transpose(1, 2);
    let v = qkv.narrow(-1, 2 * c, c).view(&[b, t, h, c / h]).transpose(1, 2);
    let att = q.matmul(&k.transpose(-2, -1)) * (1.0 / ((c / h) as f64).sqrt());
    let mask = att.ones_like().triu(1).gt(0.5);
    let att = att.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1);
    let y = att.matmul(&v).transpose(1, 2).contiguous().view(&[b, t, c]);
    y.matmul(wo)
}""", calls([("x", [2, 3, 4]), ("wqkv", [4, 12]), ("wo", [4, 4])])))

add(case("new_user_d_sgd_nesterov_wd", """
def f(p, g, buf, lr, wd, mom):
    with torch.no_grad():
        d = g + wd * p
        buf.mul_(mom).add_(d)
        p.sub_(lr * (d + mom * buf))
    return ()
""", """
fn f(p: &mut Tensor, g: &Tensor, buf: &mut Tensor, lr: f64, wd: f64, mom: f64) {
    no_grad! {
        let d = g + p * wd;
        buf.mul_(mom).add_(&d);
        p.sub_(&((d + &*buf * mom) * lr));
    }
}""", [C("nograd", [V("p", [2, 3], [0.5, -1.0, 2.0, 0.25, -0.75, 1.5]), V("g", [2, 3], [0.1, 0.2, -0.3, 0.4, -0.5, 0.6]),
                    V("buf", [2, 3], [0.01, -0.02, 0.03, 0.0, 0.05, -0.06])], ["p", "g", "buf", 0.1, 0.01, 0.9])]))

add(case("new_user_d_vq_straight_through", """
def f(x, codebook):
    d = (x.unsqueeze(1) - codebook.unsqueeze(0)).pow(2).sum(-1)
    idx = d.argmin(1)
    q = codebook.index_select(0, idx)
    commit = (q - x.detach()).pow(2).mean()
    return x + (q - x).detach(), idx, commit
""", """
fn f(x: &Tensor, codebook: &Tensor) -> (Tensor, Tensor, Tensor) {
    let d = (x.unsqueeze(1) - codebook.unsqueeze(0)).pow(2.0).sum_dim(&[-1], false);
    let idx = d.argmin(1, false);
    let q = codebook.index_select(0, &idx);
    let commit = (&q - x.detach()).pow(2.0).mean();
    (x + (&q - x).detach(), idx, commit)
}""", calls([("x", [5, 3]), ("codebook", [4, 3])])))

add(case("new_user_d_lstm_steps", """
def f(x, h, c, wx, wh, b):
    H = h.size(1)
    for t in range(3):
        g = x[:, t] @ wx + h @ wh + b
        i = g.narrow(1, 0, H).sigmoid()
        fg = g.narrow(1, H, H).sigmoid()
        o = g.narrow(1, 2 * H, H).sigmoid()
        u = g.narrow(1, 3 * H, H).tanh()
        c = fg * c + i * u
        h = o * c.tanh()
    return h, c
""", """
fn f(x: &Tensor, h: &Tensor, c: &Tensor, wx: &Tensor, wh: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let hs = h.size(1);
    let mut h = h.copy();
    let mut c = c.copy();
    for t in 0..3 {
        let g = x.select(1, t).matmul(wx) + h.matmul(wh) + b;
        let i = g.narrow(1, 0, hs).sigmoid();
        let fg = g.narrow(1, hs, hs).sigmoid();
        let o = g.narrow(1, 2 * hs, hs).sigmoid();
        let u = g.narrow(1, 3 * hs, hs).tanh();
        c = fg * &c + i * u;
        h = o * c.tanh();
    }
    (h, c)
}""", calls([("x", [2, 3, 2]), ("h", [2, 3]), ("c", [2, 3]), ("wx", [2, 12]), ("wh", [3, 12]), ("b", [12])])))

add(case("new_user_d_permute_expand_var", """
def f(x, w):
    y = x.permute(2, 0, 1).reshape(x.size(2), -1)
    return (y.t() @ w).expand(2, -1, -1).sum(0).var(0, correction=1)
""", """
fn f(x: &Tensor, w: &Tensor) -> Tensor {
    let y = x.permute(&[2, 0, 1]).reshape(&[x.size(2), -1]);
    y.t().matmul(w).expand(&[2, -1, -1]).sum_dim(&[0], false).var_dim(&[0], 1, false)
}""", calls([("x", [2, 3, 4]), ("w", [4, 3])])))
