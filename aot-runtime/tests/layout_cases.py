"""Generates tests/layout_cases.json: random operand layouts, an op, and the
shape and strides PyTorch gives the result. tests/layout_cases.rs replays
every case on the runtime.

Not run in CI. Run it by hand (`python3 tests/layout_cases.py`) with torch
installed; it overwrites the JSON next to it.
"""

import json
import os
import random
import warnings

import torch

warnings.filterwarnings("ignore")
DTYPES = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64}
TWO_OPERANDS = ("add_t", "div_t", "pow_t", "max_t", "eq_t", "where_t", "logical_and")
FLOAT_ONLY = ("exp", "rpow", "rdiv", "softmax", "pow_t", "rand_like")


def random_layout(rng, shape=None, max_rank=4):
    """A layout of `shape` (random if None): dims in a random memory order,
    sometimes with gaps, stride-0 dims and odd strides on size-1 dims."""
    if shape is None:
        shape = [rng.choice([1, 1, 2, 2, 3, 3, 4]) for _ in range(rng.randint(0, max_rank))]
        if shape and rng.random() < 0.05:
            shape[rng.randrange(len(shape))] = 0
    order = list(range(len(shape)))
    rng.shuffle(order)
    stride, acc = [0] * len(shape), 1
    for d in reversed(order):
        stride[d] = acc * rng.choice([1, 1, 1, 2])
        acc = stride[d] * max(shape[d], 1)
    for d in range(len(shape)):
        x = rng.random()
        if shape[d] == 1 and x < 0.4:
            stride[d] = rng.choice([0, 1, 5, 100])
        elif x < 0.1:
            stride[d] = 0
    return list(shape), stride, rng.choice([0, 0, 3])


def broadcastable(rng, shape):
    """A shape that broadcasts to `shape`."""
    s = shape[rng.randint(0, len(shape)):] if rng.random() < 0.3 else list(shape)
    return [1 if rng.random() < 0.3 else n for n in s]


def make(layout, dtype):
    shape, stride, off = layout
    extent = off + 1 + (sum((n - 1) * st for n, st in zip(shape, stride)) if all(shape) else 0)
    base = torch.arange(extent + 1, dtype=torch.float64) % 7 - 3
    base = base > 0 if dtype == "bool" else base.to(DTYPES[dtype])
    return base.as_strided(shape, stride, off)


def run(op, ts, dim):
    x = ts[0]
    table = {
        "neg": lambda: x.neg(), "exp": lambda: x.exp(), "add_t": lambda: ts[0] + ts[1],
        "div_t": lambda: ts[0] / ts[1], "add_s": lambda: x + 1.5, "mul_s": lambda: x * 2,
        "rsub": lambda: 1.0 - x, "rdiv": lambda: 2.0 / x, "rpow": lambda: 2.0 ** x,
        "pow_s": lambda: x ** 2.0, "pow_t": lambda: torch.pow(ts[0], ts[1]),
        "max_t": lambda: torch.maximum(ts[0], ts[1]), "max_s": lambda: x.clamp_min(0.5),
        "eq_t": lambda: ts[0] == ts[1], "eq_s": lambda: x == 1,
        "where_t": lambda: torch.where(ts[0], ts[1], ts[2]), "where_s": lambda: torch.where(ts[0], ts[1], 0.0),
        "clamp": lambda: x.clamp(-1.0, 1.0), "copy": lambda: x.clone(), "contiguous": lambda: x.contiguous(),
        "to_dtype": lambda: x.to(torch.float32 if x.dtype == torch.float64 else torch.float64),
        "zeros_like": lambda: torch.zeros_like(x), "rand_like": lambda: torch.rand_like(x),
        "logical_not": lambda: x.logical_not(), "logical_and": lambda: torch.logical_and(ts[0], ts[1]),
        "sum_dim": lambda: x.sum(dim), "sum_dim_keep": lambda: x.sum(dim, keepdim=True),
        "softmax": lambda: x.softmax(dim),
    }
    return table[op]()


def main():
    rng = random.Random(2)
    ops = ["neg", "exp", "add_t", "div_t", "add_s", "mul_s", "rsub", "rdiv", "rpow", "pow_s", "pow_t", "max_t",
           "max_s", "eq_t", "eq_s", "where_t", "where_s", "clamp", "copy", "contiguous", "to_dtype", "zeros_like",
           "rand_like", "logical_not", "logical_and", "sum_dim", "sum_dim_keep", "softmax"]
    cases = []
    while len(cases) < 800:
        op = rng.choice(ops)
        a = random_layout(rng, max_rank=rng.choice([3, 5]))
        ins = [(a, rng.choice(["f32", "f32", "f64", "i64"]))]
        if op in TWO_OPERANDS:
            if rng.random() < 0.15:
                b = ([], [], 0)
            else:
                b = random_layout(rng, list(a[0]) if rng.random() < 0.5 else broadcastable(rng, a[0]))
            pair = (b, rng.choice(["f32", "f32", "f64", "i64"]))
            ins = [pair] + ins if rng.random() < 0.3 else ins + [pair]
        if op.startswith("where"):
            c = random_layout(rng, broadcastable(rng, a[0]) if rng.random() < 0.5 else list(a[0]))
            ins = [(c, "bool")] + ins
        if op in FLOAT_ONLY:
            ins = [(l, "f32" if d == "i64" else d) for l, d in ins]
        dim = rng.randrange(len(a[0])) if a[0] else 0
        if op in ("sum_dim", "sum_dim_keep", "softmax") and not a[0]:
            continue
        try:
            r = run(op, [make(l, d) for l, d in ins], dim)
        except RuntimeError:
            continue
        cases.append([op, dim, [[l[0], l[1], l[2], d] for l, d in ins], list(r.shape), list(r.stride())])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layout_cases.json")
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases) + "\n]\n")
    print(f"{len(cases)} cases with torch {torch.__version__} -> {path}")


if __name__ == "__main__":
    main()
