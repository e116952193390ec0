"""A seventh oracle corpus of programs written as a new user would write
them (issue 16), about the DSL's call-time values: a batch norm switched
between training and evaluation by a `bool` parameter, an Adam step whose
bias corrections take an integer step count, attention scaled by a size
read from the input, GELU's tanh form with its constant from `f64::consts`,
a list of outputs (`Vec<Tensor>`), a slice chosen by integer parameters,
and a label-smoothed loss whose smoothing and class count are scalars.
PyTorch runs each with `aot_function` and eagerly; the Rust side compares
outputs, inputs after the call and gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_g.py tests/oracle/new_user_g.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

RM = V("rm", [3], [0.0, 0.1, -0.1])
RV = V("rv", [3], [1.0, 0.9, 1.1])


def bn_calls():
    out = []
    for training in (True, False):
        for label, rg in (("grad", True), ("nograd", False)):
            leaves = [L("x", [4, 3], rg), L("w", [3], rg), L("b", [3], rg), RM, RV]
            out.append(C(f"{label}_{'train' if training else 'eval'}", leaves, ["x", "w", "b", "rm", "rv", training]))
    return out


add(case("new_user_g_batchnorm_train_eval", """
def f(x, w, b, rm, rv, training):
    if training:
        mean = x.mean(0)
        var = x.var(0, correction=0)
        with torch.no_grad():
            rm.mul_(0.9).add_(mean * 0.1)
            rv.mul_(0.9).add_(x.var(0, correction=1) * 0.1)
        return (x - mean) / (var + 1e-5).sqrt() * w + b
    else:
        return (x - rm) / (rv + 1e-5).sqrt() * w + b
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor, rm: &mut Tensor, rv: &mut Tensor, training: bool) -> Tensor {
    if training {
        let mean = x.mean_dim(&[0], false);
        let var = x.var_dim(&[0], 0, false);
        no_grad! {
            rm.mul_(0.9).add_(&(&mean * 0.1));
            rv.mul_(0.9).add_(&(x.var_dim(&[0], 1, false) * 0.1));
        }
        (x - &mean) / (var + 1e-5).sqrt() * w + b
    } else {
        (x - &*rm) / (&*rv + 1e-5).sqrt() * w + b
    }
}""", bn_calls()))

P = V("p", [2, 3], [0.5, -1.0, 2.0, 0.25, -0.75, 1.5])
G = V("g", [2, 3], [0.1, 0.2, -0.3, 0.4, -0.5, 0.6])
M = V("m", [2, 3], [0.01, -0.02, 0.03, 0.0, 0.05, -0.06])
VV = V("v", [2, 3], [0.001, 0.002, 0.003, 0.0, 0.004, 0.005])
add(case("new_user_g_adam_integer_step", """
def f(p, g, m, v, lr, t):
    b1, b2 = 0.9, 0.999
    with torch.no_grad():
        m.mul_(b1).add_(g * (1 - b1))
        v.mul_(b2).add_(g * g * (1 - b2))
        bc1 = 1 - b1 ** t
        bc2 = 1 - b2 ** t
        p.sub_(lr / bc1 * m / ((v / bc2).sqrt() + 1e-8))
    return ()
""", """
fn f(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, lr: f64, t: i64) {
    let (b1, b2) = (0.9, 0.999);
    no_grad! {
        m.mul_(b1).add_(&(g * (1.0 - b1)));
        v.mul_(b2).add_(&(g * g * (1.0 - b2)));
        let bc1 = 1.0 - b1.powi(t);
        let bc2 = 1.0 - f64::powi(b2, t);
        p.sub_(&(&*m * (lr / bc1) / ((&*v / bc2).sqrt() + 1e-8)));
    }
}""", [C("step1", [P, G, M, VV], ["p", "g", "m", "v", 0.01, 1]), C("step7", [P, G, M, VV], ["p", "g", "m", "v", 0.01, 7])]))

add(case("new_user_g_attention_scaled_by_size", """
def f(x, w):
    n = x.size(0)
    d = x.size(-1)
    att = (x @ x.t()) * (1.0 / d ** 0.5)
    return att.softmax(-1) @ (x @ w) / n, x.sum() / x.numel()
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let n = x.size(0);
    let d = x.size(-1);
    let att = x.matmul(&x.t()) * (1.0 / (d as f64).sqrt());
    (att.softmax(-1).matmul(&x.matmul(w)) / n as f64, x.sum() / (x.size(0) * x.size(1)) as f64)
}""", calls([("x", [3, 4]), ("w", [4, 2])])))

add(case("new_user_g_gelu_tanh_constants", """
def f(x):
    c = (2.0 / 3.141592653589793) ** 0.5
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x.pow(3))))
""", """
fn f(x: &Tensor) -> Tensor {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    x * 0.5 * ((x + x.pow(3.0) * 0.044715) * c).tanh().add(1.0)
}""", calls([("x", [2, 5])])))

add(case("new_user_g_list_of_outputs", """
def f(x):
    return [x.sin(), x.narrow(0, 0, 1), x * 2, x]
""", """
fn f(x: &Tensor) -> Vec<Tensor> {
    vec![x.sin(), x.narrow(0, 0, 1), x * 2.0, x]
}""", calls([("x", [2, 3])])))

add(case("new_user_g_slice_by_integers", """
def f(x, start, length, row):
    return x.narrow(1, start, length).select(0, row) * 2, x.narrow(0, row, 1).sum()
""", """
fn f(x: &Tensor, start: i64, length: i64, row: i64) -> (Tensor, Tensor) {
    (x.narrow(1, start, length).select(0, row) * 2.0, x.narrow(0, row, 1).sum())
}""", [C("grad", [L("x", [3, 5], True)], ["x", 1, 3, 2]), C("nograd", [L("x", [3, 5])], ["x", 0, 2, 0])]))

T = V("tgt", [4], [1, 0, 3, 2], "i64")
add(case("new_user_g_label_smoothing_scalars", """
def f(logits, tgt, eps):
    k = logits.size(-1)
    lp = logits.log_softmax(-1)
    nll = -lp.gather(1, tgt.unsqueeze(1)).squeeze(1)
    smooth = -lp.sum(-1) / k
    return ((1 - eps) * nll + eps * smooth).mean()
""", """
fn f(logits: &Tensor, tgt: &Tensor, eps: f64) -> Tensor {
    let k = logits.size(-1) as f64;
    let lp = logits.log_softmax(-1);
    let nll = -lp.gather(1, &tgt.unsqueeze(1)).squeeze(1);
    let smooth = -lp.sum_dim(&[-1], false) / k;
    (nll * (1.0 - eps) + smooth * eps).mean()
}""", calls([("logits", [4, 5])], [T], args=["logits", "tgt", 0.1])))
