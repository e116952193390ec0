"""An eighth oracle corpus of programs written as a new user would write
them (issue 16), about in-place writes while gradients are recorded: a
write to an input that requires grad, to an intermediate that an op saved
for its backward (PyTorch's version-counter errors), to a view of an
intermediate that later ops read, activations applied in place (`relu_`,
`sigmoid_`, `exp_`), and a residual stream updated in place. PyTorch runs
each with `aot_function` and eagerly (the backward included); the Rust
side must fail where PyTorch fails, and otherwise compares outputs, inputs
after the call and gradients.

Regenerate with:

    /work/venv-torch/bin/python tests/oracle/gen.py tests/oracle/cases_new_user_h.py tests/oracle/new_user_h.json
    python3 tests/oracle/gen_cases.py
"""

from corpus import C, L, V, calls, case  # noqa: F401 (re-exported for the cases)

CASES = []
add = CASES.append

add(case("new_user_h_write_input_requiring_grad", """
def f(x, w):
    x.mul_(2.0)
    return (x @ w).sum()
""", """
fn f(x: &mut Tensor, w: &Tensor) -> Tensor {
    x.mul_(2.0);
    x.matmul(w).sum()
}""", calls([("x", [2, 3]), ("w", [3, 2])], mutated=["x"])))

add(case("new_user_h_write_saved_output", """
def f(x):
    y = x.sigmoid()
    y.mul_(2.0)
    return y
""", """
fn f(x: &Tensor) -> Tensor {
    let y = x.sigmoid();
    y.mul_(2.0);
    y
}""", calls([("x", [2, 3])])))

add(case("new_user_h_write_saved_input_of_mul", """
def f(x, w):
    h = x * 3.0
    y = h * w
    h.add_(1.0)
    return y, h
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let h = x * 3.0;
    let y = &h * w;
    h.add_(1.0);
    (y, h)
}""", calls([("x", [2, 3]), ("w", [2, 3])])))

add(case("new_user_h_write_unsaved_intermediate", """
def f(x, w):
    h = x + w
    y = h + 1.0
    h.mul_(2.0)
    return y, h
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let h = x + w;
    let y = &h + 1.0;
    h.mul_(2.0);
    (y, h)
}""", calls([("x", [2, 3]), ("w", [2, 3])])))

add(case("new_user_h_inplace_activations", """
def f(x, w):
    h = x @ w
    h.relu_()
    g = h * 1.0
    g.sigmoid_()
    e = g + 0.0
    e.exp_()
    return e.sum(), h
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let h = x.matmul(w);
    h.relu_();
    let g = &h * 1.0;
    g.sigmoid_();
    let e = &g + 0.0;
    e.exp_();
    (e.sum(), h)
}""", calls([("x", [3, 4]), ("w", [4, 2])])))

add(case("new_user_h_residual_stream_in_place", """
def f(x, w1, w2):
    h = x * 1.0
    h.add_((h @ w1).tanh())
    h.add_((h @ w2).tanh())
    return h.pow(2).mean()
""", """
fn f(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    let h = x * 1.0;
    h.add_(&h.matmul(w1).tanh());
    h.add_(&h.matmul(w2).tanh());
    h.pow(2.0).mean()
}""", calls([("x", [2, 3]), ("w1", [3, 3]), ("w2", [3, 3])])))

add(case("new_user_h_view_of_intermediate_written", """
def f(x):
    h = x.exp()
    h.narrow(1, 0, 1).zero_()
    return h.sum(1), h.t()
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    let h = x.exp();
    h.narrow(1, 0, 1).zero_();
    (h.sum_dim(&[1], false), h.t())
}""", calls([("x", [2, 3])])))

add(case("new_user_h_write_input_view_in_grad_mode", """
def f(x, y):
    x.select(0, 0).copy_(y)
    return x * x
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.select(0, 0).copy_(y);
    x * &*x
}""", calls([("x", [2, 3]), ("y", [3])], mutated=["x"])))

add(case("new_user_h_clamp_in_place_after_use", """
def f(x):
    s = x.sin()
    c = s.cos()
    s.clamp_(-0.5, 0.5)
    return c + s
""", """
fn f(x: &Tensor) -> Tensor {
    let s = x.sin();
    let c = s.cos();
    s.clamp_(-0.5, 0.5);
    c + s
}""", calls([("x", [2, 4])])))
