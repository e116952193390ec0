"""PyTorch's CPU `rsqrt` on f16/bf16 inputs of several layouts, and a bf16
RMSNorm built on it, for tests/tests/half_rsqrt.rs. PyTorch rounds the
square root first on the elements its vector loop leaves over (see
aot-runtime/src/cpu/fused/scalar_tail.rs); these cases pin that down.

Input element `i` (row-major over the base shape) is
`0.05 + 25 * (1 + sin(0.37 * i + 0.1))`, computed in f64 and stored as f32,
then cast to the case's dtype; `layout` is applied to that base tensor.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen_half_rsqrt.py tests/oracle/half_rsqrt.json
"""

import json
import math
import sys

import torch

LAYOUTS = {
    "none": lambda x: x,
    "t": lambda x: x.t(),
    "step2": lambda x: x[:, ::2],
    "narrow3": lambda x: x[:, :3],
    "expand8": lambda x: x[:1].expand(8, x.shape[1]),
}

CASES = [
    ([5], "none"), ([31], "none"), ([64], "none"), ([100], "none"), ([200], "none"),
    ([40, 8], "t"), ([50, 8], "step2"), ([50, 8], "narrow3"), ([3, 40], "expand8"),
    ([6, 37], "none"),
]


def base(shape, dtype):
    n = math.prod(shape)
    v = [0.05 + 25.0 * (1.0 + math.sin(0.37 * i + 0.1)) for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).float().reshape(shape).to(dtype)


def main():
    out = []
    for dtype, name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        for shape, layout in CASES:
            x = LAYOUTS[layout](base(shape, dtype))
            r = torch.rsqrt(x)
            out.append({"op": "rsqrt", "dtype": name, "shape": shape, "layout": layout,
                        "values": [float(v) for v in r.float().flatten().tolist()]})
        x = base([6, 40], dtype)
        r = x * (x.square().mean(-1, keepdim=True) + 1e-5).rsqrt()
        out.append({"op": "rms_norm", "dtype": name, "shape": [6, 40], "layout": "none",
                    "values": [float(v) for v in r.float().flatten().tolist()]})
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "cases": out}, f, indent=1)


main()
