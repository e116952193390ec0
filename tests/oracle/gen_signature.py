"""Graph signatures from PyTorch's `aot_export_module`, the oracle for
`NAME::compiled().graph_signature(&args)` (tests/tests/graph_signature.rs).

Run with the project's PyTorch 2.15 venv:
    /work/venv-torch/bin/python tests/oracle/gen_signature.py
It writes tests/oracle/signatures.json: per case, the module's name, how it
was exported (trace_joint, output_loss_index, which inputs require grad)
and PyTorch's GraphSignature fields (the names PyTorch gave the graph's
inputs and outputs included; the Rust test maps them, see there).
"""

import json
import os

import torch
from torch import nn
from torch._functorch.aot_autograd import aot_export_module


class BatchNormLike(nn.Module):
    """Normalises over dim 0 and updates running statistics in place."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))
        self.bias = nn.Parameter(torch.zeros(3))
        self.register_buffer("running_mean", torch.zeros(3))
        self.register_buffer("running_var", torch.ones(3))

    def forward(self, x):
        mean = x.mean(0)
        var = x.var(0, correction=0)
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(mean * 0.1)
            self.running_var.mul_(0.9).add_(x.var(0, correction=1) * 0.1)
        return ((x - mean) / (var + 1e-5).sqrt() * self.weight + self.bias,)


class Mlp(nn.Module):
    """A two-layer MLP whose output is its mean squared error."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(3, 4))
        self.b1 = nn.Parameter(torch.randn(4))
        self.w2 = nn.Parameter(torch.randn(4, 2))
        self.b2 = nn.Parameter(torch.randn(2))

    def forward(self, x, y):
        h = (x @ self.w1 + self.b1).relu()
        return (((h @ self.w2 + self.b2 - y) ** 2).mean(),)


class AccumulateInto(nn.Module):
    """Adds a scaled input into a user input in place, and returns a sum."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.register_buffer("count", torch.zeros(1))

    def forward(self, acc, x):
        acc.add_(x * self.scale)
        self.count.add_(1.0)
        return ((acc * 2.0).sum(), x.exp())


class Linear(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.w = nn.Parameter(torch.randn(i, o))
        self.b = nn.Parameter(torch.randn(o))

    def forward(self, x):
        return x @ self.w + self.b


class Stack(nn.Module):
    """A list of layers (`layers.0.w`, ...); returns the loss and the output
    (detached: export wants every other output free of grad)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Linear(3, 4), Linear(4, 4), Linear(4, 2)])

    def forward(self, x, y):
        h = x
        for i, l in enumerate(self.layers):
            h = l(h)
            if i < 2:
                h = h.tanh()
        return (((h - y) ** 2).mean(), h.detach())


class Frozen(nn.Module):
    """A frozen backbone (no grad) under a trainable head."""

    def __init__(self):
        super().__init__()
        self.backbone = Linear(3, 4)
        self.head = Linear(4, 2)
        for p in self.backbone.parameters():
            p.requires_grad_(False)

    def forward(self, x, y):
        h = self.head(self.backbone(x).relu())
        return (((h - y) ** 2).mean(),)


class NormWithSteps(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        with torch.no_grad():
            self.steps.add_(1.0)
        return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * self.weight


class Block(nn.Module):
    """Nested modules: `norm.weight`, the buffer `norm.steps`, `proj.w`.
    Returns the loss, then the output (detached)."""

    def __init__(self):
        super().__init__()
        self.norm = NormWithSteps()
        self.proj = Linear(4, 4)

    def forward(self, x):
        h = x + self.proj(self.norm(x)).relu()
        return (h.pow(2).mean(), h.detach())


class BatchNormTrain(nn.Module):
    """Running statistics updated in place while the loss is traced."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))
        self.bias = nn.Parameter(torch.zeros(3))
        self.register_buffer("running_mean", torch.zeros(3))
        self.register_buffer("running_var", torch.ones(3))

    def forward(self, x):
        mean = x.mean(0)
        var = x.var(0, correction=0)
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(mean * 0.1)
            self.running_var.mul_(0.9).add_(x.var(0, correction=1) * 0.1)
        out = (x - mean) / (var + 1e-5).sqrt() * self.weight + self.bias
        return (out.pow(2).sum(),)


def export(name, module, args, trace_joint, loss_index=None, params_require_grad=True):
    if params_require_grad is not None:
        for p in module.parameters():
            p.requires_grad_(params_require_grad)
    _, sig = aot_export_module(module, args, trace_joint=trace_joint, output_loss_index=loss_index)
    back = sig.backward_signature
    return {
        "name": name,
        "trace_joint": trace_joint,
        "output_loss_index": loss_index,
        "params_require_grad": params_require_grad,
        "param_requires_grad": {n: p.requires_grad for n, p in module.named_parameters()},
        "args_require_grad": [a.requires_grad for a in args],
        "signature": {
            "parameters": list(sig.parameters),
            "buffers": list(sig.buffers),
            "user_inputs": list(sig.user_inputs),
            "user_outputs": list(sig.user_outputs),
            "inputs_to_parameters": dict(sig.inputs_to_parameters),
            "inputs_to_buffers": dict(sig.inputs_to_buffers),
            "buffers_to_mutate": dict(sig.buffers_to_mutate),
            "user_inputs_to_mutate": dict(sig.user_inputs_to_mutate),
            "backward_signature": None
            if back is None
            else {
                "gradients_to_parameters": dict(back.gradients_to_parameters),
                "gradients_to_user_inputs": dict(back.gradients_to_user_inputs),
                "loss_output": back.loss_output,
            },
        },
    }


def main():
    torch.manual_seed(0)
    cases = [
        export("batch_norm", BatchNormLike(), [torch.randn(8, 3)], trace_joint=False, params_require_grad=False),
        export("mlp_loss", Mlp(), [torch.randn(5, 3), torch.randn(5, 2)], trace_joint=True, loss_index=0),
        export(
            "mlp_loss_input_grad",
            Mlp(),
            [torch.randn(5, 3).requires_grad_(), torch.randn(5, 2)],
            trace_joint=True,
            loss_index=0,
        ),
        export("accumulate_into", AccumulateInto(), [torch.zeros(4), torch.randn(4)], trace_joint=False, params_require_grad=False),
        export("stack_loss", Stack(), [torch.randn(5, 3), torch.randn(5, 2)], trace_joint=True, loss_index=0),
        export("frozen_backbone", Frozen(), [torch.randn(5, 3), torch.randn(5, 2)], trace_joint=True, loss_index=0, params_require_grad=None),
        export("block_loss", Block(), [torch.randn(2, 4)], trace_joint=True, loss_index=0),
        export("block_inference", Block(), [torch.randn(2, 4)], trace_joint=False, params_require_grad=False),
        export("batch_norm_train", BatchNormTrain(), [torch.randn(8, 3)], trace_joint=True, loss_index=0),
        export("stack_input_grad", Stack(), [torch.randn(5, 3).requires_grad_(), torch.randn(5, 2)], trace_joint=True, loss_index=0),
    ]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "signatures.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
