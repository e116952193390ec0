"""A third oracle corpus of programs written as a new user would write
them (issue 16), about dtypes: integer token statistics, true division of
integers, comparisons and bool masks, integer cumulative sums, mixed
f64/f32/f16 promotion, clamping and masked filling of integer tensors,
f16 attention and a bf16 LayerNorm, argmax and max over half-precision
values, powers. PyTorch runs each with `aot_function` and eagerly; the
Rust side compares outputs (values and dtypes), inputs after the call and
gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_c.py tests/oracle/new_user_c.json
    python3 tests/oracle/gen_cases.py
"""


from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

IDS = V("ids", [2, 5], [3, 0, 3, 7, 1, 2, 3, 5, 0, 4], "i64")
add(case("new_user_c_token_stats", """
def f(ids):
    hits = (ids == 3).sum()
    top = ids.amax(1)
    nxt = ids + 1
    ratio = ids.float() / 4.0
    return hits, top, nxt, ratio
""", """
fn f(ids: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let hits = ids.eq(3.0).sum();
    let top = ids.amax_dim(&[1], false);
    let nxt = ids + 1.0;
    let ratio = ids.to_dtype(DType::F32) / 4.0;
    (hits, top, nxt, ratio)
}""", [C("nograd", [IDS], ["ids"])]))

add(case("new_user_c_integer_true_division", """
def f(ids, x):
    half = ids / 2
    scaled = ids * 2.5
    return half, scaled, x * ids
""", """
fn f(ids: &Tensor, x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let half = ids / 2.0;
    let scaled = ids * 2.5;
    (half, scaled, x * ids)
}""", calls([("x", [2, 5])], [IDS])))

add(case("new_user_c_bool_masks", """
def f(x):
    pos = x > 0.0
    small = x.abs() < 0.5
    both = pos == small
    kept = torch.where(pos, x, torch.zeros_like(x))
    run = pos.long().cumsum(1)
    return kept, run, both, pos.sum(1)
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let pos = x.gt(0.0);
    let small = x.abs().lt(0.5);
    let both = pos.eq(&small);
    let kept = x.where_(&pos, &x.zeros_like());
    let run = pos.to_dtype(DType::I64).cumsum(1);
    (kept, run, both, pos.sum_dim(&[1], false))
}""", calls([("x", [3, 4])])))

add(case("new_user_c_mixed_promotion", """
def f(x, y):
    a = x.double() + y
    b = x.half() * 2.0 + y
    c = x.half() + x.half()
    return a * 0.5, b, c.float().sum()
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor) {
    let a = x.to_dtype(DType::F64) + y;
    let b = x.to_dtype(DType::F16) * 2.0 + y;
    let c = x.to_dtype(DType::F16) + x.to_dtype(DType::F16);
    (a * 0.5, b, c.to_dtype(DType::F32).sum())
}""", calls([("x", [2, 3]), ("y", [2, 3])])))

MASK = V("mask", [2, 5], [1, 0, 0, 1, 0, 0, 1, 0, 0, 1], "bool")
add(case("new_user_c_integer_clamp_and_fill", """
def f(ids, mask):
    c = ids.clamp(1, 4)
    filled = ids.masked_fill(mask, -1)
    return c, filled, filled.sum(1)
""", """
fn f(ids: &Tensor, mask: &Tensor) -> (Tensor, Tensor, Tensor) {
    let c = ids.clamp(1.0, 4.0);
    let filled = ids.masked_fill(mask, -1.0);
    (c, filled.copy(), filled.sum_dim(&[1], false))
}""", [C("nograd", [IDS, MASK], ["ids", "mask"])]))

add(case("new_user_c_f16_attention", """
def f(q, k, v):
    qh, kh, vh = q.half(), k.half(), v.half()
    att = (qh @ kh.transpose(-2, -1) * 0.5).softmax(-1)
    return (att @ vh).float()
""", """
fn f(q: &Tensor, k: &Tensor, v: &Tensor) -> Tensor {
    let (qh, kh, vh) = (q.to_dtype(DType::F16), k.to_dtype(DType::F16), v.to_dtype(DType::F16));
    let att = (qh.matmul(&kh.transpose(-2, -1)) * 0.5).softmax(-1);
    att.matmul(&vh).to_dtype(DType::F32)
}""", calls([("q", [2, 3, 4]), ("k", [2, 3, 4]), ("v", [2, 3, 4])])))

add(case("new_user_c_bf16_layer_norm", """
def f(x, w, b):
    xb = x.bfloat16()
    mu = xb.mean(-1, keepdim=True)
    var = xb.var(-1, keepdim=True, correction=0)
    y = (xb - mu) / (var + 1e-5).sqrt() * w.bfloat16() + b.bfloat16()
    return y.float()
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let xb = x.to_dtype(DType::BF16);
    let mu = xb.mean_dim(&[-1], true);
    let var = xb.var_dim(&[-1], 0, true);
    let y = (&xb - mu) / (var + 1e-5).sqrt() * w.to_dtype(DType::BF16) + b.to_dtype(DType::BF16);
    y.to_dtype(DType::F32)
}""", calls([("x", [3, 8]), ("w", [8]), ("b", [8])])))

add(case("new_user_c_half_argmax_and_max", """
def f(x):
    h = x.half()
    v, i = h.max(1)
    return i, v.float(), h.argmax(0), x.bfloat16().amax(1).float()
""", """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let h = x.to_dtype(DType::F16);
    let (v, i) = h.max_dim(1, false);
    (i, v.to_dtype(DType::F32), h.argmax(0, false), x.to_dtype(DType::BF16).amax_dim(&[1], false).to_dtype(DType::F32))
}""", calls([("x", [3, 5])])))

add(case("new_user_c_powers", """
def f(x, y):
    a = x.abs().pow(0.5)
    b = x.pow(2.0) + y.pow(3.0)
    c = (x.abs() + 1.0).pow(y)
    return a, b, c
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor) {
    let a = x.abs().pow(0.5);
    let b = x.pow(2.0) + y.pow(3.0);
    let c = (x.abs() + 1.0).pow(y);
    (a, b, c)
}""", calls([("x", [2, 3]), ("y", [2, 3])])))

add(case("new_user_c_integer_pow_and_neg", """
def f(ids):
    return ids.pow(2), -ids, ids.pow(2.0), (ids * ids).sum()
""", """
fn f(ids: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    (ids.pow(2), -ids, ids.pow(2.0), (ids * ids).sum())
}""", [C("nograd", [IDS], ["ids"])]))

# Gradients through f16 and bf16 ops: every rounding step of a backward
# formula shows at these precisions, so the formulas must round as
# PyTorch's do. (Not `rsqrt`: PyTorch's bf16 `rsqrt` rounds `sqrt` first on
# its scalar path, which small tensors take, and once on its vector path.)
HALF = [("f16", "half()", "F16"), ("bf16", "bfloat16()", "BF16")]
for tag, py, rs in HALF:
    add(case("new_user_c_%s_grad_unary" % tag, """
def f(x):
    h = x.%s
    a = h.exp() + h.tanh() + h.sigmoid() + h.sin() * h.cos()
    b = h.abs().sqrt() + (h.abs() + 0.5).sqrt().reciprocal() + (h.abs() + 0.5).log() + (h + 2.0).reciprocal()
    c = h.square() + h.relu() + torch.nn.functional.gelu(h) + torch.nn.functional.silu(h)
    return a.float(), b.float(), c.float()
""" % py, """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let h = x.to_dtype(DType::%s);
    let a = h.exp() + h.tanh() + h.sigmoid() + h.sin() * h.cos();
    let b = h.abs().sqrt() + (h.abs() + 0.5).sqrt().reciprocal() + (h.abs() + 0.5).log() + (&h + 2.0).reciprocal();
    let c = h.square() + h.relu() + h.gelu() + h.silu();
    (a.to_dtype(DType::F32), b.to_dtype(DType::F32), c.to_dtype(DType::F32))
}""" % rs, calls([("x", [3, 5])])))

    add(case("new_user_c_%s_grad_binary" % tag, """
def f(x, y):
    a, b = x.%s, y.%s
    p = a * b + a / (b.abs() + 1.0) - b * 0.3
    q = torch.maximum(a, b) + torch.minimum(a, b * 2.0)
    r = (a.abs() + 1.0).pow(b) + a.pow(2.0) * 0.5
    return p.float(), q.float(), r.float()
""" % (py, py), """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor) {
    let (a, b) = (x.to_dtype(DType::%s), y.to_dtype(DType::%s));
    let p = &a * &b + &a / (b.abs() + 1.0) - &b * 0.3;
    let q = a.maximum(&b) + a.minimum(&(&b * 2.0));
    let r = (a.abs() + 1.0).pow(&b) + a.pow(2.0) * 0.5;
    (p.to_dtype(DType::F32), q.to_dtype(DType::F32), r.to_dtype(DType::F32))
}""" % (rs, rs), calls([("x", [3, 4]), ("y", [3, 4])])))

    add(case("new_user_c_%s_grad_reductions" % tag, """
def f(x):
    h = x.%s
    s = h.softmax(-1) * 3.0 + h.log_softmax(-1)
    r = h.sum(1) + h.mean(1) + h.var(1, correction=1) + h.amax(1)
    c = h.cumsum(1) + h.log1p().abs() + h.expm1()
    return s.float(), r.float(), c.float(), h.mean().float()
""" % py, """
fn f(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let h = x.to_dtype(DType::%s);
    let s = h.softmax(-1) * 3.0 + h.log_softmax(-1);
    let r = h.sum_dim(&[1], false) + h.mean_dim(&[1], false) + h.var_dim(&[1], 1, false) + h.amax_dim(&[1], false);
    let c = h.cumsum(1) + h.log1p().abs() + h.expm1();
    (s.to_dtype(DType::F32), r.to_dtype(DType::F32), c.to_dtype(DType::F32), h.mean().to_dtype(DType::F32))
}""" % rs, calls([("x", [3, 6])])))

    add(case("new_user_c_%s_grad_matmul_mask" % tag, """
def f(x, w, m):
    h = (x.%s @ w.%s).clamp(-0.5, 0.8)
    y = h.masked_fill(m, 0.25) + torch.where(m, h, h * 2.0)
    return y.float(), (h.tril(0) * 2.0).float()
""" % (py, py), """
fn f(x: &Tensor, w: &Tensor, m: &Tensor) -> (Tensor, Tensor) {
    let h = x.to_dtype(DType::%s).matmul(&w.to_dtype(DType::%s)).clamp(-0.5, 0.8);
    let y = h.masked_fill(m, 0.25) + h.where_(m, &(&h * 2.0));
    (y.to_dtype(DType::F32), (h.tril(0) * 2.0).to_dtype(DType::F32))
}""" % (rs, rs), calls([("x", [3, 4]), ("w", [4, 3])], [V("m", [3, 3], [1, 0, 0, 0, 1, 1, 0, 0, 1], "bool")])))
