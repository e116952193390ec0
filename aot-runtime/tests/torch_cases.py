"""Computes the expected values of tests/torch_cases.rs with PyTorch.

Not run in CI. Run it by hand (`python3 tests/torch_cases.py`) with torch
installed; it prints Rust constants, each under a comment with the Python
code that produced it. Paste the output between the GENERATED markers of
torch_cases.rs.
"""

import torch

torch.set_default_dtype(torch.float32)
f64 = torch.float64

# Shared inputs (the Rust file spells the same literals).
PRELUDE = """
X23 = [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]]
X34 = [[0.3, -1.2, 2.5, 0.7], [1.1, 0.4, -0.9, 1.8], [-0.6, 2.2, 0.05, -1.4]]
X43 = [[0.9, -0.3, 1.6], [-2.1, 0.75, 0.2], [1.3, -1.1, 0.45], [0.6, 2.4, -0.8]]
X234 = (torch.arange(24, dtype=f64) * 0.25 - 2.9).reshape(2, 3, 4).tolist()
C43 = [[True, False, True], [False, False, True], [True, True, False], [False, True, True]]
W = lambda out: torch.arange(1, out.numel() + 1, dtype=f64).reshape(out.shape).sin()
def grads(f, *ins):
    ins = [torch.tensor(i, dtype=f64, requires_grad=True) for i in ins]
    out = f(*ins)
    (out * W(out)).sum().backward()
    return [out] + [i.grad for i in ins]
"""

CASES = [
    # ---- type promotion
    ("PROMO_F16_BF16",
     "r = torch.tensor([1.5, -2.25], dtype=torch.float16) + torch.tensor([0.1, 3.3], dtype=torch.bfloat16)",
     ["r"]),
    ("PROMO_INT_FLOAT_SCALAR", "r = torch.tensor([1, -2, 7]) + 2.5", ["r"]),
    ("PROMO_INT_TRUEDIV", "r = torch.tensor([7, -7, 1]) / torch.tensor([2, 2, 3])", ["r"]),
    ("PROMO_INT_0DIM_F64", "r = torch.tensor([1, 2]) * torch.tensor(0.1, dtype=torch.float64)", ["r"]),
    ("PROMO_F32_0DIM_F64", "r = torch.tensor([1.0, 3.0]) * torch.tensor(0.1, dtype=torch.float64)", ["r"]),
    ("PROMO_F16_SCALAR", "r = torch.tensor([1.0, 1000.0, 3.0], dtype=torch.float16) * 0.1", ["r"]),
    ("PROMO_BOOL_INT", "r = torch.tensor([True, False]) + torch.tensor(3)", ["r"]),
    # ---- broadcasting grads
    ("BCAST",
     "out, gx, gy = grads(lambda x, y: x * y + x, [[[0.5, -1.0, 2.0]], [[1.5, 0.25, -0.5]]], [[1.0], [2.0], [-3.0], [0.5]])",
     ["out", "gx", "gy"]),
    # ---- CopySlices (slice assignment) and in-place on a view
    ("COPYSLICES",
     "def f(x, y):\n    b = x * 2\n    b[1:3] = y\n    return b * x\n"
     "out, gx, gy = grads(f, X34, [[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.25, 2.0]])",
     ["out", "gx", "gy"]),
    ("INPLACE_VIEW_MUL",
     "def f(x, y):\n    b = x * 1\n    b[1:3].mul_(y)\n    return b.exp()\n"
     "out, gx, gy = grads(f, X34, [0.5, -1.0, 2.0, 1.5])",
     ["out", "gx", "gy"]),
    ("T_INPLACE_MATMUL",
     "def f(x, y):\n    b = x * 1\n    b.t_()\n    return b @ y\n"
     "out, gx, gy = grads(f, X23, [[1.0, -1.0], [0.5, 2.0]])",
     ["out", "gx", "gy"]),
    # ---- var correction
    ("VAR_C0", "r = torch.tensor(X34, dtype=f64).var(dim=1, correction=0)", ["r"]),
    ("VAR_C1", "r = torch.tensor(X34, dtype=f64).var(dim=1, correction=1)", ["r"]),
    ("VAR_C2_KEEP", "r = torch.tensor(X34, dtype=f64).var(dim=0, correction=2, keepdim=True)", ["r"]),
    ("VAR_GRAD", "out, gx = grads(lambda x: x.var(dim=[0, 1], correction=1), X34)", ["out", "gx"]),
    # ---- softmax
    ("SOFTMAX", "out, gx = grads(lambda x: torch.softmax(x, -1), X34)", ["out", "gx"]),
    ("LOG_SOFTMAX", "out, gx = grads(lambda x: torch.log_softmax(x, 0), X34)", ["out", "gx"]),
    # ---- gelu (exact, erf)
    ("GELU", "out, gx = grads(lambda x: torch.nn.functional.gelu(x), [-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])", ["out", "gx"]),
    # ---- amax ties split evenly
    ("AMAX_TIES", "out, gx = grads(lambda x: x.amax(dim=1), [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])", ["out", "gx"]),
    ("AMAX_TIES_ALL", "out, gx = grads(lambda x: x.amax(dim=(0, 1), keepdim=True), [[1.0, 3.0], [3.0, 0.0]])", ["out", "gx"]),
    # ---- maximum/minimum ties 0.5/0.5
    ("MAXIMUM_TIES", "out, ga, gb = grads(torch.maximum, [1.0, 2.0, 3.0, -1.0], [1.0, 0.5, 3.0, 2.0])", ["out", "ga", "gb"]),
    ("MINIMUM_TIES", "out, ga, gb = grads(torch.minimum, [1.0, 2.0, 3.0, -1.0], [1.0, 0.5, 3.0, 2.0])", ["out", "ga", "gb"]),
    # ---- clamp at the bounds passes gradient (min <= x <= max)
    ("CLAMP_BOUNDS", "out, gx = grads(lambda x: x.clamp(-0.5, 0.5), [-1.0, -0.5, 0.0, 0.5, 1.0])", ["out", "gx"]),
    # ---- pow at 0
    ("POW_TT_ZERO", "out, ga, gb = grads(torch.pow, [0.0, 0.0, 2.0, 3.0, 0.0], [2.0, 0.0, 0.5, 0.0, 1.0])", ["out", "ga", "gb"]),
    ("POW_SCALAR_ZERO", "out, gx = grads(lambda x: x.pow(2.0) + x.pow(0.0) + x.pow(3), [0.0, 1.5, -2.0])", ["out", "gx"]),
    ("RPOW", "out, gx = grads(lambda x: 2.0 ** x, [0.0, 1.5, -2.0])", ["out", "gx"]),
    # ---- matmul 1-D cases
    ("MATMUL_1D_1D", "out, ga, gb = grads(torch.matmul, [1.0, 2.0, -1.0], [0.5, -0.5, 2.0])", ["out", "ga", "gb"]),
    ("MATMUL_2D_1D", "out, ga, gb = grads(torch.matmul, X23, [0.5, -0.5, 2.0])", ["out", "ga", "gb"]),
    ("MATMUL_1D_2D", "out, ga, gb = grads(torch.matmul, [1.0, -2.0], X23)", ["out", "ga", "gb"]),
    ("MATMUL_1D_3D", "out, ga, gb = grads(torch.matmul, [1.0, -2.0], [X23, X23])", ["out", "ga", "gb"]),
    ("MATMUL_BATCH_BCAST", "out, ga, gb = grads(torch.matmul, [[X23]], [[[1.0, 0.5], [-1.0, 2.0], [0.25, 0.0]], [[0.0, 1.0], [1.0, 0.0], [2.0, -2.0]]])", ["out", "ga", "gb"]),
    # ---- reshape of a transposed tensor (a copy) and its gradient
    ("RESHAPE_T", "out, gx = grads(lambda x: x.t().reshape(-1) * torch.arange(6, dtype=f64), X23)", ["out", "gx"]),
    # ---- misc unary grads
    ("UNARY_MIX",
     "out, gx = grads(lambda x: x.sigmoid() + x.tanh() + torch.nn.functional.silu(x) + x.abs() + x.relu(), [-2.0, -0.5, 0.0, 0.5, 2.0])",
     ["out", "gx"]),
    # ---- result layouts (TensorIterator / preserve_format); checked with strides
    ("LAYOUT_T_PLUS_SCALAR", "out, gx = grads(lambda x: x.t() + 1, X23)", ["out", "gx"]),
    ("LAYOUT_PERMUTE_EXP", "out, gx = grads(lambda x: x.permute(2, 0, 1).exp(), X234)", ["out", "gx"]),
    ("LAYOUT_MIXED_CT", "out, ga, gb = grads(lambda a, b: a * b.t(), X34, X43)", ["out", "ga", "gb"]),
    ("LAYOUT_MIXED_TC", "out, ga, gb = grads(lambda a, b: b.t() * a, X34, X43)", ["out", "ga", "gb"]),
    ("LAYOUT_T_PLUS_ROW", "out, ga, gb = grads(lambda a, r: a.t() + r, X43, [0.5, -1.0, 2.0, 0.25])", ["out", "ga", "gb"]),
    ("LAYOUT_COL_PLUS_ROW", "r = torch.tensor([[1.0], [2.0], [3.0]]) + torch.tensor([[0.5, -1.0, 2.0, 0.25]])", ["r"]),
    ("LAYOUT_SLICE", "out, gx = grads(lambda x: x[:, ::2] * 2, X34)", ["out", "gx"]),
    ("LAYOUT_T_SLICE", "out, gx = grads(lambda x: x.t()[:, ::2].neg(), X34)", ["out", "gx"]),
    ("LAYOUT_EXPAND", "r = torch.tensor([0.5, -1.0, 2.0, 0.25]).expand(3, 4) + 1", ["r"]),
    ("LAYOUT_EXPAND_T", "out, gx = grads(lambda x: x.t().unsqueeze(0).expand(2, 3, 2) * 2, X23)", ["out", "gx"]),
    ("LAYOUT_CLONE_PERMUTED", "out, gx = grads(lambda x: x.permute(2, 0, 1).clone(), X234)", ["out", "gx"]),
    ("LAYOUT_CLONE_SLICE_T", "out, gx = grads(lambda x: x[:, ::2].t().clone(), X34)", ["out", "gx"]),
    ("LAYOUT_ZEROS_LIKE_PERMUTED", "r = torch.zeros_like(torch.tensor(X234).permute(2, 0, 1))", ["r"]),
    ("LAYOUT_ZEROS_LIKE_SLICE_T", "r = torch.zeros_like(torch.tensor(X34)[:, ::2].t())", ["r"]),
    ("LAYOUT_TO_DTYPE_T", "r = torch.tensor(X23, dtype=f64).t().to(torch.float32)", ["r"]),
    ("LAYOUT_SOFTMAX_T", "out, gx = grads(lambda x: x.t().softmax(0), X34)", ["out", "gx"]),
    ("LAYOUT_SUM_PERMUTED", "out, gx = grads(lambda x: x.permute(2, 0, 1).sum(1), X234)", ["out", "gx"]),
    ("LAYOUT_SUM_PERMUTED_KEEP", "r = torch.tensor(X234, dtype=f64).permute(2, 0, 1).sum(1, keepdim=True)", ["r"]),
    ("LAYOUT_MEAN_PERMUTED", "r = torch.tensor(X234, dtype=f64).permute(2, 0, 1).mean(0)", ["r"]),
    ("LAYOUT_MEAN_PERMUTED_KEEP", "r = torch.tensor(X234, dtype=f64).permute(2, 0, 1).mean(0, keepdim=True)", ["r"]),
    ("LAYOUT_WHERE_COND_T",
     "out, ga, gb = grads(lambda a, b: torch.where(torch.tensor(C43).t(), a, b.t()), X34, X43)",
     ["out", "ga", "gb"]),
    ("LAYOUT_WHERE_SELF_T",
     "out, ga, gb = grads(lambda a, b: torch.where(torch.tensor([True, False, False, True]), b.t(), a), X34, X43)",
     ["out", "ga", "gb"]),
    ("WHERE_BCAST",
     "out, ga, gb = grads(lambda a, b: torch.where(torch.tensor([True, False, True]), a, b), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[-1.0], [-2.0]])",
     ["out", "ga", "gb"]),
]


def rust_array(name, t):
    t = t.detach()
    # row-major values, whatever the layout
    vals = t.to(f64).contiguous().reshape(-1).tolist()

    def lit(v):
        if v != v:
            return "f64::NAN"
        if v == float("inf"):
            return "f64::INFINITY"
        if v == float("-inf"):
            return "f64::NEG_INFINITY"
        return repr(float(v))

    body = ", ".join(lit(v) for v in vals)
    shape = ", ".join(str(s) for s in t.shape)
    dtype = str(t.dtype).replace("torch.", "")
    stride = ", ".join(str(s) for s in t.stride())
    return (f"const {name}: Expect = Expect {{ vals: &[{body}], shape: &[{shape}], stride: &[{stride}], "
            f"offset: {t.storage_offset()}, dtype: \"{dtype}\" }};\n")


def main():
    env = {"torch": torch, "f64": f64}
    exec(PRELUDE, env)
    print("// ---- GENERATED by tests/torch_cases.py with torch", torch.__version__)
    for name, code, outs in CASES:
        exec(code, env)
        for line in code.splitlines():
            print(f"// {line}")
        for o in outs:
            suffix = "" if o in ("r", "out") else "_" + o.upper()
            print(rust_array(name + suffix, env[o]), end="")
        print()
    print("// ---- END GENERATED")


if __name__ == "__main__":
    main()
