"""A fifth oracle corpus of programs written as a new user would write
them (issue 16), about the edges of the semantics: gradients at ties
(`maximum`, `minimum`, `amax`, `relu` and `abs` at zero), infinite and NaN
gradients (`sqrt` at zero, the `where` pitfall), in-place writes through
views of inputs (`narrow`, `select`, `t`, `diagonal`, `detach`), metadata
mutations of inputs, outputs that alias inputs, intermediates and each
other, `matmul` returned directly for every rank pattern (folded, batched,
transposed back), sliding windows with `as_strided`, a batch norm over
NCHW with running statistics, masked sampling logits with -inf, gradient
accumulation with clipping by a 0-dim tensor, and a residual block with
expanded parameters. PyTorch runs each with `aot_function` and eagerly;
the Rust side compares outputs, inputs after the call and gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_e.py tests/oracle/new_user_e.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

add(case("new_user_e_ties", """
def f(x):
    a = torch.maximum(x, x.detach())
    b = torch.cat([x, x.detach()], -1).amax(-1)
    c = (x - x.detach()).relu() + (x - x.detach()).abs()
    d = torch.minimum(x * 2.0, x + x.detach())
    return a.sum() + b.sum() + c.sum() + d.sum()
""", """
fn f(x: &Tensor) -> Tensor {
    let a = x.maximum(&x.detach());
    let b = Tensor::cat(&[x, &x.detach()], -1).amax_dim(&[-1], false);
    let c = (x - x.detach()).relu() + (x - x.detach()).abs();
    let d = (x * 2.0).minimum(&(x + x.detach()));
    a.sum() + b.sum() + c.sum() + d.sum()
}""", calls([("x", [3, 4])])))

add(case("new_user_e_inf_nan_grads", """
def f(x):
    z = (x - x.detach()).sqrt()
    safe = torch.where(x > 0, x, torch.ones_like(x)).sqrt()
    good = torch.where(x > 0, safe, torch.zeros_like(x))
    bad = torch.where(x > 0, x.sqrt(), torch.zeros_like(x))
    return z.sum(), good.sum(), bad.sum()
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let z = (x - x.detach()).sqrt();
    let safe = x.where_(&x.gt(0.0), &x.ones_like()).sqrt();
    let good = safe.where_(&x.gt(0.0), &x.zeros_like());
    let bad = x.sqrt().where_(&x.gt(0.0), &x.zeros_like());
    (z.sum(), good.sum(), bad.sum())
}""", calls([("x", [2, 5])])))

add(case("new_user_e_writes_through_views", """
def f(x, y):
    x.narrow(1, 0, 2).mul_(2.0)
    x.select(0, 1).add_(y)
    x.t().narrow(0, 2, 1).fill_(0.5)
    return x.sum(0)
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.narrow(1, 0, 2).mul_(2.0);
    x.select(0, 1).add_(y);
    x.t().narrow(0, 2, 1).fill_(0.5);
    x.sum_dim(&[0], false)
}""", calls([("x", [3, 4]), ("y", [4])], mutated=["x"])))

add(case("new_user_e_metadata_mutation", """
def f(x, y):
    x.unsqueeze_(0)
    x.transpose_(1, 2)
    return x * y
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.unsqueeze_(0);
    x.transpose_(1, 2);
    x * y
}""", calls([("x", [2, 3]), ("y", [3, 2])], mutated=["x"])))

add(case("new_user_e_output_aliases", """
def f(x, w):
    h = x @ w
    return h.view(-1), h, x.narrow(0, 0, 1), x.t()
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let h = x.matmul(w);
    (h.view(&[-1]), h, x.narrow(0, 0, 1), x.t())
}""", calls([("x", [2, 3]), ("w", [3, 4])])))

add(case("new_user_e_output_aliases_shared", """
def f(x, w):
    h = x @ w
    return h.view(2, 4), h.view(-1), x.narrow(0, 0, 1), x.t()
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let h = x.matmul(w);
    (h.view(&[2, 4]), h.view(&[-1]), x.narrow(0, 0, 1), x.t())
}""", calls([("x", [2, 3]), ("w", [3, 4])])))

add(case("new_user_e_intermediate_view_writes", """
def f(x):
    h = x * 2
    h.narrow(0, 0, 1).mul_(3.0)
    v = h.view(-1)
    v.add_(1.0)
    return h.sin(), v
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    let h = x * 2.0;
    h.narrow(0, 0, 1).mul_(3.0);
    let v = h.view(&[-1]);
    v.add_(1.0);
    (h.sin(), v)
}""", calls([("x", [2, 3])])))

add(case("new_user_e_detached_write", """
def f(x, y):
    x.detach().mul_(2.0)
    return x * y
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.detach().mul_(2.0);
    x * y
}""", calls([("x", [2, 3]), ("y", [2, 3])], mutated=["x"])))

add(case("new_user_e_matmul_ranks", """
def f(a, b, w, c):
    bt = b.transpose(0, 1)
    return a @ w, bt @ c, bt @ w, w.t() @ a.transpose(1, 2), a @ w.select(1, 0)
""", """
fn f(a: &Tensor, b: &Tensor, w: &Tensor, c: &Tensor) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    let bt = b.transpose(0, 1);
    (a.matmul(w), bt.matmul(c), bt.matmul(w), w.t().matmul(&a.transpose(1, 2)), a.matmul(&w.select(1, 0)))
}""", calls([("a", [2, 3, 4]), ("b", [3, 2, 4]), ("w", [4, 5])], [V("c", [4, 5], [0.05 * i - 0.4 for i in range(20)])])))

add(case("new_user_e_sliding_windows", """
def f(x, k):
    windows = x.as_strided([2, 6, 3], [8, 1, 1], 0)
    return windows @ k
""", """
fn f(x: &Tensor, k: &Tensor) -> Tensor {
    let windows = x.as_strided(&[2, 6, 3], &[8, 1, 1], 0);
    windows.matmul(k)
}""", calls([("x", [2, 8]), ("k", [3])])))

add(case("new_user_e_batchnorm_nchw", """
def f(x, w, b, rm, rv, mom):
    mean = x.mean((0, 2, 3), keepdim=True)
    var = x.var((0, 2, 3), correction=0, keepdim=True)
    y = (x - mean) / (var + 1e-5).sqrt() * w.view(1, -1, 1, 1) + b.view(1, -1, 1, 1)
    with torch.no_grad():
        n = x.numel() / x.size(1)
        rm.mul_(1 - mom).add_(mean.view(-1) * mom)
        rv.mul_(1 - mom).add_(var.view(-1) * (mom * n / (n - 1)))
    return y
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor, rm: &mut Tensor, rv: &mut Tensor, mom: f64) -> Tensor {
    let mean = x.mean_dim(&[0, 2, 3], true);
    let var = x.var_dim(&[0, 2, 3], 0, true);
    let y = (x - &mean) / (&var + 1e-5).sqrt() * w.view(&[1, -1, 1, 1]) + b.view(&[1, -1, 1, 1]);
    no_grad! {
        let n = (x.size(0) * x.size(2) * x.size(3)) as f64;
        rm.mul_(1.0 - mom).add_(&(mean.view(&[-1]) * mom));
        rv.mul_(1.0 - mom).add_(&(var.view(&[-1]) * (mom * n / (n - 1.0))));
    }
    y
}""", calls([("x", [2, 3, 2, 2]), ("w", [3]), ("b", [3])],
            [V("rm", [3], [0.0, 0.1, -0.1]), V("rv", [3], [1.0, 0.9, 1.1])],
            args=["x", "w", "b", "rm", "rv", 0.1])))

add(case("new_user_e_masked_sampling_logits", """
def f(logits, temp):
    s = logits / temp
    m = s.amax(-1, keepdim=True)
    masked = s.masked_fill(s < m - 1.0, float("-inf"))
    return masked.softmax(-1), masked.log_softmax(-1)
""", """
fn f(logits: &Tensor, temp: f64) -> (Tensor, Tensor) {
    let s = logits / temp;
    let m = s.amax_dim(&[-1], true);
    let masked = s.masked_fill(&s.lt(&(m - 1.0)), f64::NEG_INFINITY);
    (masked.softmax(-1), masked.log_softmax(-1))
}""", calls([("logits", [3, 6])], args=["logits", 0.5])))

add(case("new_user_e_accumulate_and_clip", """
def f(g1, g2, acc, max_norm):
    with torch.no_grad():
        acc.add_(g1).add_(g2)
        norm = acc.pow(2).sum().sqrt()
        scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        acc.mul_(scale)
    return norm
""", """
fn f(g1: &Tensor, g2: &Tensor, acc: &mut Tensor, max_norm: f64) -> Tensor {
    no_grad! {
        acc.add_(g1).add_(g2);
        let norm = acc.pow(2.0).sum().sqrt();
        let scale = ((&norm + 1e-6).reciprocal() * max_norm).clamp(f64::NEG_INFINITY, 1.0);
        acc.mul_(&scale);
        norm
    }
}""", [C("nograd", [L("g1", [2, 3]), L("g2", [2, 3]), V("acc", [2, 3], [0.5, -0.25, 1.0, 0.0, 0.75, -1.5])],
        ["g1", "g2", "acc", 0.5])]))

add(case("new_user_e_diagonal_identity", """
def f(m, x):
    m.diagonal().add_(1.0)
    return x @ m, m.diagonal().sum()
""", """
fn f(m: &mut Tensor, x: &Tensor) -> (Tensor, Tensor) {
    m.diagonal().add_(1.0);
    (x.matmul(m), m.diagonal().sum())
}""", calls([("m", [3, 3]), ("x", [2, 3])], mutated=["m"])))

add(case("new_user_e_residual_expand", """
def f(x, pos, gamma, w):
    B = x.size(0)
    h = x + pos.unsqueeze(0).expand(B, -1, -1)
    y = h + gamma * (h @ w).relu()
    return torch.stack([y.mean(-1), y.var(-1, correction=1)], 0)
""", """
fn f(x: &Tensor, pos: &Tensor, gamma: &Tensor, w: &Tensor) -> Tensor {
    let b = x.size(0);
    let h = x + pos.unsqueeze(0).expand(&[b, -1, -1]);
    let y = &h + gamma * h.matmul(w).relu();
    Tensor::stack(&[&y.mean_dim(&[-1], false), &y.var_dim(&[-1], 1, false)], 0)
}""", calls([("x", [2, 3, 4]), ("pos", [3, 4]), ("gamma", [4]), ("w", [4, 4])])))

add(case("new_user_e_var_edge", """
def f(x):
    return x.var(-1, correction=1, keepdim=True), x.var(0, correction=0), x.narrow(1, 0, 1).var(-1, correction=1)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    (x.var_dim(&[-1], 1, true), x.var_dim(&[0], 0, false), x.narrow(1, 0, 1).var_dim(&[-1], 1, false))
}""", calls([("x", [3, 4])])))
