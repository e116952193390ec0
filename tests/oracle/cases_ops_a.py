"""Oracle corpus of the ops for models, part A (issue 16): `log1p`, `expm1`,
`clamp`, `masked_fill`, `tril`/`triu`, `cumsum`, `flatten`, `view_as`,
`argmax`/`argmin`, `max_dim`/`min_dim` (PyTorch's `max(dim)`/`min(dim)`),
`cross_entropy` and `nll_loss`, alone, fused with elementwise ops, in
training calls and in functions that mutate an input.

Index, target and mask arguments are leaves with explicit `values` (dtype
"i64" or "bool"); float leaves with ties use explicit "f32" values.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_ops_a.py tests/oracle/ops_a.json
    python3 tests/oracle/gen_cases.py
"""


def L(name, shape, rg=False):
    d = {"name": name, "shape": list(shape)}
    if rg:
        d["requires_grad"] = True
    return d


def V(name, shape, values, dtype):
    # numbers in the JSON (the Rust loader reads f64s; a bool leaf holds 0 or 1)
    return {"name": name, "shape": list(shape), "values": [int(v) if dtype == "bool" else v for v in values], "dtype": dtype}


def C(label, leaves, args):
    return {"label": label, "leaves": leaves, "args": args}


def calls(floats, fixed=(), mutated=(), order=None):
    """`grad` (the float leaves require grad; mutated ones are passed as
    copies) and `nograd` calls. `fixed` are index/mask leaves; `order` names
    the arguments (default: the floats, then the fixed)."""
    names = order or [n for n, _ in floats] + [f["name"] for f in fixed]
    fixed = list(fixed)
    grad = C("grad", [L(n, s, True) for n, s in floats] + fixed,
             [(n + ".copy()") if n in mutated else n for n in names])
    nograd = C("nograd", [L(n, s) for n, s in floats] + fixed, names)
    return [grad, nograd]


def case(name, python, rust, calls):
    return {"name": name, "python": python.strip("\n") + "\n", "rust": rust.strip("\n"), "calls": calls}


F = "torch.nn.functional"
CASES = []
add = CASES.append

# --- elementwise -------------------------------------------------------------
add(case("opsa_log1p", """
def f(x):
    return torch.log1p(x)
""", """
fn f(x: &Tensor) -> Tensor {
    x.log1p()
}""", calls([("x", [3, 4])])))

add(case("opsa_expm1_fused", """
def f(x):
    return torch.expm1(x) * 2 + x
""", """
fn f(x: &Tensor) -> Tensor {
    x.expm1() * 2.0 + x
}""", calls([("x", [2, 5])])))

add(case("opsa_log1p_expm1_chain", """
def f(x, y):
    return torch.log1p(torch.expm1(x) + 1.5) * y.expm1()
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    (x.expm1() + 1.5).log1p() * y.expm1()
}""", calls([("x", [4, 3]), ("y", [3])])))

add(case("opsa_clamp", """
def f(x):
    return x.clamp(-0.5, 0.3) * 3
""", """
fn f(x: &Tensor) -> Tensor {
    x.clamp(-0.5, 0.3) * 3.0
}""", calls([("x", [3, 5])])))

# --- masks ---------------------------------------------------------------------
M23 = V("m", [2, 3], [True, False, False, True, True, False], "bool")
add(case("opsa_masked_fill", """
def f(x, m):
    return x.masked_fill(m, -1.5) * 2
""", """
fn f(x: &Tensor, m: &Tensor) -> Tensor {
    x.masked_fill(m, -1.5) * 2.0
}""", calls([("x", [2, 3])], [M23])))

add(case("opsa_masked_fill_broadcast_mask", """
def f(x, m):
    return x.masked_fill(m, 0.25)
""", """
fn f(x: &Tensor, m: &Tensor) -> Tensor {
    x.masked_fill(m, 0.25)
}""", calls([("x", [2, 3])], [V("m", [3], [False, True, False], "bool")])))

add(case("opsa_masked_fill_broadcast_input", """
def f(x, m):
    return x.masked_fill(m, 4.0).exp()
""", """
fn f(x: &Tensor, m: &Tensor) -> Tensor {
    x.masked_fill(m, 4.0).exp()
}""", calls([("x", [1, 3])], [M23])))

add(case("opsa_causal_attention_scores", """
def f(q, k, m):
    s = q @ k.t()
    return s.masked_fill(m, -1e9).softmax(-1)
""", """
fn f(q: &Tensor, k: &Tensor, m: &Tensor) -> Tensor {
    let s = q.matmul(&k.t());
    s.masked_fill(m, -1e9).softmax(-1)
}""", calls([("q", [3, 4]), ("k", [3, 4])],
            [V("m", [3, 3], [False, True, True, False, False, True, False, False, False], "bool")])))

add(case("opsa_tril_triu", """
def f(x):
    return x.tril(0) + x.triu(1) * 2
""", """
fn f(x: &Tensor) -> Tensor {
    x.tril(0) + x.triu(1) * 2.0
}""", calls([("x", [3, 4])])))

add(case("opsa_tril_batched_offsets", """
def f(x):
    return x.tril(-1) - x.triu(2)
""", """
fn f(x: &Tensor) -> Tensor {
    x.tril(-1) - x.triu(2)
}""", calls([("x", [2, 3, 4])])))

# --- scans and index reductions ------------------------------------------------
add(case("opsa_cumsum", """
def f(x):
    return x.cumsum(1), x.cumsum(0) * x
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    (x.cumsum(1), x.cumsum(0) * x)
}""", calls([("x", [3, 4])])))

add(case("opsa_cumsum_negative_dim_3d", """
def f(x):
    return x.cumsum(-1).sin()
""", """
fn f(x: &Tensor) -> Tensor {
    x.cumsum(-1).sin()
}""", calls([("x", [2, 2, 3])])))

add(case("opsa_cumsum_int", """
def f(i):
    return i.cumsum(0)
""", """
fn f(i: &Tensor) -> Tensor {
    i.cumsum(0)
}""", [C("nograd", [V("i", [5], [3, -1, 4, 1, -5], "i64")], ["i"])]))

TIES = V("x", [2, 4], [1.0, 3.0, 3.0, -2.0, 0.5, 0.5, -1.0, -1.0], "f32")
add(case("opsa_argmax_argmin", """
def f(x):
    return x.argmax(1), x.argmin(0, keepdim=True), x.argmax(-1, keepdim=True)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    (x.argmax(1, false), x.argmin(0, true), x.argmax(-1, true))
}""", calls([("x", [3, 4])]) + [C("ties", [TIES], ["x"])]))

add(case("opsa_max_dim", """
def f(x):
    v, i = x.max(1)
    return v * 2, i
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    let (v, i) = x.max_dim(1, false);
    (v * 2.0, i)
}""", calls([("x", [3, 4])])))

add(case("opsa_min_dim_keepdim_ties", """
def f(x):
    v, i = x.min(-1, keepdim=True)
    w, j = x.max(0)
    return v.exp(), i, w * w, j
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let (v, i) = x.min_dim(-1, true);
    let (w, j) = x.max_dim(0, false);
    (v.exp(), i, w * w, j)
}""", calls([("x", [3, 4])]) + [
    C("ties_grad", [dict(TIES, requires_grad=True)], ["x"]),
    C("ties", [TIES], ["x"]),
]))

# --- losses --------------------------------------------------------------------
T4 = V("t", [4], [1, 0, 4, 2], "i64")
add(case("opsa_cross_entropy", """
def f(x, t):
    return torch.nn.functional.cross_entropy(x, t)
""", """
fn f(x: &Tensor, t: &Tensor) -> Tensor {
    x.cross_entropy(t)
}""", calls([("x", [4, 5])], [T4])))

add(case("opsa_cross_entropy_ignore_index", """
def f(x, t):
    return torch.nn.functional.cross_entropy(x * 3, t)
""", """
fn f(x: &Tensor, t: &Tensor) -> Tensor {
    (x * 3.0).cross_entropy(t)
}""", calls([("x", [4, 5])], [V("t", [4], [3, -100, 0, 1], "i64")])))

add(case("opsa_cross_entropy_1d", """
def f(x, t):
    return torch.nn.functional.cross_entropy(x, t)
""", """
fn f(x: &Tensor, t: &Tensor) -> Tensor {
    x.cross_entropy(t)
}""", calls([("x", [5])], [V("t", [], [3], "i64")])))

add(case("opsa_nll_loss", """
def f(x, t):
    return torch.nn.functional.nll_loss(torch.log_softmax(x, 1), t)
""", """
fn f(x: &Tensor, t: &Tensor) -> Tensor {
    x.log_softmax(1).nll_loss(t)
}""", calls([("x", [4, 5])], [T4])))

add(case("opsa_linear_cross_entropy", """
def f(x, w, t):
    return torch.nn.functional.cross_entropy(x @ w, t)
""", """
fn f(x: &Tensor, w: &Tensor, t: &Tensor) -> Tensor {
    x.matmul(w).cross_entropy(t)
}""", calls([("x", [4, 3]), ("w", [3, 5])], [T4])))

# --- views -----------------------------------------------------------------------
add(case("opsa_flatten", """
def f(x):
    return x.flatten(1, 2) * 2
""", """
fn f(x: &Tensor) -> Tensor {
    x.flatten(1, 2) * 2.0
}""", calls([("x", [2, 3, 4])])))

add(case("opsa_flatten_alias_of_input", """
def f(x):
    return x.flatten(0, -1)
""", """
fn f(x: &Tensor) -> Tensor {
    x.flatten(0, -1)
}""", calls([("x", [2, 3])])))

add(case("opsa_flatten_noncontiguous_copies", """
def f(x):
    return x.t().flatten(0, 1) + 1
""", """
fn f(x: &Tensor) -> Tensor {
    x.t().flatten(0, 1) + 1.0
}""", calls([("x", [2, 3])])))

add(case("opsa_view_as", """
def f(x, y):
    return x.view_as(y) * y
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x.view_as(y) * y
}""", calls([("x", [6]), ("y", [2, 3])])))

add(case("opsa_view_as_alias_of_input", """
def f(x, y):
    return x.view_as(y)
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x.view_as(y)
}""", calls([("x", [2, 3]), ("y", [3, 2])])))

# --- in-place uses -----------------------------------------------------------------
add(case("opsa_inplace_buffer_update", """
def f(w, x):
    w.add_(x.log1p())
    return w.cumsum(0)
""", """
fn f(w: &mut Tensor, x: &Tensor) -> Tensor {
    w.add_(x.log1p());
    w.cumsum(0)
}""", calls([("w", [3, 2]), ("x", [3, 2])], mutated=("w",))))

add(case("opsa_inplace_masked_copy", """
def f(buf, x, m):
    buf.copy_(x.masked_fill(m, 0.0).tril(0))
    return buf.sum()
""", """
fn f(buf: &mut Tensor, x: &Tensor, m: &Tensor) -> Tensor {
    buf.copy_(x.masked_fill(m, 0.0).tril(0));
    buf.sum()
}""", calls([("buf", [2, 3]), ("x", [2, 3])], [M23], mutated=("buf",))))

add(case("opsa_inplace_clamp_then_loss", """
def f(x, t):
    y = x * 2
    y.clamp_(-0.8, 0.8)
    return torch.nn.functional.cross_entropy(y, t), y.argmax(1)
""", """
fn f(x: &Tensor, t: &Tensor) -> (Tensor, Tensor) {
    let y = x * 2.0;
    y.clamp_(-0.8, 0.8);
    (y.cross_entropy(t), y.argmax(1, false))
}""", calls([("x", [4, 5])], [T4])))
