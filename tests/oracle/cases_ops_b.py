"""Oracle corpus of the "ops for models", part B: `index_select`, `gather`,
`scatter_add`, `embedding`, `index_copy_`/`index_add_` (on `&mut` inputs,
as a KV cache is written) and `torch.cat`/`torch.stack` (`Tensor::cat`,
`Tensor::stack` in the DSL).

Same format as cases_extra.py. Index arguments are leaves with explicit
i64 values. Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_ops_b.py tests/oracle/ops_b.json
    python3 tests/oracle/gen_cases.py
"""


def L(name, shape, rg=False):
    d = {"name": name, "shape": list(shape)}
    if rg:
        d["requires_grad"] = True
    return d


def I(name, values, shape=None):
    """An i64 index leaf."""
    return {"name": name, "shape": list(shape or [len(values)]), "values": list(values), "dtype": "i64"}


def C(label, leaves, args, lets=None, note=None):
    c = {"label": label, "leaves": leaves, "args": args}
    if lets:
        c["lets"] = lets
    if note:
        c["note"] = note
    return c


def case(name, python, rust, calls):
    return {"name": name, "python": python.strip("\n") + "\n", "rust": rust.strip("\n"), "calls": calls}


def grad_nograd(floats, indices, args, mutated=()):
    """`grad` (every float leaf requires grad, mutated ones passed as
    copies) and `nograd` calls over the float leaves `floats` ((name, shape)
    pairs) and index leaves `indices`; `args` lists the argument names."""
    def call(label, rg):
        leaves = [L(n, s, rg) for n, s in floats] + list(indices)
        a = [(n + ".copy()") if (rg and n in mutated) else n for n in args]
        return C(label, leaves, a)
    return [call("grad", True), call("nograd", False)]


CASES = []
add = CASES.append

add(case("ops_b_index_select", """
def f(x, idx):
    return x.index_select(1, idx) * 2
""", """
fn f(x: &Tensor, idx: &Tensor) -> Tensor {
    x.index_select(1, &idx) * 2.0
}
""", grad_nograd([("x", [3, 4])], [I("idx", [2, 0, 2, 3])], ["x", "idx"])))

add(case("ops_b_index_select_neg_dim_rows", """
def f(x, idx):
    y = x.index_select(-2, idx)
    return y.sum(), y
""", """
fn f(x: &Tensor, idx: &Tensor) -> (Tensor, Tensor) {
    let y = x.index_select(-2, &idx);
    (y.sum(), y)
}
""", grad_nograd([("x", [4, 3])], [I("idx", [3, 3, 1])], ["x", "idx"])))

add(case("ops_b_gather", """
def f(x, idx):
    return x.gather(-1, idx).exp()
""", """
fn f(x: &Tensor, idx: &Tensor) -> Tensor {
    x.gather(-1, &idx).exp()
}
""", grad_nograd([("x", [3, 4])], [I("idx", [0, 3, 3, 1, 2, 2], [3, 2])], ["x", "idx"])))

add(case("ops_b_scatter_add", """
def f(x, idx, src):
    return x.scatter_add(0, idx, src) * x
""", """
fn f(x: &Tensor, idx: &Tensor, src: &Tensor) -> Tensor {
    x.scatter_add(0, &idx, &src) * x
}
""", grad_nograd([("x", [3, 3]), ("src", [2, 3])], [I("idx", [2, 0, 2, 2, 1, 2], [2, 3])], ["x", "idx", "src"])))

add(case("ops_b_embedding", """
def f(ids, w):
    e = torch.nn.functional.embedding(ids, w)
    return e.sum(1) * 3
""", """
fn f(ids: &Tensor, w: &Tensor) -> Tensor {
    let e = ids.embedding(&w);
    e.sum_dim(&[1], false) * 3.0
}
""", grad_nograd([("w", [5, 3])], [I("ids", [4, 0, 4, 2, 1, 4], [2, 3])], ["ids", "w"])))

add(case("ops_b_cat", """
def f(a, b):
    return torch.cat([a, b, a], 0).tanh()
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    Tensor::cat(&[&a, &b, &a], 0).tanh()
}
""", grad_nograd([("a", [2, 3]), ("b", [1, 3])], [], ["a", "b"])))

add(case("ops_b_cat_views_last_dim", """
def f(a, b):
    c = torch.cat([a.t(), b], -1)
    return c * 2, a.view(-1)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let c = Tensor::cat(&[&a.t(), &b], -1);
    (c * 2.0, a.view(&[-1]))
}
""", grad_nograd([("a", [2, 3]), ("b", [3, 2])], [], ["a", "b"])))

add(case("ops_b_cat_skips_legacy_empty", """
def f(cache, a):
    c = torch.cat([cache, a], 1)
    return torch.cat([c, cache], -1) * 2
""", """
fn f(cache: &Tensor, a: &Tensor) -> Tensor {
    let c = Tensor::cat(&[&cache, &a], 1);
    Tensor::cat(&[&c, &cache], -1) * 2.0
}
""", grad_nograd([("cache", [0]), ("a", [2, 3])], [], ["cache", "a"])))

add(case("ops_b_stack", """
def f(a, b):
    s = torch.stack([a, b * 2], -1)
    return s.sum(0), torch.stack([a, b], 0)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let s = Tensor::stack(&[&a, &(b * 2.0)], -1);
    (s.sum_dim(&[0], false), Tensor::stack(&[&a, &b], 0))
}
""", grad_nograd([("a", [2, 3]), ("b", [2, 3])], [], ["a", "b"])))

add(case("ops_b_index_copy_kv_cache", """
def f(cache, pos, kv, q):
    cache.index_copy_(1, pos, kv)
    return cache.matmul(q).softmax(1)
""", """
fn f(cache: &mut Tensor, pos: &Tensor, kv: &Tensor, q: &Tensor) -> Tensor {
    cache.index_copy_(1, &pos, &kv);
    cache.matmul(&q).softmax(1)
}
""", grad_nograd([("cache", [2, 4, 3]), ("kv", [2, 2, 3]), ("q", [2, 3, 1])], [I("pos", [3, 1])],
                 ["cache", "pos", "kv", "q"], mutated=("cache",))))

add(case("ops_b_index_add_mut", """
def f(a, idx, src):
    a.index_add_(0, idx, src)
    return a * 2
""", """
fn f(a: &mut Tensor, idx: &Tensor, src: &Tensor) -> Tensor {
    a.index_add_(0, &idx, &src);
    a * 2.0
}
""", grad_nograd([("a", [3, 2]), ("src", [4, 2])], [I("idx", [2, 0, 2, 1])], ["a", "idx", "src"], mutated=("a",))))

add(case("ops_b_index_copy_under_no_grad", """
def f(buf, idx, src, x):
    with torch.no_grad():
        buf.index_copy_(0, idx, src)
    return x * buf
""", """
fn f(buf: &mut Tensor, idx: &Tensor, src: &Tensor, x: &Tensor) -> Tensor {
    no_grad! {
        buf.index_copy_(0, &idx, &src);
    }
    x * buf
}
""", [
    C("grad", [L("buf", [3, 2]), L("src", [1, 2]), L("x", [3, 2], True), I("idx", [1])], ["buf", "idx", "src", "x"]),
    C("nograd", [L("buf", [3, 2]), L("src", [1, 2]), L("x", [3, 2]), I("idx", [1])], ["buf", "idx", "src", "x"]),
]))

add(case("ops_b_index_add_into_view_of_mut", """
def f(a, idx, src):
    a.narrow(0, 1, 2).index_add_(1, idx, src)
    return a.sum(0)
""", """
fn f(a: &mut Tensor, idx: &Tensor, src: &Tensor) -> Tensor {
    a.narrow(0, 1, 2).index_add_(1, &idx, &src);
    a.sum_dim(&[0], false)
}
""", grad_nograd([("a", [3, 3]), ("src", [2, 2])], [I("idx", [2, 2])], ["a", "idx", "src"], mutated=("a",))))

add(case("ops_b_out_of_range_index", """
def f(x, idx):
    return x.index_select(0, idx)
""", """
fn f(x: &Tensor, idx: &Tensor) -> Tensor {
    x.index_select(0, &idx)
}
""", [C("nograd", [L("x", [2, 2]), I("idx", [0, 2])], ["x", "idx"])]))
