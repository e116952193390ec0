"""W4's peer: the `gpt` example's model and training step in PyTorch eager.

The same model as examples/gpt/model.rs (nanoGPT's layout: linear layers
without biases, the head tied to the token embedding, attention written out
with a causal mask, exact GELU, dropout), the same AdamW (decay on matrices
only) and the same sizes. Prints one line, `tokens_per_s <value>`, after
`--warmup` untimed steps and `--steps` timed ones.

    python3 benches/python/gpt_torch.py --steps 50
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, nh, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c, bias=False)
        self.o = nn.Linear(c, c, bias=False)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c, bias=False)
        self.proj = nn.Linear(4 * c, c, bias=False)
        self.nh, self.p = nh, p

    def forward(self, x, masked):
        b, t, c = x.shape
        hd = c // self.nh
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(hd))
        att = F.dropout(att.masked_fill(masked, -1e9).softmax(-1), self.p, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + F.dropout(self.o(y), self.p, self.training)
        h = self.proj(F.gelu(self.fc(self.ln2(x))))
        return x + F.dropout(h, self.p, self.training)


class Gpt(nn.Module):
    def __init__(self, vocab, ctx, c, nh, layers, p):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(ctx, c)
        self.blocks = nn.ModuleList(Block(c, nh, p) for _ in range(layers))
        self.lnf = nn.LayerNorm(c)
        self.p = p
        for w in self.parameters():
            if w.dim() == 2:
                nn.init.normal_(w, std=0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = F.dropout(self.wte(idx) + self.wpe.weight[:t], self.p, self.training)
        pos = torch.arange(t, device=idx.device)
        masked = pos.unsqueeze(0) > pos.unsqueeze(1)
        for blk in self.blocks:
            x = blk(x, masked)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--vocab", type=int, default=96)
    a.add_argument("--batch", type=int, default=16)
    a.add_argument("--ctx", type=int, default=64)
    a.add_argument("--width", type=int, default=96)
    a.add_argument("--heads", type=int, default=4)
    a.add_argument("--layers", type=int, default=2)
    a.add_argument("--dropout", type=float, default=0.1)
    a.add_argument("--steps", type=int, default=50)
    a.add_argument("--warmup", type=int, default=5)
    a.add_argument("--device", default="cpu")
    o = a.parse_args()
    torch.manual_seed(0)
    dev = torch.device(o.device)
    model = Gpt(o.vocab, o.ctx, o.width, o.heads, o.layers, o.dropout).to(dev)
    decay = [w for w in model.parameters() if w.dim() == 2]
    rest = [w for w in model.parameters() if w.dim() != 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=3e-3, betas=(0.9, 0.99), foreach=False)
    data = torch.randint(0, o.vocab, (o.batch, o.ctx + 1), device=dev)

    def step():
        loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(o.warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(o.steps):
        step()
    sync()
    secs = time.perf_counter() - start
    print(f"tokens_per_s {o.steps * o.batch * o.ctx / secs:.1f}")


if __name__ == "__main__":
    main()
