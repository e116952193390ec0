"""A ninth oracle corpus of programs written as a new user would write
them (issue 16), about loops whose bounds are known only at call time: an
Elman RNN over the sequence (`for t in 0..x.size(1)`), a running mean
written row by row into an output buffer over an integer parameter, an
exponential moving average over the time steps of an input updated in
place, and a loop whose body reads sizes. PyTorch runs each with
`aot_function` and eagerly; the Rust side compares outputs, inputs after
the call and gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_i.py tests/oracle/new_user_i.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append


def seq_calls(lengths, extra):
    out = []
    for t in lengths:
        for label, rg in (("grad", True), ("nograd", False)):
            leaves = [L("x", [2, t, 3], rg)] + [L(n, s, rg) for n, s in extra]
            out.append(C(f"{label}_t{t}", leaves, ["x"] + [n for n, _ in extra]))
    return out


add(case("new_user_i_rnn_over_sequence", """
def f(x, wx, wh, b):
    h = torch.zeros(x.size(0), wh.size(0))
    for t in range(x.size(1)):
        h = torch.tanh(x.select(1, t) @ wx + h @ wh + b)
    return h
""", """
fn f(x: &Tensor, wx: &Tensor, wh: &Tensor, b: &Tensor) -> Tensor {
    let mut h = x.select(1, 0).matmul(wx).zeros_like();
    for t in 0..x.size(1) {
        h = (x.select(1, t).matmul(wx) + h.matmul(wh) + b).tanh();
    }
    h
}""", seq_calls([1, 4], [("wx", [3, 4]), ("wh", [4, 4]), ("b", [4])])))

add(case("new_user_i_rnn_outputs_collected", """
def f(x, wx, wh):
    h = torch.zeros(x.size(0), wh.size(0))
    out = torch.zeros(x.size(0), x.size(1), wh.size(0))
    for t in range(x.size(1)):
        h = torch.tanh(x.select(1, t) @ wx + h @ wh)
        out.select(1, t).copy_(h)
    return out.sum(1)
""", """
fn f(x: &Tensor, wx: &Tensor, wh: &Tensor) -> Tensor {
    let mut h = x.select(1, 0).matmul(wx).zeros_like();
    let out = x.matmul(wx).zeros_like();
    for t in 0..x.size(1) {
        h = (x.select(1, t).matmul(wx) + h.matmul(wh)).tanh();
        out.select(1, t).copy_(&h);
    }
    out.sum_dim(&[1], false)
}""", seq_calls([3], [("wx", [3, 4]), ("wh", [4, 4])])))

add(case("new_user_i_running_mean_rows", """
def f(x, out, n):
    acc = torch.zeros_like(x.select(0, 0))
    for i in range(n):
        acc = acc + x.select(0, i)
        out.select(0, i).copy_(acc / (i + 1))
    return acc
""", """
fn f(x: &Tensor, out: &mut Tensor, n: usize) -> Tensor {
    let mut acc = x.select(0, 0).zeros_like();
    for i in 0..n {
        acc = acc + x.select(0, i);
        out.select(0, i).copy_(&(&acc / (i + 1) as f64));
    }
    acc
}""", [C("nograd_n3", [L("x", [4, 3]), V("out", [4, 3], [0.0] * 12)], ["x", "out", 3]),
        C("nograd_n0", [L("x", [4, 3]), V("out", [4, 3], [0.5] * 12)], ["x", "out", 0]),
        C("grad_n4", [L("x", [4, 3], True), V("out", [4, 3], [0.0] * 12)], ["x", "out", 4])]))

add(case("new_user_i_ema_in_place", """
def f(x, state, decay):
    with torch.no_grad():
        for t in range(x.size(1)):
            state.mul_(decay).add_(x.select(1, t) * (1 - decay))
    return state.sum()
""", """
fn f(x: &Tensor, state: &mut Tensor, decay: f64) -> Tensor {
    no_grad! {
        for t in 0..x.size(1) {
            state.mul_(decay).add_(&(x.select(1, t) * (1.0 - decay)));
        }
    }
    state.sum()
}""", [C("nograd", [L("x", [2, 5]), V("state", [2], [0.5, -0.5])], ["x", "state", 0.9])]))
