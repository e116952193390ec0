"""Values and gradients of calls with composite arguments: PyTorch modules
(parameters and buffers, nested modules, lists of modules, tied and frozen
parameters) called through `torch.func.functional_call` under
`aot_function`, the oracle for tests/tests/module_oracle.rs, where the same
modules are structs that derive `TensorTree` passed to `#[aot_fn]`
functions.

Run with the project's PyTorch 2.15 venv:
    /work/venv-torch/bin/python tests/oracle/gen_modules.py
It writes tests/oracle/modules.json: per case, the module's state in the
Rust struct's field order (path, shape, parameter or buffer, whether it
requires grad; entry k holds the leaf values of gen.py with that k), the
user inputs (continuing k), and what the compiled call gave: PyTorch's
`fw_metadata` (inputs in state-then-inputs order), outputs, the state
after the call, and the gradients of
`loss = sum_i sum(out_i * w_i)` (gen.py's loss) for every leaf that
requires grad. Eager PyTorch must agree.
"""

import json
import os
import sys

import torch
from torch import nn
from torch._functorch.aot_autograd import aot_function

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen import REC, _meta_json, close, json_safe, leaf_values, loss_of, nop, tensor_rec  # noqa: E402


class BatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))
        self.bias = nn.Parameter(torch.zeros(3))
        self.register_buffer("running_mean", torch.zeros(3))
        self.register_buffer("running_var", torch.ones(3))
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        mean = x.mean(0)
        var = x.var(0, correction=0)
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(mean * 0.1)
            self.running_var.mul_(0.9).add_(x.var(0, correction=1) * 0.1)
            self.steps.add_(1.0)
        return (x - mean) / (var + 1e-5).sqrt() * self.weight + self.bias


class Linear(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(i, o))
        self.b = nn.Parameter(torch.zeros(o))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Linear(4, 5), Linear(5, 5), Linear(5, 2)])

    def forward(self, x, y):
        h = x
        for k, l in enumerate(self.layers):
            h = h @ l.w + l.b
            if k < 2:
                h = torch.tanh(h)
        return (h - y).pow(2).mean(), h


class Ema(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3, 3))
        self.register_buffer("shadow", torch.zeros(3, 3))

    def forward(self, x):
        with torch.no_grad():
            self.shadow.mul_(0.99).add_(self.w * 0.01)
        return x @ self.w, x @ self.shadow


class TiedLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Parameter(torch.zeros(6, 4))
        self.norm = nn.Parameter(torch.zeros(4))

    def forward(self, ids, targets):
        h = torch.nn.functional.embedding(ids, self.emb)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        logits = h @ self.emb.t()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 6), targets.reshape(-1))


class Frozen(nn.Module):
    """A frozen backbone and a trainable head."""

    def __init__(self):
        super().__init__()
        self.backbone = Linear(3, 4)
        self.head = Linear(4, 2)

    def forward(self, x):
        feats = torch.relu(x @ self.backbone.w + self.backbone.b)
        return feats @ self.head.w + self.head.b


class KvCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.wk = nn.Parameter(torch.zeros(3, 3))
        self.register_buffer("cache", torch.zeros(1, 4, 3))

    def forward(self, x, q):
        k = x @ self.wk
        with torch.no_grad():
            self.cache.narrow(1, 2, 1).copy_(k.unsqueeze(1))
        att = (q.unsqueeze(1) @ self.cache.transpose(1, 2)).softmax(-1)
        return (att @ self.cache).squeeze(1) + k


def S(path, shape, kind="parameter", rg=True):
    return {"path": path, "shape": list(shape), "kind": kind, "requires_grad": rg and kind == "parameter"}


def I(name, shape, rg=False, values=None, dtype="f32"):
    d = {"name": name, "shape": list(shape), "requires_grad": rg, "dtype": dtype}
    if values is not None:
        d["values"] = values
    return d


CASES = [
    ("batch_norm", BatchNorm, [S("weight", [3]), S("bias", [3]), S("running_mean", [3], "buffer"),
                               S("running_var", [3], "buffer"), S("steps", [], "buffer")],
     [I("x", [4, 3], rg=True)]),
    ("mlp", Mlp, [S(f"layers.{k}.{n}", s) for k, (i, o) in enumerate([(4, 5), (5, 5), (5, 2)])
                  for n, s in (("w", [i, o]), ("b", [o]))],
     [I("x", [3, 4]), I("y", [3, 2])]),
    ("ema", Ema, [S("w", [3, 3]), S("shadow", [3, 3], "buffer")], [I("x", [2, 3], rg=True)]),
    ("tied_lm", TiedLm, [S("emb", [6, 4]), S("norm", [4])],
     [I("ids", [2, 3], values=[0, 5, 2, 3, 3, 1], dtype="i64"), I("targets", [2, 3], values=[5, 2, 3, 3, 1, 0], dtype="i64")]),
    ("frozen_backbone", Frozen, [S("backbone.w", [3, 4], rg=False), S("backbone.b", [4], rg=False),
                                 S("head.w", [4, 2]), S("head.b", [2])],
     [I("x", [5, 3])]),
    ("kv_cache", KvCache, [S("wk", [3, 3]), S("cache", [1, 4, 3], "buffer")], [I("x", [1, 3]), I("q", [1, 3], rg=True)]),
]


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def make(k, spec):
    if "values" in spec:
        dt = {"i64": torch.int64, "f32": torch.float32}[spec["dtype"]]
        return torch.tensor(spec["values"], dtype=dt).reshape(spec["shape"]).clone()
    t = torch.tensor(leaf_values(k, numel(spec["shape"])), dtype=torch.float32).reshape(spec["shape"]).clone()
    return t.requires_grad_(spec.get("requires_grad", False))


def run(mod_cls, state_spec, input_spec, compiled):
    mod = mod_cls()
    state = [make(k, s) for k, s in enumerate(state_spec)]
    inputs = [make(len(state_spec) + k, s) for k, s in enumerate(input_spec)]
    names = [s["path"] for s in state_spec]

    def f(*flat):
        st = dict(zip(names, flat[:len(names)]))
        return torch.func.functional_call(mod, st, tuple(flat[len(names):]))

    fn = aot_function(f, fw_compiler=nop, bw_compiler=nop, keep_inference_input_mutations=True) if compiled else f
    REC.clear()
    outs = fn(*state, *inputs)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    rec = {"outputs": [tensor_rec(o) for o in outs], "state_after": [tensor_rec(t) for t in state]}
    loss = loss_of(outs)
    grads = {}
    if loss is not None:
        loss.backward()
        for spec, t in list(zip(state_spec, state)):
            if t.requires_grad:
                grads[spec["path"]] = None if t.grad is None else tensor_rec(t.grad)["values"]
        for spec, t in zip(input_spec, inputs):
            if t.requires_grad:
                grads[spec["name"]] = None if t.grad is None else tensor_rec(t.grad)["values"]
    rec["grads"] = grads
    if compiled:
        rec["fw_metadata"] = _meta_json(REC["metas"][0])
    return rec


def main():
    out = []
    for name, cls, state_spec, input_spec in CASES:
        compiled = run(cls, state_spec, input_spec, True)
        eager = run(cls, state_spec, input_spec, False)
        ok = close(eager, {k: v for k, v in compiled.items() if k != "fw_metadata"})
        print(name, "ok" if ok else "MISMATCH", file=sys.stderr)
        out.append({"name": name, "state": state_spec, "inputs": input_spec, "result": compiled, "matches_eager": ok})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules.json")
    doc = {"torch": torch.__version__, "cases": out}
    json.dump(json_safe(doc), open(path, "w"), indent=1, allow_nan=False)


if __name__ == "__main__":
    main()
