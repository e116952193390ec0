"""Tensor subclasses: what PyTorch's AOTAutograd records for a subclass
(`TwoTensor`, two inner tensors `a` and `b` that every op applies to
alike) passed to and returned from `aot_function`, the oracle for
tests/tests/subclass_oracle.rs, where the same functions take and return
a `#[tensor_subclass]` struct.

Run with the project's PyTorch 2.15 venv:
    /work/venv-torch/bin/python tests/oracle/gen_subclass.py
It writes tests/oracle/subclass.json: per case, the arguments (a subclass
or a plain tensor, each inner or plain tensor holding the leaf values of
gen.py for its flat index k), PyTorch's `subclass_inp_meta` and
`subclass_fw_graph_out_meta` (one entry per argument or output: a
`SubclassCreationMeta`, or a plain tensor's flat index), the outputs'
inner tensors, the arguments' inner tensors after the call, and the
gradients of every inner or plain tensor that requires grad, for gen.py's
loss over the outputs' inner tensors.
"""

import json
import os
import sys

import torch
from torch._functorch.aot_autograd import aot_function
from torch.testing._internal.two_tensor import TwoTensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen import REC, close, json_safe, leaf_values, nop, tensor_rec  # noqa: E402


def f_mul_sin(w, x):
    return (w * x).sin() + 1.0


def f_two_subclasses(u, x, v):
    return u * v + x.exp()


def f_matmul(x, w):
    return (x @ w).relu() * 2.0


def f_mutate(w, x):
    with torch.no_grad():
        w.mul_(0.5)
    return w * x


# name, function, arguments: ("sub", shape) or ("plain", shape), whether
# the tensors require grad
CASES = [
    ("mul_sin", f_mul_sin, [("sub", [2, 3]), ("plain", [2, 3])], True),
    ("two_subclasses", f_two_subclasses, [("sub", [2, 3]), ("plain", [3]), ("sub", [2, 3])], True),
    ("matmul", f_matmul, [("plain", [2, 4]), ("sub", [4, 3])], True),
    ("mutate", f_mutate, [("sub", [3]), ("plain", [3])], False),
]


def meta_json(m):
    if isinstance(m, int):
        return {"kind": "plain", "unwrapped_idx": m}
    if type(m).__name__ == "PlainTensorMeta":
        return {"kind": "plain", "unwrapped_idx": m.unwrapped_idx}
    return {
        "kind": "subclass",
        "flat_tensor_start_idx": m.flat_tensor_start_idx,
        "arg_count": m.arg_count,
        "attrs": list(m.attrs.keys()),
        "outer_size": list(m.outer_size),
        "outer_stride": list(m.outer_stride),
        "outer_size_from_attr": getattr(m, "outer_size_from_attr", None),
    }


def inner(t):
    return [t.a, t.b] if isinstance(t, TwoTensor) else [t]


def run(fn, spec, rg, compiled):
    args, flat, k = [], [], 0
    for kind, shape in spec:
        n = 1
        for s in shape:
            n *= s
        parts = []
        for _ in range(2 if kind == "sub" else 1):
            t = torch.tensor(leaf_values(k, n), dtype=torch.float32).reshape(shape).clone()
            parts.append(t)
            k += 1
        if kind == "sub":
            a = TwoTensor(parts[0], parts[1])
            if rg:
                a.requires_grad_(True)
        else:
            a = parts[0].requires_grad_(rg)
        args.append(a)
    f = aot_function(fn, fw_compiler=nop, bw_compiler=nop, keep_inference_input_mutations=True) if compiled else fn
    REC.clear()
    outs = f(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    rec = {"outputs": [[tensor_rec(t) for t in inner(o)] for o in outs],
           "args_after": [[tensor_rec(t) for t in inner(a)] for a in args]}
    # gen.py's loss, inner tensor by inner tensor: output inner tensor j is
    # weighted by the leaf values with k = 100 + j (a subclass output by a
    # subclass of weights, so that each inner tensor meets its own).
    loss = None
    j = 0
    for o in outs:
        ws = []
        for t in inner(o):
            ws.append(torch.tensor(leaf_values(100 + j, t.numel()), dtype=t.dtype).reshape(t.shape))
            j += 1
        if o.requires_grad:
            w = TwoTensor(ws[0], ws[1]) if isinstance(o, TwoTensor) else ws[0]
            term = (o * w).sum()
            loss = term if loss is None else loss + term
    grads = {}
    if loss is not None:
        loss.backward()
        for i, a in enumerate(args):
            if a.requires_grad:
                grads[str(i)] = None if a.grad is None else [tensor_rec(t)["values"] for t in inner(a.grad)]
    rec["grads"] = grads
    if compiled:
        m = REC["metas"][0]
        rec["subclass_inp_meta"] = [meta_json(x) for x in m.subclass_inp_meta]
        rec["subclass_fw_graph_out_meta"] = [meta_json(x) for x in m.subclass_fw_graph_out_meta]
    return rec


def main():
    out = []
    for name, fn, spec, rg in CASES:
        compiled = run(fn, spec, rg, True)
        eager = run(fn, spec, rg, False)
        ok = close(eager, {k: v for k, v in compiled.items() if not k.startswith("subclass_")})
        print(name, "ok" if ok else "MISMATCH", file=sys.stderr)
        out.append({"name": name, "args": [{"kind": k, "shape": s} for k, s in spec], "requires_grad": rg,
                    "result": compiled, "matches_eager": ok})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "subclass.json")
    json.dump(json_safe({"torch": torch.__version__, "cases": out}), open(path, "w"), indent=1, allow_nan=False)


if __name__ == "__main__":
    main()
