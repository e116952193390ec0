"""The project's own oracle corpus, beside the public one.

Each case is a small function written twice, in Python (run by PyTorch's
eager mode and by its AOTAutograd through gen.py) and in the `#[aot_fn]` DSL
(CONTRACT.md). The behaviours follow those exercised by PyTorch's
test/functorch/test_aotdispatch.py (cases named `test_*` after the test
they are modelled on) and training patterns found in real models (cases
named `xtra_*`): mutations of inputs that require grad, mutations under
no_grad and through detach(), metadata mutations, outputs aliasing inputs
or intermediates, duplicated and aliased arguments, optimizer and
running-statistics updates, cache writes.

Most calls are training calls: a leaf that requires grad, passed through a
`copy()` when the function mutates it (an in-place op on a leaf that
requires grad is refused by eager PyTorch, which some `leaf_grad` calls
record on purpose).

Regenerate with:

    python3 tests/oracle/gen.py tests/oracle/cases_extra.py tests/oracle/extra.json
    python3 tests/oracle/gen_cases.py
"""


def L(name, shape, rg=False):
    d = {"name": name, "shape": list(shape)}
    if rg:
        d["requires_grad"] = True
    return d


def C(label, leaves, args, lets=None, note=None):
    c = {"label": label, "leaves": leaves, "args": args}
    if lets:
        c["lets"] = lets
    if note:
        c["note"] = note
    return c


def std(specs, mutated=(), leaf_grad=False, nograd=True, grad=True):
    """The usual calls: `grad` (every leaf requires grad; mutated arguments
    are passed as copies so they are not leaves), `nograd`, and optionally
    `leaf_grad` (the leaves themselves)."""
    calls = []
    if grad:
        calls.append(C("grad", [L(n, s, True) for n, s in specs],
                       [(n + ".copy()") if i in mutated else n for i, (n, _) in enumerate(specs)]))
    if nograd:
        calls.append(C("nograd", [L(n, s) for n, s in specs], [n for n, _ in specs]))
    if leaf_grad:
        calls.append(C("leaf_grad", [L(n, s, True) for n, s in specs], [n for n, _ in specs]))
    return calls


def case(name, python, rust, calls):
    return {"name": name, "python": python.strip("\n") + "\n", "rust": rust.strip("\n"), "calls": calls}


OVERLAP = ("PyTorch's compiled result differs from eager: the element both views share gets only one "
           "of the two multiplications; eager is right")
BW_VERSION = ("PyTorch's AOTAutograd fails in the backward: replaying the metadata mutation on the input "
              "bumps its version after the compiled forward saved it; eager runs")
DUPE_INDEX = ("PyTorch 2.15 internal IndexError in aot_function (a duplicated argument that requires grad, "
              "mutated under no_grad); eager runs")
ALIAS_ASSERT = "PyTorch 2.15 internal error in aot_function (aliased inputs, training graph); eager runs"

CASES = []
add = CASES.append

# ---------------------------------------------------------------------------
# Input mutations: data, metadata, no_grad, detach
# ---------------------------------------------------------------------------

add(case("test_input_mutation_metadata", """
def f(a, b):
    a.transpose_(1, 0)
    return a + b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.transpose_(1, 0);
    a + b
}
""", [
    C("grad", [L("x", [2, 3], True), L("y", [3, 2], True)], ["x.copy()", "y.copy()"]),
    C("leaf_grad", [L("x", [2, 3], True), L("y", [3, 2], True)], ["x", "y"],
      note="eager PyTorch refuses transpose_ on a leaf that requires grad"),
    C("nograd", [L("x", [2, 3]), L("y", [3, 2])], ["x", "y"]),
    C("dupe_grad", [L("x", [3, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_leaf_grad", [L("x", [3, 3], True)], ["x", "x"]),
    C("dupe_nograd", [L("x", [3, 3])], ["x", "x"]),
]))

add(case("test_input_mutation_metadata2", """
def f(a):
    a.transpose_(1, 0)
    a.mul_(2)
    return a + 1
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.transpose_(1, 0);
    a.mul_(2.0);
    a + 1.0
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("test_input_mutation_requires_grad_no_grad_detach_mixed", """
def f(a):
    a.detach().mul_(2)
    a.mul_(3)
    with torch.no_grad():
        a.mul_(4)
    return a + 5
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.detach().mul_(2.0);
    a.mul_(3.0);
    no_grad! {
        a.mul_(4.0);
    }
    a + 5.0
}
""", std([("x", [4])], mutated=(0,), leaf_grad=True)))

add(case("test_input_mutation_requires_grad_no_grad_inference_graph", """
def f(a):
    with torch.no_grad():
        a.mul_(2)
        return a + 3
""", """
fn f(a: &mut Tensor) -> Tensor {
    no_grad! {
        a.mul_(2.0);
        a + 3.0
    }
}
""", std([("x", [4])], mutated=(0,), leaf_grad=True)))

add(case("test_input_data_and_metadata_mutation", """
def f(a):
    a.t_()
    a.select(0, 0).mul_(2)
    return a.view(3, 2)
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.t_();
    a.select(0, 0).mul_(2.0);
    a.view(&[3, 2])
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("test_view_and_inplace_view", """
def f(a, b):
    a.t_()
    return b.view(3, 3), a.view(3, 2)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.t_();
    (b.view(&[3, 3]), a.view(&[3, 2]))
}
""", [
    C("grad", [L("x", [2, 3], True), L("y", [3, 3], True)], ["x.copy()", "y.copy()"]),
    C("leaf_grad", [L("x", [2, 3], True), L("y", [3, 3], True)], ["x", "y"]),
    C("nograd", [L("x", [2, 3]), L("y", [3, 3])], ["x", "y"]),
]))

add(case("test_view_detach", """
def f(a):
    tmp = a.detach()
    a.mul_(2)
    return a, tmp
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    let tmp = a.detach();
    a.mul_(2.0);
    (a, tmp)
}
""", std([("x", [3, 3])], mutated=(0,), leaf_grad=True)))

add(case("test_input_mutation_modifies_autograd_meta_of_aliases", """
def f(a):
    a.mul_(2)
    out = a + 1
    return out.detach()
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.mul_(2.0);
    let out = a + 1.0;
    out.detach()
}
""", std([("x", [3, 3])], mutated=(0,)) + [
    C("view_grad", [L("x", [3, 3], True)], ["p.view([9])"], lets=[["p", "x.copy()"]]),
]))

add(case("test_input_mutation_noncontiguous", """
def f(a):
    a.mul_(2)
    return a + 1
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.mul_(2.0);
    a + 1.0
}
""", [
    C("grad", [L("x", [2, 2], True)], ["p.select(1,0)"], lets=[["p", "x.copy()"]]),
    C("nograd", [L("x", [2, 2])], ["x.select(1,0)"]),
    C("transposed_grad", [L("x", [2, 3], True)], ["p.t()"], lets=[["p", "x.copy()"]]),
]))

add(case("test_input_output_view_simple", """
def f(a):
    return a.view(-1)
""", """
fn f(a: &Tensor) -> Tensor {
    a.view(&[-1])
}
""", std([("x", [2, 2])], mutated=(0,), leaf_grad=True)))

add(case("test_input_output_view_metadata_mutate_multiple", """
def f(a, b, c):
    b.mul_(3)
    c.t_()
    return a.view(2, 2), b.view(2, 2), c.view(2, 2)
""", """
fn f(a: &Tensor, b: &mut Tensor, c: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    b.mul_(3.0);
    c.t_();
    (a.view(&[2, 2]), b.view(&[2, 2]), c.view(&[2, 2]))
}
""", std([("x", [2, 2]), ("y", [2, 2]), ("z", [2, 2])], mutated=(0, 1, 2)) + [
    C("dupe_ac_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["p", "y.copy()", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_ac_nograd", [L("x", [2, 2]), L("y", [2, 2])], ["x", "y", "x"]),
]))

add(case("test_new_input_mutated_by_grad_value", """
def f(buf, w):
    buf.add_(w)
    return buf * 2
""", """
fn f(buf: &mut Tensor, w: &Tensor) -> Tensor {
    buf.add_(w);
    buf * 2.0
}
""", [
    C("w_grad", [L("buf", [2, 3]), L("w", [2, 3], True)], ["buf", "w"]),
    C("both_grad", [L("buf", [2, 3], True), L("w", [2, 3], True)], ["buf.copy()", "w"]),
    C("nograd", [L("buf", [2, 3]), L("w", [2, 3])], ["buf", "w"]),
    C("w_grad_broadcast", [L("buf", [2, 3]), L("w", [3], True)], ["buf", "w"]),
]))

add(case("xtra_buffer_mutated_from_param_under_no_grad", """
def f(buf, w, x):
    with torch.no_grad():
        buf.add_(w)
    return (x * w).sum() + buf.sum()
""", """
fn f(buf: &mut Tensor, w: &Tensor, x: &Tensor) -> Tensor {
    no_grad! {
        buf.add_(w);
    }
    (x * w).sum() + buf.sum()
}
""", [
    C("w_grad", [L("buf", [3]), L("w", [3], True), L("x", [3])], ["buf", "w", "x"]),
    C("nograd", [L("buf", [3]), L("w", [3]), L("x", [3])], ["buf", "w", "x"]),
    C("buf_grad", [L("buf", [3], True), L("w", [3], True), L("x", [3])], ["buf", "w", "x"]),
]))

add(case("xtra_sigmoid_exp_neg_inplace_inputs", """
def f(a, b, c):
    a.sigmoid_()
    b.exp_()
    c.neg_()
    return a * b + c
""", """
fn f(a: &mut Tensor, b: &mut Tensor, c: &mut Tensor) -> Tensor {
    a.sigmoid_();
    b.exp_();
    c.neg_();
    a * b + c
}
""", std([("x", [2, 3]), ("y", [2, 3]), ("z", [2, 3])], mutated=(0, 1, 2), leaf_grad=True) + [
    C("dupe_ab_nograd", [L("x", [2, 3]), L("z", [2, 3])], ["x", "x", "z"]),
]))

add(case("xtra_chained_sub_div_inplace", """
def f(a, b):
    a.sub_(b).div_(2)
    return a.pow(2.0).sum(), b.square()
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.sub_(b).div_(2.0);
    (a.pow(2.0).sum(), b.square())
}
""", std([("x", [2, 2]), ("y", [2, 2])], mutated=(0,)) + [
    C("dupe_grad", [L("x", [2, 2], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("b_only_grad", [L("x", [2, 2]), L("y", [2, 2], True)], ["x", "y"]),
]))

add(case("xtra_clamp_relu_on_input_then_reduce", """
def f(a, w):
    a.clamp_(-0.5, 0.5)
    a.relu_()
    return a.matmul(w).mean()
""", """
fn f(a: &mut Tensor, w: &Tensor) -> Tensor {
    a.clamp_(-0.5, 0.5);
    a.relu_();
    a.matmul(w).mean()
}
""", std([("x", [2, 3]), ("w", [3, 2])], mutated=(0,)) + [
    C("w_grad", [L("x", [2, 3]), L("w", [3, 2], True)], ["x", "w"]),
]))

add(case("xtra_fill_zero_copy_dupes", """
def f(a, b):
    a.fill_(2.0)
    b.copy_(a * 3)
    return a + b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.fill_(2.0);
    b.copy_(a * 3.0);
    a + b
}
""", std([("x", [2, 2]), ("y", [2, 2])], mutated=(0, 1)) + [
    C("dupe_grad", [L("x", [2, 2], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_nograd", [L("x", [2, 2])], ["x", "x"]),
    C("b_grad_only", [L("x", [2, 2]), L("y", [2, 2], True)], ["x", "y.copy()"]),
]))

add(case("xtra_detach_mutation_input_returned", """
def f(a):
    a.detach().add_(1)
    return a, a.detach(), a * 2
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    a.detach().add_(1.0);
    (a, a.detach(), a * 2.0)
}
""", std([("x", [2, 2])], mutated=(0,), leaf_grad=True)))

add(case("xtra_detach_row_mutation_then_use", """
def f(a, b):
    d = a.detach()
    d.select(0, 1).mul_(2)
    return a * b, d
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let d = a.detach();
    d.select(0, 1).mul_(2.0);
    (a * b, d)
}
""", std([("x", [2, 3]), ("y", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_mutated_input_detached_output", """
def f(a):
    a.add_(1)
    return a.detach(), a * 2
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    a.add_(1.0);
    (a.detach(), a * 2.0)
}
""", std([("x", [3])], mutated=(0,))))

add(case("xtra_no_grad_leaf_row_fill", """
def f(a, b):
    with torch.no_grad():
        a.select(0, 0).fill_(1.0)
    return a * b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    no_grad! {
        a.select(0, 0).fill_(1.0);
    }
    a * b
}
""", std([("x", [2, 2]), ("y", [2, 2])], mutated=(0,), leaf_grad=True)))

add(case("xtra_no_grad_view_mutated_with_grad", """
def f(a):
    with torch.no_grad():
        v = a.view(-1)
    v.mul_(2)
    return a + 1
""", """
fn f(a: &mut Tensor) -> Tensor {
    let v = no_grad! { a.view(&[-1]) };
    v.mul_(2.0);
    a + 1.0
}
""", std([("x", [2, 2])], mutated=(0,)) + [
    C("leaf_grad", [L("x", [2, 2], True)], ["x"],
      note="eager PyTorch refuses: in-place op on a view made under no_grad of a tensor that requires grad"),
]))

add(case("xtra_no_grad_value_let", """
def f(a, b):
    with torch.no_grad():
        s = a * 2
    return s + b, s
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let s = no_grad! { a * 2.0 };
    (s + b, s)
}
""", std([("x", [2, 3]), ("y", [2, 3])], leaf_grad=True)))

# ---------------------------------------------------------------------------
# Outputs aliasing inputs and intermediates
# ---------------------------------------------------------------------------

add(case("test_output_aliases_intermediate_single", """
def f(a):
    out = torch.mul(a, 3)
    return out.view(-1)
""", """
fn f(a: &Tensor) -> Tensor {
    let out = a * 3.0;
    out.view(&[-1])
}
""", std([("x", [3, 3])], leaf_grad=True, grad=False)))

add(case("test_output_aliases_intermediate_no_grad", """
def f(a, b):
    out = torch.mul(a, 3)
    return out.view(-1), b.add(1)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let out = a * 3.0;
    (out.view(&[-1]), b.add(1.0))
}
""", [
    C("b_grad", [L("x", [3, 3]), L("y", [3, 3], True)], ["x", "y"]),
    C("a_grad", [L("x", [3, 3], True), L("y", [3, 3])], ["x", "y"]),
    C("nograd", [L("x", [3, 3]), L("y", [3, 3])], ["x", "y"]),
]))

add(case("test_output_aliases_intermediate_returned_multiple_times", """
def f(a):
    out = torch.mul(a, 3)
    out_view = out.view(-1)
    return out, out_view, out
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    let out = a * 3.0;
    let out_view = out.view(&[-1]);
    (out, out_view, out)
}
""", std([("x", [3, 3])], leaf_grad=True, grad=False)))

add(case("test_output_aliases_intermediate_multiple", """
def f(a):
    out = torch.mul(a, 3)
    return out.view(-1), out.view(-1)
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let out = a * 3.0;
    (out.view(&[-1]), out.view(&[-1]))
}
""", std([("x", [3, 3])], leaf_grad=True, grad=False)))

add(case("test_output_aliases_intermediate_and_returned", """
def f(a):
    out = torch.mul(a, 3)
    return out.view(-1), out
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let out = a * 3.0;
    (out.view(&[-1]), out)
}
""", std([("x", [3, 3])], leaf_grad=True, grad=False)))

add(case("test_output_aliases_intermediate_multiple_mixed", """
def f(a):
    out1 = torch.mul(a, 3)
    out2 = torch.mul(a, 4)
    return out1.view(-1), out2.transpose(1, 0), out1.transpose(1, 0)
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    let out1 = a * 3.0;
    let out2 = a * 4.0;
    (out1.view(&[-1]), out2.transpose(1, 0), out1.transpose(1, 0))
}
""", std([("x", [2, 3])], leaf_grad=True, grad=False)))

add(case("test_output_aliases_intermediate_inplace_view", """
def f(a):
    out = torch.mul(a, 3)
    out.t_()
    return out
""", """
fn f(a: &Tensor) -> Tensor {
    let out = a * 3.0;
    out.t_();
    out
}
""", std([("x", [2, 4])], leaf_grad=True, grad=False)))

add(case("test_outputs_are_aliased", """
def f(a):
    b = a.mul(2)
    c = b.view(-1)
    return b, c
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let b = a.mul(2.0);
    let c = b.view(&[-1]);
    (b, c)
}
""", std([("x", [3])], leaf_grad=True, grad=False)))

add(case("test_output_aliases_multiple_inputs_get_correct_one", """
def f(a, b):
    return a.view(4), b.view(2)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    (a.view(&[4]), b.view(&[2]))
}
""", [
    C("alias_grad", [L("x", [2, 2], True)], ["p.view([-1])", "p.select(0,0)"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [2, 2])], ["x.view([-1])", "x.select(0,0)"]),
    C("grad", [L("x", [4], True), L("y", [2], True)], ["x", "y"]),
]))

add(case("test_no_grad_input_output", """
def f(a, b):
    return a.cos(), b.cos(), a * b
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a.cos(), b.cos(), a * b)
}
""", [
    C("a_grad", [L("x", [5], True), L("y", [5])], ["x", "y"]),
    C("b_grad", [L("x", [5]), L("y", [5], True)], ["x", "y"]),
    C("both_grad", [L("x", [5], True), L("y", [5], True)], ["x", "y"]),
    C("nograd", [L("x", [5]), L("y", [5])], ["x", "y"]),
]))

add(case("test_multi_output", """
def f(a, b):
    return a + b, a - b
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    (a + b, a - b)
}
""", [
    C("a_grad", [L("x", [3, 3], True), L("y", [3, 3])], ["x", "y"]),
    C("nograd", [L("x", [3, 3]), L("y", [3, 3])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [3, 3], True)], ["x", "x"]),
]))

add(case("test_non_tensor_and_none_inputs", """
def f(a, c):
    return a * c
""", """
fn f(a: f64, c: &Tensor) -> Tensor {
    c * a
}
""", [
    C("grad", [L("x", [3, 3], True)], [2.0, "x"]),
    C("nograd", [L("x", [3, 3])], [2.0, "x"]),
]))

add(case("xtra_input_returned_twice", """
def f(a, b):
    return a, a, b * 2
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a, a, b * 2.0)
}
""", [
    C("leaf_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x", "y"]),
    C("grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x.copy()", "y"]),
    C("nograd", [L("x", [2, 2]), L("y", [2, 2])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [2, 2], True)], ["x", "x"]),
]))

add(case("xtra_intermediate_returned_twice", """
def f(a):
    out = a.sin()
    return out, out, out.t()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    let out = a.sin();
    (out, out, out.t())
}
""", std([("x", [2, 3])], leaf_grad=True, grad=False)))

add(case("xtra_mutated_input_returned_twice", """
def f(a):
    a.mul_(2)
    return a, a
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    a.mul_(2.0);
    (a, a)
}
""", std([("x", [2, 2])], mutated=(0,), leaf_grad=True)))

add(case("xtra_mutated_input_returned_with_view_and_other_input", """
def f(a, b):
    a.add_(b)
    return a, a.view(-1), b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    a.add_(b);
    (a, a.view(&[-1]), b)
}
""", std([("x", [2, 2]), ("y", [2, 2])], mutated=(0,)) + [
    C("b_leaf_grad", [L("x", [2, 2]), L("y", [2, 2], True)], ["x", "y"]),
]))

add(case("xtra_intermediate_base_is_user_output", """
def f(a):
    out = a * 2
    return out.view(-1), out.t(), out, out.select(0, 0).detach()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let out = a * 2.0;
    (out.view(&[-1]), out.t(), out, out.select(0, 0).detach())
}
""", std([("x", [2, 3])], leaf_grad=True, grad=False)))

add(case("xtra_input_view_and_intermediate_view_mixed", """
def f(a, b):
    t = a + b
    return a.t(), t.t(), b.view(-1), t.narrow(0, 0, 1)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let t = a + b;
    (a.t(), t.t(), b.view(&[-1]), t.narrow(0, 0, 1))
}
""", std([("x", [2, 3]), ("y", [2, 3])], leaf_grad=True, grad=False) + [
    C("a_grad", [L("x", [2, 3], True), L("y", [2, 3])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [2, 3], True)], ["x", "x"]),
]))

add(case("xtra_output_aliases_input_multi_views_and_view", """
def f(a):
    return a.select(0, 0), a.select(0, 1), a.view(2, 3)
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a.select(0, 0), a.select(0, 1), a.view(&[2, 3]))
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_expand_input_output", """
def f(a, b):
    c = a.expand(2, 3)
    return c + b, c
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let c = a.expand(&[2, 3]);
    (c + b, c)
}
""", [
    C("leaf_grad", [L("x", [1, 3], True), L("y", [2, 3], True)], ["x", "y"]),
    C("grad", [L("x", [1, 3], True), L("y", [2, 3])], ["x.copy()", "y"]),
    C("nograd", [L("x", [1, 3]), L("y", [2, 3])], ["x", "y"]),
]))

add(case("xtra_as_strided_view_output", """
def f(a):
    return a.as_strided([2], [3], 1), a.sum()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    (a.as_strided(&[2], &[3], 1), a.sum())
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_reshape_copy_and_view_outputs", """
def f(a):
    return a.t().reshape(-1), a.reshape(-1), a.t().reshape(3, 2)
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a.t().reshape(&[-1]), a.reshape(&[-1]), a.t().reshape(&[3, 2]))
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_contiguous_outputs", """
def f(a):
    return a.t().contiguous(), a.contiguous(), (a * 2).contiguous()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a.t().contiguous(), a.contiguous(), (a * 2.0).contiguous())
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True) + [
    C("transposed_nograd", [L("x", [3, 2])], ["x.t()"]),
]))

add(case("xtra_to_dtype_outputs", """
def f(a):
    b = a.to(torch.float32)
    c = a.to(torch.float64) * 2
    a.copy_(a * 1)
    return b, c, a
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    let b = a.to_dtype(DType::F32);
    let c = a.to_dtype(DType::F64) * 2.0;
    a.copy_(a * 1.0);
    (b, c, a)
}
""", std([("x", [2, 2])], mutated=(0,))))

add(case("xtra_where_mask_outputs", """
def f(a, b):
    m = a.gt(0.0)
    r = torch.where(m, a, b)
    return r * 2, m, r.sum()
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    let m = a.gt(0.0);
    let r = a.where_(&m, b);
    (r * 2.0, m, r.sum())
}
""", std([("x", [2, 3]), ("y", [2, 3])], leaf_grad=True, grad=False) + [
    C("b_grad", [L("x", [2, 3]), L("y", [2, 3], True)], ["x", "y"]),
]))

add(case("xtra_zeros_like_accumulate", """
def f(a, b):
    z = torch.zeros_like(a)
    z.add_(a)
    z.mul_(b)
    return z + torch.full_like(a, 0.5), torch.ones_like(b)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let z = a.zeros_like();
    z.add_(a);
    z.mul_(b);
    (z + a.full_like(0.5), b.ones_like())
}
""", std([("x", [2, 2]), ("y", [2, 2])], leaf_grad=True, grad=False) + [
    C("b_grad", [L("x", [2, 2]), L("y", [2, 2], True)], ["x", "y"]),
]))

add(case("xtra_matmul_3d_2d_output", """
def f(a, b):
    out = a.matmul(b)
    return out, out.view(-1)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let out = a.matmul(b);
    (out, out.view(&[-1]))
}
""", std([("x", [2, 2, 3]), ("y", [3, 2])], leaf_grad=True, grad=False)))

add(case("xtra_gelu_silu_on_mutated", """
def f(a, b):
    a.mul_(b)
    return torch.nn.functional.gelu(a), torch.nn.functional.silu(a).sum(dim=[0], keepdim=False)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.mul_(b);
    (a.gelu(), a.silu().sum_dim(&[0], false))
}
""", std([("x", [2, 3]), ("y", [2, 3])], mutated=(0,))))

# ---------------------------------------------------------------------------
# Metadata mutations
# ---------------------------------------------------------------------------

add(case("xtra_unsqueeze_then_row_mutation", """
def f(a):
    a.unsqueeze_(0)
    a.select(1, 0).mul_(2)
    return a.squeeze(0), a.sum(dim=[2], keepdim=False)
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    a.unsqueeze_(0);
    a.select(1, 0).mul_(2.0);
    (a.squeeze(0), a.sum_dim(&[2], false))
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_squeeze_inplace_returned", """
def f(a, b):
    a.squeeze_(1)
    return a * b, a
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.squeeze_(1);
    (a * b, a)
}
""", [
    C("grad", [L("x", [3, 1], True), L("y", [3], True)], ["x.copy()", "y"], note=BW_VERSION),
    C("leaf_grad", [L("x", [3, 1], True), L("y", [3], True)], ["x", "y"]),
    C("nograd", [L("x", [3, 1]), L("y", [3])], ["x", "y"]),
]))

add(case("xtra_as_strided_inplace_input", """
def f(a):
    a.as_strided_([2, 2], [1, 2], 0)
    return a + 1, a.select(0, 1)
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    a.as_strided_(&[2, 2], &[1, 2], 0);
    (a + 1.0, a.select(0, 1))
}
""", std([("x", [2, 2])], mutated=(0,), leaf_grad=True)))

add(case("xtra_transpose_inplace_intermediate_views", """
def f(a):
    t = a.sin() + 1
    t.transpose_(0, 1)
    return t.diagonal(), t.narrow(0, 0, 2), t.sum()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    let t = a.sin() + 1.0;
    t.transpose_(0, 1);
    (t.diagonal(), t.narrow(0, 0, 2), t.sum())
}
""", [
    C("leaf_grad", [L("x", [2, 3], True)], ["x"],
      note="PyTorch internal AssertionError replaying the views of an intermediate that had a metadata "
           "mutation (training graph); eager runs"),
    C("nograd", [L("x", [2, 3])], ["x"]),
]))

add(case("xtra_t_inplace_then_mm", """
def f(a, b):
    b.t_()
    return a.mm(b), b
""", """
fn f(a: &Tensor, b: &mut Tensor) -> (Tensor, Tensor) {
    b.t_();
    (a.mm(b), b)
}
""", [
    C("grad", [L("x", [2, 2], True), L("y", [3, 2], True)], ["x", "y.copy()"], note=BW_VERSION),
    C("leaf_grad", [L("x", [2, 2], True), L("y", [3, 2], True)], ["x", "y"]),
    C("nograd", [L("x", [2, 2]), L("y", [3, 2])], ["x", "y"]),
]))

add(case("xtra_permute_view_mutated_returned_with_base", """
def f(a):
    v = a.permute(1, 0)
    v.mul_(2)
    return a, v, v.sum(dim=[0], keepdim=True)
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    let v = a.permute(&[1, 0]);
    v.mul_(2.0);
    (a, v, v.sum_dim(&[0], true))
}
""", std([("x", [2, 3])], mutated=(0,))))

# ---------------------------------------------------------------------------
# Aliased and duplicated arguments
# ---------------------------------------------------------------------------

add(case("test_input_data_and_metadata_mutation_aliases_other_input", """
def f(a, b):
    a.mul_(2)
    b.t_()
    return a.mul(b)
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.mul_(2.0);
    b.t_();
    a.mul(b)
}
""", [
    C("alias_grad", [L("x", [2, 2], True)], ["p.select(0,0)", "p.select(0,0)"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [2, 2])], ["x.select(0,0)", "x.select(0,0)"]),
    C("alias2d_grad", [L("x", [2, 2], True)], ["p.view([2,2])", "p.view([2,2])"], lets=[["p", "x.copy()"]]),
    C("alias2d_nograd", [L("x", [2, 2])], ["x.view([2,2])", "x.view([2,2])"]),
    C("grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x.copy()", "y.copy()"], note=BW_VERSION),
]))

add(case("test_input_mutation_false_aliasing", """
def f(a, b):
    a.mul_(3)
    b.mul_(2)
    return a.clone().view(-1) + b.clone().view(-1)
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.mul_(3.0);
    b.mul_(2.0);
    a.copy().view(&[-1]) + b.copy().view(&[-1])
}
""", [
    C("rows_nograd", [L("x", [4, 4])], ["x.narrow(0,0,2)", "x.narrow(0,2,2)"]),
    C("rows_grad", [L("x", [4, 4], True)], ["p.narrow(0,0,2)", "p.narrow(0,2,2)"], lets=[["p", "x.copy()"]]),
    C("cols_nograd", [L("x", [4, 4])], ["x.narrow(1,0,2)", "x.narrow(1,2,2)"]),
    C("cols_grad", [L("x", [4, 4], True)], ["p.narrow(1,0,2)", "p.narrow(1,2,2)"], lets=[["p", "x.copy()"]]),
    C("strided_disjoint_nograd", [L("x", [24])], ["x.as_strided([2,2],[3,1],0)", "x.as_strided([2,2],[3,1],7)"]),
    C("strided_interleaved_nograd", [L("x", [24])], ["x.as_strided([2,2],[4,1],0)", "x.as_strided([2,2],[4,1],2)"]),
    C("strided_overlap_nograd", [L("x", [24])], ["x.as_strided([2,2],[3,1],0)", "x.as_strided([2,2],[3,1],4)"],
      note=OVERLAP),
    C("strided_overlap_grad", [L("x", [24], True)], ["p.as_strided([2,2],[3,1],0)", "p.as_strided([2,2],[3,1],4)"],
      lets=[["p", "x.copy()"]], note=OVERLAP),
]))

add(case("test_input_mutation_aliases_other_input", """
def f(a, b):
    a.add_(1)
    return a + b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(1.0);
    a + b
}
""", [
    C("alias_grad", [L("x", [4, 2], True)], ["p.select(0,0)", "p.select(0,0)"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [4, 2])], ["x.select(0,0)", "x.select(0,0)"]),
    C("alias_rows_grad", [L("x", [4, 2], True)], ["p.select(0,0)", "p.select(0,1)"], lets=[["p", "x.copy()"]]),
    C("dupe_grad", [L("x", [2], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
]))

add(case("test_input_mutation_aliases_and_output_alias", """
def f(a, b):
    a.add_(1)
    return b.view(4)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(1.0);
    b.view(&[4])
}
""", [
    C("alias_grad", [L("x", [2, 2], True)], ["p.view([-1])", "p.view([-1])"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [2, 2])], ["x.view([-1])", "x.view([-1])"]),
    C("dupe_grad", [L("x", [4], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_nograd", [L("x", [4])], ["x", "x"]),
]))

add(case("test_input_aliased_with_mutation_output_alias", """
def f(a, b, c):
    c.mul_(2)
    return b.add(1), c.view(-1)
""", """
fn f(a: &Tensor, b: &Tensor, c: &mut Tensor) -> (Tensor, Tensor) {
    c.mul_(2.0);
    (b.add(1.0), c.view(&[-1]))
}
""", [
    C("alias_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["p.view([-1])", "q", "p.view([-1])"],
      lets=[["p", "x.copy()"], ["q", "y.copy()"]]),
    C("alias_nograd", [L("x", [2, 2]), L("y", [2, 2])], ["x.view([-1])", "y", "x.view([-1])"]),
]))

add(case("test_input_metadata_mutation_aliases", """
def f(a, b):
    a.t_()
    return a + b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.t_();
    a + b
}
""", [
    C("alias_grad", [L("x", [2, 2], True)], ["p.view([-1])", "p.view([-1])"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [2, 2])], ["x.view([-1])", "x.view([-1])"]),
    C("alias2d_grad", [L("x", [2, 2], True)], ["p.view([2,2])", "p.view([2,2])"], lets=[["p", "x.copy()"]]),
    C("alias2d_leafview_grad", [L("x", [2, 2], True)], ["x.view([2,2])", "x.view([2,2])"]),
]))

add(case("test_input_mutation_aliases_and_none_require_gradients", """
def f(a, b, c):
    a.mul_(2)
    return b + 1, c + 1
""", """
fn f(a: &mut Tensor, b: &Tensor, c: &Tensor) -> (Tensor, Tensor) {
    a.mul_(2.0);
    (b + 1.0, c + 1.0)
}
""", [
    C("c_grad", [L("x", [2, 2]), L("c", [2, 2], True)], ["x.view([-1])", "x.view([-1])", "c"]),
    C("nograd", [L("x", [2, 2]), L("c", [2, 2])], ["x.view([-1])", "x.view([-1])", "c"]),
]))

add(case("test_input_mutation_alias_everything", """
def f(a, b, c):
    c.mul_(2)
    b.t_()
    tmp = a + c
    out1 = tmp.view(-1)
    out2 = b.t()
    out3 = out1.unsqueeze(0)
    return out1, out2, out3
""", """
fn f(a: &Tensor, b: &mut Tensor, c: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    c.mul_(2.0);
    b.t_();
    let tmp = a + c;
    let out1 = tmp.view(&[-1]);
    let out2 = b.t();
    let out3 = out1.unsqueeze(0);
    (out1, out2, out3)
}
""", [
    C("alias_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["p.view([-1])", "q", "p.view([-1])"],
      lets=[["p", "x.copy()"], ["q", "y.copy()"]]),
    C("alias_nograd", [L("x", [2, 2]), L("y", [2, 2])], ["x.view([-1])", "y", "x.view([-1])"]),
]))

add(case("test_dupe_arg", """
def f(x, y):
    return x + y
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x + y
}
""", [
    C("dupe_leaf_grad", [L("x", [3, 3], True)], ["x", "x"]),
    C("dupe_nograd", [L("x", [3, 3])], ["x", "x"]),
    C("alias_leaf_grad", [L("x", [3, 3], True)], ["x.t()", "x"]),
]))

add(case("test_dupe_arg_torture", """
def f(x, y):
    x.t_()
    y.unsqueeze_(0)
    return x + y
""", """
fn f(x: &mut Tensor, y: &mut Tensor) -> Tensor {
    x.t_();
    y.unsqueeze_(0);
    x + y
}
""", [
    C("dupe_grad", [L("x", [3, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_nograd", [L("x", [3, 3])], ["x", "x"]),
    C("grad", [L("x", [3, 3], True), L("y", [3, 3], True)], ["x.copy()", "y.copy()"]),
    C("alias_grad", [L("x", [3, 3], True)], ["p.view([3,3])", "p.view([3,3])"], lets=[["p", "x.copy()"]]),
]))

add(case("test_dupe_arg_returned_as_output", """
def f(a, b, a_):
    a.select(0, 0).add_(1)
    return a_
""", """
fn f(a: &mut Tensor, b: &Tensor, a_: &Tensor) -> Tensor {
    a.select(0, 0).add_(1.0);
    a_
}
""", [
    C("dupe_nograd", [L("x", [2]), L("y", [2])], ["x", "y", "x"]),
    C("dupe_grad", [L("x", [2], True), L("y", [2], True)], ["p", "y", "p"], lets=[["p", "x.copy()"]]),
    C("grad", [L("x", [2], True), L("y", [2], True), L("z", [2], True)], ["x.copy()", "y", "z"]),
]))

add(case("test_invalid_dupe_left_bias", """
def f(x, y):
    x.t_()
    return x + y
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.t_();
    x + y
}
""", [
    C("dupe_grad", [L("x", [3, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_leaf_grad", [L("x", [3, 3], True)], ["x", "x"]),
    C("grad", [L("x", [3, 3], True), L("y", [3, 3], True)], ["x.copy()", "y"]),
]))

add(case("test_invalid_dupe", """
def f(x, y):
    x.unsqueeze_(0)
    y.unsqueeze_(0)
    return x + y
""", """
fn f(x: &mut Tensor, y: &mut Tensor) -> Tensor {
    x.unsqueeze_(0);
    y.unsqueeze_(0);
    x + y
}
""", [
    C("grad", [L("x", [3, 3], True), L("y", [3, 3], True)], ["x.copy()", "y.copy()"]),
    C("dupe_grad", [L("x", [3, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("nograd", [L("x", [3, 3]), L("y", [3, 3])], ["x", "y"]),
]))

add(case("xtra_two_row_views_both_mutated", """
def f(a, b):
    a.mul_(2)
    b.add_(1)
    return a + b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.mul_(2.0);
    b.add_(1.0);
    a + b
}
""", [
    C("disjoint_grad", [L("x", [3, 2], True)], ["p.narrow(0,0,1)", "p.narrow(0,1,1)"], lets=[["p", "x.copy()"]]),
    C("disjoint_nograd", [L("x", [3, 2])], ["x.narrow(0,0,1)", "x.narrow(0,1,1)"]),
    C("overlap_grad", [L("x", [3, 2], True)], ["p.narrow(0,0,2)", "p.narrow(0,1,2)"], lets=[["p", "x.copy()"]],
      note=ALIAS_ASSERT),
    C("overlap_nograd", [L("x", [3, 2])], ["x.narrow(0,0,2)", "x.narrow(0,1,2)"]),
    C("grad", [L("x", [1, 2], True), L("y", [1, 2], True)], ["x.copy()", "y.copy()"]),
]))

add(case("xtra_base_and_row_view_args", """
def f(a, b):
    b.mul_(2)
    return a * 1, b.sum()
""", """
fn f(a: &Tensor, b: &mut Tensor) -> (Tensor, Tensor) {
    b.mul_(2.0);
    (a * 1.0, b.sum())
}
""", [
    C("alias_grad", [L("x", [2, 3], True)], ["p", "p.select(0,1)"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [2, 3])], ["x", "x.select(0,1)"]),
    C("grad", [L("x", [2, 3], True), L("y", [3], True)], ["x", "y.copy()"]),
]))

add(case("xtra_dupe_data_and_metadata_mutation", """
def f(a, b):
    a.mul_(2)
    b.t_()
    return a + b, b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> (Tensor, Tensor) {
    a.mul_(2.0);
    b.t_();
    (a + b, b)
}
""", [
    C("dupe_grad", [L("x", [2, 2], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_nograd", [L("x", [2, 2])], ["x", "x"]),
    C("grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x.copy()", "y.copy()"]),
]))

add(case("xtra_dupe_no_grad_mutation", """
def f(a, b, w):
    with torch.no_grad():
        a.add_(w)
    return (b * w).sum()
""", """
fn f(a: &mut Tensor, b: &Tensor, w: &Tensor) -> Tensor {
    no_grad! {
        a.add_(w);
    }
    (b * w).sum()
}
""", [
    C("dupe_leaf_grad", [L("x", [3], True), L("w", [3], True)], ["x", "x", "w"], note=DUPE_INDEX),
    C("dupe_grad", [L("x", [3], True), L("w", [3], True)], ["p", "p", "w"], lets=[["p", "x.copy()"]], note=DUPE_INDEX),
    C("dupe_nograd", [L("x", [3]), L("w", [3])], ["x", "x", "w"]),
]))

# ---------------------------------------------------------------------------
# Intermediates mutated
# ---------------------------------------------------------------------------

add(case("test_aot_export_predispatch_func_simple", """
def f(p, x):
    y = x + 2
    with torch.no_grad():
        y.add_(2)
    return x * 2 + y
""", """
fn f(p: &Tensor, x: &Tensor) -> Tensor {
    let y = x + 2.0;
    no_grad! {
        y.add_(2.0);
    }
    x * 2.0 + y
}
""", [
    C("x_grad", [L("p", [2], True), L("x", [2, 2], True)], ["p", "x"]),
    C("nograd", [L("p", [2]), L("x", [2, 2])], ["p", "x"]),
]))

add(case("test_aot_export_predispatch_with_autograd_op", """
def f(p, x):
    y = x + 5
    y.add_(5)
    y.add_(7)
    return x.cos() + y.sin()
""", """
fn f(p: &Tensor, x: &Tensor) -> Tensor {
    let y = x + 5.0;
    y.add_(5.0);
    y.add_(7.0);
    x.cos() + y.sin()
}
""", [
    C("x_grad", [L("p", [2], True), L("x", [2, 2], True)], ["p", "x"]),
    C("nograd", [L("p", [2]), L("x", [2, 2])], ["p", "x"]),
]))

add(case("xtra_mutate_intermediate_view_outputs", """
def f(a):
    t = a * 2
    v1 = t.select(0, 0)
    v2 = t.narrow(0, 1, 1)
    v1.add_(1)
    return v1, v2, t.sum()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    let t = a * 2.0;
    let v1 = t.select(0, 0);
    let v2 = t.narrow(0, 1, 1);
    v1.add_(1.0);
    (v1, v2, t.sum())
}
""", std([("x", [2, 3])], leaf_grad=True, grad=False)))

add(case("xtra_clamp_relu_inplace_intermediate", """
def f(a, b):
    t = a.matmul(b)
    t.clamp_(-0.5, 0.5)
    t.relu_()
    return t
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    let t = a.matmul(b);
    t.clamp_(-0.5, 0.5);
    t.relu_();
    t
}
""", std([("x", [2, 3]), ("y", [3, 2])], leaf_grad=True, grad=False)))

add(case("xtra_residual_inplace_add_relu", """
def f(x, w):
    h = x.matmul(w)
    h.add_(x)
    h.relu_()
    return h, h.sum(dim=[1], keepdim=False)
""", """
fn f(x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let h = x.matmul(w);
    h.add_(x);
    h.relu_();
    (h, h.sum_dim(&[1], false))
}
""", std([("x", [2, 2]), ("w", [2, 2])], leaf_grad=True, grad=False) + [
    C("w_grad", [L("x", [2, 2]), L("w", [2, 2], True)], ["x", "w"]),
]))

add(case("xtra_loop_accumulate_rows", """
def f(acc, x):
    for i in range(3):
        acc.add_(x.select(0, i))
    return acc * 2
""", """
fn f(acc: &mut Tensor, x: &Tensor) -> Tensor {
    for i in 0..3 {
        acc.add_(x.select(0, i));
    }
    acc * 2.0
}
""", [
    C("x_grad", [L("acc", [2]), L("x", [3, 2], True)], ["acc", "x"]),
    C("grad", [L("acc", [2], True), L("x", [3, 2], True)], ["acc.copy()", "x"]),
    C("nograd", [L("acc", [2]), L("x", [3, 2])], ["acc", "x"]),
]))

add(case("xtra_stable_softmax_inplace", """
def f(a):
    m = a.amax(dim=[1], keepdim=True).detach()
    a.sub_(m)
    return a.softmax(1), a
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    let m = a.amax_dim(&[1], true).detach();
    a.sub_(m);
    (a.softmax(1), a)
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_log_softmax_residual_var", """
def f(x, y):
    x.add_(y.log_softmax(0))
    return x.var(dim=[0], correction=1, keepdim=False)
""", """
fn f(x: &mut Tensor, y: &Tensor) -> Tensor {
    x.add_(y.log_softmax(0));
    x.var_dim(&[0], 1, false)
}
""", std([("x", [3, 2]), ("y", [3, 2])], mutated=(0,)) + [
    C("y_grad", [L("x", [3, 2]), L("y", [3, 2], True)], ["x", "y"]),
]))

add(case("xtra_var_mean_on_mutated", """
def f(a, b):
    a.mul_(b)
    return a.var(dim=[1], correction=1, keepdim=True), a.mean(dim=[0], keepdim=False)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.mul_(b);
    (a.var_dim(&[1], 1, true), a.mean_dim(&[0], false))
}
""", std([("x", [2, 3]), ("y", [2, 3])], mutated=(0,)) + [
    C("dupe_nograd", [L("x", [2, 3])], ["x", "x"]),
]))

add(case("xtra_bmm_after_mutation", """
def f(a, b):
    a.mul_(0.5)
    return a.bmm(b)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.mul_(0.5);
    a.bmm(b)
}
""", std([("x", [2, 2, 3]), ("y", [2, 3, 2])], mutated=(0,))))

# ---------------------------------------------------------------------------
# Slice assignment, caches
# ---------------------------------------------------------------------------

add(case("xtra_slice_step_assign", """
def f(a, b):
    a[:, 0:4:2].copy_(b)
    return a.sum(dim=[0], keepdim=False)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.slice(1, 0, 4, 2).copy_(b);
    a.sum_dim(&[0], false)
}
""", std([("x", [2, 4]), ("y", [2, 2])], mutated=(0,), leaf_grad=True) + [
    C("b_grad", [L("x", [2, 4]), L("y", [2, 2], True)], ["x", "y"]),
]))

add(case("xtra_diagonal_fill_then_matmul", """
def f(a, b):
    a.diagonal().fill_(0.0)
    return a.matmul(b)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.diagonal().fill_(0.0);
    a.matmul(b)
}
""", std([("x", [3, 3]), ("y", [3, 2])], mutated=(0,), leaf_grad=True)))

add(case("xtra_kv_cache_narrow_write", """
def f(cache, k, q):
    cache.narrow(0, 2, 1).copy_(k)
    return q.matmul(cache.t()).softmax(-1)
""", """
fn f(cache: &mut Tensor, k: &Tensor, q: &Tensor) -> Tensor {
    cache.narrow(0, 2, 1).copy_(k);
    q.matmul(cache.t()).softmax(-1)
}
""", [
    C("k_grad", [L("cache", [4, 3]), L("k", [1, 3], True), L("q", [2, 3])], ["cache", "k", "q"]),
    C("kq_grad", [L("cache", [4, 3]), L("k", [1, 3], True), L("q", [2, 3], True)], ["cache", "k", "q"]),
    C("cache_grad", [L("cache", [4, 3], True), L("k", [1, 3], True), L("q", [2, 3])], ["cache.copy()", "k", "q"]),
    C("nograd", [L("cache", [4, 3]), L("k", [1, 3]), L("q", [2, 3])], ["cache", "k", "q"]),
]))

add(case("xtra_kv_cache_write_no_grad", """
def f(cache, k, q):
    with torch.no_grad():
        cache.narrow(0, 1, 2).copy_(k)
    return q.matmul(cache.t()) * 0.5
""", """
fn f(cache: &mut Tensor, k: &Tensor, q: &Tensor) -> Tensor {
    no_grad! {
        cache.narrow(0, 1, 2).copy_(k);
    }
    q.matmul(cache.t()) * 0.5
}
""", [
    C("q_grad", [L("cache", [4, 3]), L("k", [2, 3], True), L("q", [2, 3], True)], ["cache", "k", "q"]),
    C("nograd", [L("cache", [4, 3]), L("k", [2, 3]), L("q", [2, 3])], ["cache", "k", "q"]),
]))

add(case("xtra_kv_cache_select_write_detached", """
def f(cache, k, v):
    cache.select(0, 1).copy_(k.detach())
    cache.select(0, 3).copy_(v)
    return cache.sum(dim=[0], keepdim=False), cache.select(0, 1)
""", """
fn f(cache: &mut Tensor, k: &Tensor, v: &Tensor) -> (Tensor, Tensor) {
    cache.select(0, 1).copy_(k.detach());
    cache.select(0, 3).copy_(v);
    (cache.sum_dim(&[0], false), cache.select(0, 1))
}
""", [
    C("kv_grad", [L("cache", [4, 3]), L("k", [3], True), L("v", [3], True)], ["cache", "k", "v"]),
    C("k_grad", [L("cache", [4, 3]), L("k", [3], True), L("v", [3])], ["cache", "k", "v"]),
    C("nograd", [L("cache", [4, 3]), L("k", [3]), L("v", [3])], ["cache", "k", "v"]),
]))

add(case("xtra_cache_view_arg_write", """
def f(slot, k):
    slot.copy_(k * 2)
    return slot.sum()
""", """
fn f(slot: &mut Tensor, k: &Tensor) -> Tensor {
    slot.copy_(k * 2.0);
    slot.sum()
}
""", [
    C("k_grad", [L("cache", [4, 3]), L("k", [3], True)], ["cache.select(0,2)", "k"]),
    C("nograd", [L("cache", [4, 3]), L("k", [3])], ["cache.select(0,2)", "k"]),
    C("both_grad", [L("cache", [4, 3], True), L("k", [3], True)], ["p.select(0,2)", "k"], lets=[["p", "cache.copy()"]]),
]))

# ---------------------------------------------------------------------------
# Optimizer steps, running statistics, buffers
# ---------------------------------------------------------------------------

add(case("xtra_sgd_momentum_no_grad", """
def f(w, g, buf, x, lr):
    with torch.no_grad():
        buf.mul_(0.9).add_(g)
        w.sub_(buf * lr)
    return x.matmul(w).tanh()
""", """
fn f(w: &mut Tensor, g: &Tensor, buf: &mut Tensor, x: &Tensor, lr: f64) -> Tensor {
    no_grad! {
        buf.mul_(0.9).add_(g);
        w.sub_(buf * lr);
    }
    x.matmul(w).tanh()
}
""", [
    C("param_leaf_grad", [L("w", [3, 2], True), L("g", [3, 2]), L("buf", [3, 2]), L("x", [2, 3])], ["w", "g", "buf", "x", 0.1]),
    C("param_copy_grad", [L("w", [3, 2], True), L("g", [3, 2]), L("buf", [3, 2]), L("x", [2, 3], True)],
      ["w.copy()", "g", "buf", "x", 0.5]),
    C("nograd", [L("w", [3, 2]), L("g", [3, 2]), L("buf", [3, 2]), L("x", [2, 3])], ["w", "g", "buf", "x", 0.1]),
]))

add(case("xtra_adam_like_update", """
def f(w, g, m, v, x, lr):
    with torch.no_grad():
        m.mul_(0.9).add_(g * 0.1)
        v.mul_(0.99).add_(g * g * 0.01)
        w.sub_(m / (v.abs().sqrt() + 0.1) * lr)
    return (w * x).sum(dim=[1], keepdim=False)
""", """
fn f(w: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, x: &Tensor, lr: f64) -> Tensor {
    no_grad! {
        m.mul_(0.9).add_(g * 0.1);
        v.mul_(0.99).add_(g * g * 0.01);
        w.sub_(m / (v.abs().sqrt() + 0.1) * lr);
    }
    (w * x).sum_dim(&[1], false)
}
""", [
    C("param_leaf_grad", [L("w", [2, 3], True), L("g", [2, 3]), L("m", [2, 3]), L("v", [2, 3]), L("x", [2, 3])],
      ["w", "g", "m.copy()", "v.copy()", "x", 0.01]),
    C("nograd", [L("w", [2, 3]), L("g", [2, 3]), L("m", [2, 3]), L("v", [2, 3]), L("x", [2, 3])],
      ["w", "g", "m", "v", "x", 0.01]),
]))

add(case("xtra_ema_update_detach", """
def f(ema, w, x):
    with torch.no_grad():
        ema.mul_(0.99).add_(w.detach() * 0.01)
    return x.matmul(w).mean(), ema
""", """
fn f(ema: &mut Tensor, w: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    no_grad! {
        ema.mul_(0.99).add_(w.detach() * 0.01);
    }
    (x.matmul(w).mean(), ema)
}
""", [
    C("w_grad", [L("ema", [3, 2]), L("w", [3, 2], True), L("x", [2, 3])], ["ema", "w", "x"]),
    C("nograd", [L("ema", [3, 2]), L("w", [3, 2]), L("x", [2, 3])], ["ema", "w", "x"]),
]))

add(case("xtra_zero_grad_buffer_no_grad", """
def f(g, w, x):
    with torch.no_grad():
        g.zero_()
    return (w * x).sum(), g
""", """
fn f(g: &mut Tensor, w: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    no_grad! {
        g.zero_();
    }
    ((w * x).sum(), g)
}
""", [
    C("w_grad", [L("g", [3]), L("w", [3], True), L("x", [3])], ["g", "w", "x"]),
    C("g_leaf_grad", [L("g", [3], True), L("w", [3], True), L("x", [3])], ["g", "w", "x"]),
    C("nograd", [L("g", [3]), L("w", [3]), L("x", [3])], ["g", "w", "x"]),
]))

add(case("xtra_batchnorm_running_stats_copy_", """
def f(x, w, b, running_mean, running_var):
    mean = x.mean(dim=[0], keepdim=True)
    var = x.var(dim=[0], correction=1, keepdim=True)
    with torch.no_grad():
        running_mean.copy_(running_mean * 0.9 + mean.squeeze(0) * 0.1)
        running_var.copy_(running_var * 0.9 + var.squeeze(0) * 0.1)
    return (x - mean) / (var + 1e-05).sqrt() * w + b
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor, running_mean: &mut Tensor, running_var: &mut Tensor) -> Tensor {
    let mean = x.mean_dim(&[0], true);
    let var = x.var_dim(&[0], 1, true);
    no_grad! {
        running_mean.copy_(running_mean * 0.9 + mean.squeeze(0) * 0.1);
        running_var.copy_(running_var * 0.9 + var.squeeze(0) * 0.1);
    }
    (x - mean) / (var + 1e-05).sqrt() * w + b
}
""", [
    C("train", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3])],
      ["x", "w", "b", "rm", "rv"]),
    C("train_x_copy", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3])],
      ["x.copy()", "w", "b", "rm", "rv"]),
    C("nograd", [L("x", [4, 3]), L("w", [3]), L("b", [3]), L("rm", [3]), L("rv", [3])], ["x", "w", "b", "rm", "rv"]),
]))

add(case("xtra_running_stats_updated_with_grad", """
def f(x, running_mean):
    mean = x.mean(dim=[0], keepdim=False)
    running_mean.mul_(0.9).add_(mean * 0.1)
    return x - running_mean
""", """
fn f(x: &Tensor, running_mean: &mut Tensor) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    running_mean.mul_(0.9).add_(mean * 0.1);
    x - running_mean
}
""", [
    C("x_grad", [L("x", [4, 3], True), L("rm", [3])], ["x", "rm"]),
    C("nograd", [L("x", [4, 3]), L("rm", [3])], ["x", "rm"]),
]))

add(case("xtra_layernorm_affine_inplace", """
def f(x, w, b):
    mean = x.mean(dim=[-1], keepdim=True)
    var = x.var(dim=[-1], correction=0, keepdim=True)
    y = (x - mean) * (var + 1e-05).rsqrt()
    y.mul_(w)
    y.add_(b)
    return y
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[-1], true);
    let var = x.var_dim(&[-1], 0, true);
    let y = (x - mean) * (var + 1e-05).rsqrt();
    y.mul_(w);
    y.add_(b);
    y
}
""", std([("x", [2, 4]), ("w", [4]), ("b", [4])], leaf_grad=True, grad=False) + [
    C("params_grad", [L("x", [2, 4]), L("w", [4], True), L("b", [4], True)], ["x", "w", "b"]),
]))

add(case("xtra_no_grad_weight_scale_then_residual", """
def f(w, x, b):
    with torch.no_grad():
        w.mul_(0.5)
    h = x.matmul(w) * 2
    h.add_(b)
    return h.relu().sum(dim=[1], keepdim=False)
""", """
fn f(w: &mut Tensor, x: &Tensor, b: &Tensor) -> Tensor {
    no_grad! {
        w.mul_(0.5);
    }
    let h = x.matmul(w) * 2.0;
    h.add_(b);
    h.relu().sum_dim(&[1], false)
}
""", [
    C("leaf_grad", [L("w", [3, 2], True), L("x", [2, 3], True), L("b", [2], True)], ["w", "x", "b"]),
    C("grad", [L("w", [3, 2], True), L("x", [2, 3], True), L("b", [2], True)], ["w.copy()", "x", "b"]),
    C("nograd", [L("w", [3, 2]), L("x", [2, 3]), L("b", [2])], ["w", "x", "b"]),
]))

add(case("test_buffer_copied_in_graph", """
def f(x, buf, w1, w2):
    buf.add_(1)
    return (w1 * x * w2).sum() + buf.sum()
""", """
fn f(x: &Tensor, buf: &mut Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    buf.add_(1.0);
    (w1 * x * w2).sum() + buf.sum()
}
""", [
    C("params_grad", [L("x", [1], True), L("buf", [1]), L("w1", [1], True), L("w2", [1], True)],
      ["x.copy()", "buf", "w1", "w2"]),
    C("nograd", [L("x", [1]), L("buf", [1]), L("w1", [1]), L("w2", [1])], ["x", "buf", "w1", "w2"]),
]))

add(case("test_buffer_copied_in_graph_with_different_shapes", """
def f(x, buf, w):
    buf.add_(1)
    return (w @ x).sum() + buf.sum()
""", """
fn f(x: &Tensor, buf: &mut Tensor, w: &Tensor) -> Tensor {
    buf.add_(1.0);
    w.matmul(x).sum() + buf.sum()
}
""", [
    C("params_grad", [L("x", [2, 4], True), L("buf", [4, 4]), L("w", [4, 2], True)], ["x.copy()", "buf", "w"]),
    C("nograd", [L("x", [2, 4]), L("buf", [4, 4]), L("w", [4, 2])], ["x", "buf", "w"]),
]))

# ---------------------------------------------------------------------------
# Layout-dependent aliasing, metadata mutations that change nothing, refusals
# ---------------------------------------------------------------------------

add(case("xtra_metadata_mutation_net_noop", """
def f(a):
    a.unsqueeze_(0)
    a.squeeze_(0)
    return a * 2
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.unsqueeze_(0);
    a.squeeze_(0);
    a * 2.0
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_squeeze_inplace_non_unit_dim", """
def f(a):
    a.squeeze_(0)
    a.mul_(2)
    return a
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.squeeze_(0);
    a.mul_(2.0);
    a
}
""", std([("x", [2, 3])], mutated=(0,)) + [
    C("unit_dim_grad", [L("x", [1, 3], True)], ["x.copy()"]),
    C("unit_dim_nograd", [L("x", [1, 3])], ["x"]),
]))

add(case("xtra_t_inplace_1d_then_data", """
def f(a):
    a.t_()
    a.add_(1)
    return a.view(-1)
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.t_();
    a.add_(1.0);
    a.view(&[-1])
}
""", std([("x", [4])], mutated=(0,)) + [
    C("matrix_grad", [L("x", [2, 2], True)], ["x.copy()"]),
]))

add(case("xtra_reshape_input_layout_dependent", """
def f(a):
    return a.reshape(-1), a.sum()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    (a.reshape(&[-1]), a.sum())
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True) + [
    C("transposed_grad", [L("x", [3, 2], True)], ["x.t()"]),
    C("transposed_nograd", [L("x", [3, 2])], ["x.t()"]),
    C("row_view_grad", [L("x", [3, 2], True)], ["x.narrow(0,1,2)"]),
]))

add(case("xtra_view_needs_contiguous_input", """
def f(a):
    return a.view(-1) * 2
""", """
fn f(a: &Tensor) -> Tensor {
    a.view(&[-1]) * 2.0
}
""", [
    C("leaf_grad", [L("x", [2, 3], True)], ["x"]),
    C("transposed_grad", [L("x", [3, 2], True)], ["x.t()"]),
    C("transposed_nograd", [L("x", [3, 2])], ["x.t()"]),
]))

add(case("xtra_inplace_broadcast_refused", """
def f(a, b):
    a.mul_(2)
    a.add_(b)
    return a
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.mul_(2.0);
    a.add_(b);
    a
}
""", [
    C("grad", [L("x", [2, 3], True), L("y", [3], True)], ["x.copy()", "y"]),
    C("nograd", [L("x", [2, 3]), L("y", [3])], ["x", "y"]),
    C("bad_shape_grad", [L("x", [3], True), L("y", [2, 3], True)], ["x.copy()", "y"]),
    C("bad_shape_nograd", [L("x", [3]), L("y", [2, 3])], ["x", "y"]),
]))

add(case("xtra_no_grad_mutation_of_leaf_view_arg", """
def f(a, b):
    with torch.no_grad():
        a.mul_(2)
    return (a * b).sum(), a
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    no_grad! {
        a.mul_(2.0);
    }
    ((a * b).sum(), a)
}
""", [
    C("leaf_view_grad", [L("x", [2, 2], True), L("y", [4], True)], ["x.view([4])", "y"]),
    C("leaf_grad", [L("x", [4], True), L("y", [4], True)], ["x", "y"]),
    C("leaf_row_grad", [L("x", [2, 4], True), L("y", [4])], ["x.select(0,1)", "y"]),
    C("nograd", [L("x", [4]), L("y", [4])], ["x", "y"]),
]))

add(case("xtra_output_views_of_input_after_no_grad_mutation", """
def f(a, b):
    with torch.no_grad():
        a.add_(1)
    return a.view(-1), a.t(), a * b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    no_grad! {
        a.add_(1.0);
    }
    (a.view(&[-1]), a.t(), a * b)
}
""", std([("x", [2, 2]), ("y", [2, 2])], mutated=(0,), leaf_grad=True)))

add(case("xtra_diagonal_writes_input_and_intermediate", """
def f(a):
    t = a.clone()
    t.diagonal().mul_(0)
    a.diagonal().add_(1)
    return t, a.diagonal()
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    let t = a.copy();
    t.diagonal().mul_(0.0);
    a.diagonal().add_(1.0);
    (t, a.diagonal())
}
""", std([("x", [3, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_strided_slice_outputs", """
def f(a):
    return a[:, 0:3:2], a[1:2], (a * 2)[:, 1:3]
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a.slice(1, 0, 3, 2), a.slice(0, 1, 2, 1), (a * 2.0).slice(1, 1, 3, 1))
}
""", std([("x", [2, 3])], mutated=(0,), leaf_grad=True)))

add(case("xtra_negative_dims_mutation", """
def f(a):
    a.select(-1, -1).mul_(3)
    return a.narrow(-1, 0, 2), a.sum(dim=[-1], keepdim=True)
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    a.select(-1, -1).mul_(3.0);
    (a.narrow(-1, 0, 2), a.sum_dim(&[-1], true))
}
""", std([("x", [2, 3])], mutated=(0,))))

add(case("xtra_mutation_through_as_strided_view", """
def f(a):
    a.as_strided([2], [3], 0).mul_(2)
    return a + 0
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.as_strided(&[2], &[3], 0).mul_(2.0);
    a + 0.0
}
""", std([("x", [2, 3])], mutated=(0,)) + [
    C("offset_view_grad", [L("x", [3, 3], True)], ["p.narrow(0,1,2)"], lets=[["p", "x.copy()"]],
      note="as_strided's offset is absolute: on a view at storage offset 3 it writes p[0,0] and a[0,0]; "
           "PyTorch's compiled training result treats it as relative to the view; eager is right"),
    C("offset_view_nograd", [L("x", [3, 3])], ["x.narrow(0,1,2)"]),
]))

add(case("xtra_dupe_mutated_and_viewed", """
def f(a, b):
    a.mul_(2)
    return b.view(-1), b.t()
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.mul_(2.0);
    (b.view(&[-1]), b.t())
}
""", std([("x", [2, 3]), ("y", [2, 3])], mutated=(0,)) + [
    C("dupe_grad", [L("x", [2, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("dupe_nograd", [L("x", [2, 3])], ["x", "x"]),
    C("alias_grad", [L("x", [2, 3], True)], ["p.view([2,3])", "p"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra_expand_intermediate_outputs", """
def f(a):
    t = a.sum(dim=[0], keepdim=True)
    return t.expand(3, 2), t
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let t = a.sum_dim(&[0], true);
    (t.expand(&[3, 2]), t)
}
""", std([("x", [2, 2])], leaf_grad=True, grad=False)))


# ===========================================================================
# Second batch: the rest of test_aotdispatch.py (and of dynamo's
# test_aot_autograd.py) that the DSL expresses, then requires_grad patterns
# (leaf that requires grad passed directly, a non-leaf copy, nothing requiring
# grad, duplicates and aliased views of one base) and realistic training
# steps.
# ===========================================================================

LEAF_VIEW_INPLACE = "eager PyTorch refuses an in-place op on a view of a leaf that requires grad"
LEAF_INPLACE = "eager PyTorch refuses an in-place op on a leaf that requires grad"
NONDIFF_VIEW = ("PyTorch's AOTAutograd refuses: a mutated input shares storage with another input without being "
                "a differentiable view of it (detach()); eager runs")
ZERO_GRAD = ("PyTorch's compiled backward gives zeros to a leaf that eager leaves without a gradient "
             "(its only use was mutated in place or never reaches the loss); eager is right")
NO_GRAD_VIEWS = ("PyTorch's compiled result lets gradients flow through outputs that are views made under no_grad; "
                 "eager's views made under no_grad carry no history; eager is right")
NO_GRAD_T_LEAF = ("PyTorch's AOTAutograd fails in the backward: the leaf's transpose under no_grad changes the "
                  "gradient's shape; eager runs")

# ---------------------------------------------------------------------------
# TestAOTAutograd: plain functions
# ---------------------------------------------------------------------------

add(case("test_single_output", """
def f(a, b):
    return a + b
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    a + b
}
""", [
    C("a_leaf_grad", [L("x", [3, 3], True), L("y", [3, 3])], ["x", "y"]),
    C("b_grad", [L("x", [3, 3]), L("y", [3, 3], True)], ["x", "y.copy()"]),
    C("nograd", [L("x", [3, 3]), L("y", [3, 3])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [3, 3], True)], ["x", "x"]),
    C("alias_t_leaf_grad", [L("x", [3, 3], True)], ["x", "x.t()"]),
    C("alias_t_nograd", [L("x", [3, 3])], ["x.t()", "x"]),
]))

add(case("test_multi_output_list", """
def f(a, b):
    return [a + b, a - b]
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    (a + b, a - b)
}
""", [
    C("b_leaf_grad", [L("x", [3, 3]), L("y", [3, 3], True)], ["x", "y"]),
    C("grad", [L("x", [3, 3], True), L("y", [3, 3], True)], ["x.copy()", "y.copy()"]),
    C("nograd", [L("x", [3, 3]), L("y", [3, 3])], ["x", "y"]),
    C("rows_leaf_grad", [L("x", [2, 3], True)], ["x.select(0,0)", "x.select(0,1)"]),
    C("dupe_grad", [L("x", [3, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
]))

add(case("test_input_mutation_simple_with_none_and_nontensor", """
def f(a, c):
    return a * c
""", """
fn f(a: &Tensor, c: f64) -> Tensor {
    a * c
}
""", [
    C("leaf_grad", [L("x", [3, 3], True)], ["x", 3.0]),
    C("nograd", [L("x", [3, 3])], ["x", 3.0]),
    C("view_grad", [L("x", [3, 3], True)], ["x.t()", 3.0]),
]))

add(case("test_input_mutation_return", """
def f(a, b):
    b.copy_(torch.sin(a))
    return b
""", """
fn f(a: &Tensor, b: &mut Tensor) -> Tensor {
    b.copy_(a.sin());
    b
}
""", [
    C("nograd", [L("x", [3, 3]), L("y", [3, 3])], ["x", "y"]),
    C("a_leaf_grad", [L("x", [3, 3], True), L("y", [3, 3])], ["x", "y"]),
    C("grad", [L("x", [3, 3], True), L("y", [3, 3], True)], ["x", "y.copy()"]),
    C("b_leaf_grad", [L("x", [3, 3]), L("y", [3, 3], True)], ["x", "y"], note=LEAF_INPLACE),
    C("dupe_nograd", [L("x", [3, 3])], ["x", "x"]),
    C("b_row_view_a_grad", [L("x", [3]), L("y", [2, 3])], ["x", "y.select(0,1)"]),
    C("b_transposed_grad", [L("x", [3, 2], True), L("y", [2, 3], True)], ["x", "p.t()"], lets=[["p", "y.copy()"]]),
]))

add(case("test_input_mutation_hidden_from_autograd_aliasing", """
def f(a):
    a_alias = a.view(-1)
    with torch.no_grad():
        a_alias.mul_(2)
    return a + 1
""", """
fn f(a: &mut Tensor) -> Tensor {
    let a_alias = a.view(&[-1]);
    no_grad! {
        a_alias.mul_(2.0);
    }
    a + 1.0
}
""", [
    C("leaf_grad", [L("x", [4], True)], ["x"]),
    C("grad", [L("x", [4], True)], ["x.copy()"]),
    C("nograd", [L("x", [4])], ["x"]),
    C("matrix_leaf_grad", [L("x", [2, 2], True)], ["x"]),
    C("row_view_grad", [L("x", [2, 4], True)], ["p.select(0,1)"], lets=[["p", "x.copy()"]]),
    C("leaf_row_view_grad", [L("x", [2, 4], True)], ["x.select(0,1)"]),
    C("leaf_transposed_grad", [L("x", [2, 2], True)], ["x.t()"],
      note="view(-1) of a transposed input is refused (not contiguous)"),
]))

add(case("test_composite_impl_compile", """
def f(a, w, b):
    return torch.nn.functional.linear(a, w, b)
""", """
fn f(a: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    a.matmul(w.t()) + b
}
""", [
    C("all_leaf_grad", [L("a", [3, 3], True), L("w", [3, 3], True), L("b", [3], True)], ["a", "w", "b"]),
    C("params_grad", [L("a", [3, 3]), L("w", [3, 3], True), L("b", [3], True)], ["a", "w", "b"]),
    C("nograd", [L("a", [3, 3]), L("w", [3, 3]), L("b", [3])], ["a", "w", "b"]),
    C("input_dupe_weight_grad", [L("w", [3, 3], True), L("b", [3], True)], ["w", "w", "b"]),
]))

add(case("test_subclass_metadata_mutation", """
def f(a):
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.transpose(1, 0)
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.transpose_(1, 0);
    let tmp = a.mul(2.0);
    tmp.transpose(1, 0)
}
""", [
    C("grad", [L("x", [1, 2, 4], True)], ["x.copy()"]),
    C("nograd", [L("x", [1, 2, 4])], ["x"]),
    C("leaf_grad", [L("x", [1, 2, 4], True)], ["x"], note="eager PyTorch refuses transpose_ on a leaf that requires grad"),
    C("view_grad", [L("x", [2, 4], True)], ["p.unsqueeze(0)"], lets=[["p", "x.copy()"]]),
]))

add(case("test_synthetic_base_base_attribute_is_none", """
def f(a, b):
    a.add_(1)
    return a + b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(1.0);
    a + b
}
""", [
    C("detached_rows_nograd", [L("x", [4, 4])], ["x.select(0,0).detach()", "x.select(0,1).detach()"]),
    C("detached_rows_of_grad_leaf", [L("x", [4, 4], True)], ["x.select(0,0).detach()", "x.select(0,1).detach()"]),
    C("detached_same_row_nograd", [L("x", [4, 4])], ["x.select(0,2).detach()", "x.select(0,2).detach()"]),
    C("detached_same_row_of_grad_leaf", [L("x", [4, 4], True)], ["x.select(0,2).detach()", "x.select(0,2).detach()"]),
    C("rows_grad", [L("x", [4, 4], True)], ["p.select(0,0)", "p.select(0,1)"], lets=[["p", "x.copy()"]]),
]))

add(case("test_mem_leak_from_save_for_bw", """
def f(a, b):
    add = a + a
    getitem_2 = add.narrow(1, 2, 2)
    unsqueeze = getitem_2.unsqueeze(-1)
    mul = unsqueeze * b
    return getitem_2, mul
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let add = a + a;
    let getitem_2 = add.narrow(1, 2, 2);
    let unsqueeze = getitem_2.unsqueeze(-1);
    let mul = unsqueeze * b;
    (getitem_2, mul)
}
""", [
    C("leaf_grad", [L("a", [2, 4], True), L("b", [1, 2, 1], True)], ["a", "b"]),
    C("a_grad", [L("a", [2, 4], True), L("b", [1, 2, 1])], ["a.copy()", "b"]),
    C("b_grad", [L("a", [2, 4]), L("b", [1, 2, 1], True)], ["a", "b"]),
    C("nograd", [L("a", [2, 4]), L("b", [1, 2, 1])], ["a", "b"]),
]))

add(case("test_output_dict", """
def f(x):
    return x, x
""", """
fn f(x: &Tensor) -> (Tensor, Tensor) {
    (x, x)
}
""", [
    C("leaf_grad", [L("x", [3, 3], True)], ["x"]),
    C("grad", [L("x", [3, 3], True)], ["x.copy()"]),
    C("nograd", [L("x", [3, 3])], ["x"]),
    C("view_leaf_grad", [L("x", [3, 3], True)], ["x.t()"]),
]))

add(case("test_output_dict_2", """
def f(x, y):
    return x, y + x
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    (x, y + x)
}
""", [
    C("x_leaf_grad", [L("x", [3], True), L("y", [3])], ["x", "y"]),
    C("y_grad", [L("x", [3]), L("y", [3], True)], ["x", "y.copy()"]),
    C("nograd", [L("x", [3]), L("y", [3])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [3], True)], ["x", "x"]),
    C("dupe_grad", [L("x", [3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
]))

add(case("test_module", """
def f(x, w, b):
    return torch.relu(torch.nn.functional.linear(x, w, b))
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    (x.matmul(w.t()) + b).relu()
}
""", [
    C("params_grad", [L("x", [4, 4]), L("w", [4, 4], True), L("b", [4], True)], ["x", "w", "b"]),
    C("all_leaf_grad", [L("x", [4, 4], True), L("w", [4, 4], True), L("b", [4], True)], ["x", "w", "b"]),
    C("nograd", [L("x", [4, 4]), L("w", [4, 4]), L("b", [4])], ["x", "w", "b"]),
    C("x_grad_transposed_w", [L("x", [4, 4], True), L("w", [4, 4]), L("b", [4])], ["x.copy()", "w.t()", "b"]),
]))

add(case("test_batchnorm", """
def f(x, w, b, running_mean, running_var, num_batches_tracked):
    mean = x.mean(dim=[0, 2, 3], keepdim=True)
    var = x.var(dim=[0, 2, 3], correction=0, keepdim=True)
    with torch.no_grad():
        num_batches_tracked.add_(1)
        running_mean.mul_(0.9).add_(mean.view(-1) * 0.1)
        running_var.mul_(0.9).add_(x.var(dim=[0, 2, 3], correction=1, keepdim=False) * 0.1)
    y = (x - mean) / (var + 1e-05).sqrt()
    return y * w.view(1, 4, 1, 1) + b.view(1, 4, 1, 1)
""", """
fn f(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    running_mean: &mut Tensor,
    running_var: &mut Tensor,
    num_batches_tracked: &mut Tensor,
) -> Tensor {
    let mean = x.mean_dim(&[0, 2, 3], true);
    let var = x.var_dim(&[0, 2, 3], 0, true);
    no_grad! {
        num_batches_tracked.add_(1.0);
        running_mean.mul_(0.9).add_(mean.view(&[-1]) * 0.1);
        running_var.mul_(0.9).add_(x.var_dim(&[0, 2, 3], 1, false) * 0.1);
    }
    let y = (x - mean) / (var + 1e-05).sqrt();
    y * w.view(&[1, 4, 1, 1]) + b.view(&[1, 4, 1, 1])
}
""", [
    C("params_grad", [L("x", [1, 4, 2, 2]), L("w", [4], True), L("b", [4], True), L("rm", [4]), L("rv", [4]), L("n", [1])],
      ["x", "w", "b", "rm", "rv", "n"]),
    C("all_grad", [L("x", [1, 4, 2, 2], True), L("w", [4], True), L("b", [4], True), L("rm", [4]), L("rv", [4]), L("n", [1])],
      ["x.copy()", "w", "b", "rm", "rv", "n"]),
    C("nograd", [L("x", [1, 4, 2, 2]), L("w", [4]), L("b", [4]), L("rm", [4]), L("rv", [4]), L("n", [1])],
      ["x", "w", "b", "rm", "rv", "n"]),
    C("stats_views_of_one_buffer", [L("x", [1, 4, 2, 2], True), L("w", [4], True), L("b", [4], True), L("buf", [9])],
      ["x", "w", "b", "buf.narrow(0,0,4)", "buf.narrow(0,4,4)", "buf.narrow(0,8,1)"]),
]))

add(case("test_list_codegen", """
def f(a, b, c):
    return a.sin() * b.cos() * c.sin()
""", """
fn f(a: &Tensor, b: &Tensor, c: &Tensor) -> Tensor {
    a.sin() * b.cos() * c.sin()
}
""", [
    C("leaf_grad", [L("a", [5], True), L("b", [5], True), L("c", [5], True)], ["a", "b", "c"]),
    C("b_grad", [L("a", [5]), L("b", [5], True), L("c", [5])], ["a", "b.copy()", "c"]),
    C("nograd", [L("a", [5]), L("b", [5]), L("c", [5])], ["a", "b", "c"]),
    C("dupe_ac_leaf_grad", [L("a", [5], True), L("b", [5])], ["a", "b", "a"]),
]))

add(case("test_compilation_context", """
def f(x):
    return x.sin().sin()
""", """
fn f(x: &Tensor) -> Tensor {
    x.sin().sin()
}
""", [
    C("leaf_grad", [L("x", [5], True)], ["x"]),
    C("nograd", [L("x", [5])], ["x"]),
    C("strided_view_grad", [L("x", [10], True)], ["x.as_strided([5],[2],0)"]),
]))

add(case("test_invalid_requires_grad", """
def f(x, y):
    return x + y
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x + y
}
""", [
    C("xy_grad", [L("x", [3, 3], True), L("y", [3, 3], True)], ["x", "y"]),
    C("xz_grad", [L("x", [3, 3], True), L("z", [3, 3])], ["x", "z"]),
    C("zx_grad", [L("z", [3, 3]), L("x", [3, 3], True)], ["z", "x"]),
    C("nograd", [L("x", [3, 3]), L("z", [3, 3])], ["x", "z"]),
]))

add(case("test_output_op_depending_on_symint", """
def f(x):
    return x.expand(5)
""", """
fn f(x: &Tensor) -> Tensor {
    x.expand(&[5])
}
""", [
    C("leaf_grad", [L("x", [5], True)], ["x"]),
    C("grad", [L("x", [5], True)], ["x.copy()"]),
    C("nograd", [L("x", [5])], ["x"]),
    C("broadcast_leaf_grad", [L("x", [1], True)], ["x"]),
]))

add(case("test_inference_mode", """
def f(x, w, b):
    return torch.nn.functional.linear(x, w, b)
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    x.matmul(w.t()) + b
}
""", [
    C("nograd", [L("x", [4, 4]), L("w", [4, 4]), L("b", [4])], ["x", "w", "b"]),
    C("w_detached_of_grad_leaf", [L("x", [4, 4]), L("w", [4, 4], True), L("b", [4])], ["x", "w.detach()", "b"]),
]))

add(case("test_buffer_batch_norm", """
def f(x, w, b, running_mean, running_var, num_batches_tracked):
    mean = x.mean(dim=[0], keepdim=False)
    var = x.var(dim=[0], correction=0, keepdim=False)
    with torch.no_grad():
        num_batches_tracked.add_(1)
        running_mean.copy_(running_mean * 0.9 + mean * 0.1)
        running_var.copy_(running_var * 0.9 + x.var(dim=[0], correction=1, keepdim=False) * 0.1)
    return (x - mean) / (var + 1e-05).sqrt() * w + b
""", """
fn f(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    running_mean: &mut Tensor,
    running_var: &mut Tensor,
    num_batches_tracked: &mut Tensor,
) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        num_batches_tracked.add_(1.0);
        running_mean.copy_(running_mean * 0.9 + mean * 0.1);
        running_var.copy_(running_var * 0.9 + x.var_dim(&[0], 1, false) * 0.1);
    }
    (x - mean) / (var + 1e-05).sqrt() * w + b
}
""", [
    C("train", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3]), L("n", [1])],
      ["x.copy()", "w", "b", "rm", "rv", "n"]),
    C("train_x_leaf", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3]), L("n", [1])],
      ["x", "w", "b", "rm", "rv", "n"]),
    C("nograd", [L("x", [4, 3]), L("w", [3]), L("b", [3]), L("rm", [3]), L("rv", [3]), L("n", [1])],
      ["x", "w", "b", "rm", "rv", "n"]),
    C("stats_rows_of_one_buffer", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("buf", [2, 3]), L("n", [1])],
      ["x", "w", "b", "buf.select(0,0)", "buf.select(0,1)", "n"]),
]))

add(case("test_input_mutation_batchnorm", """
def f(inpt, weight, bias, running_mean, running_var):
    mean = inpt.mean(dim=[0, 2, 3], keepdim=True)
    var = inpt.var(dim=[0, 2, 3], correction=0, keepdim=True)
    rstd = (var + 1e-05).rsqrt()
    out = (inpt - mean) * rstd * weight.view(1, 3, 1, 1) + bias.view(1, 3, 1, 1)
    running_mean.mul_(0.5).add_(mean.detach().view(-1) * 0.5)
    running_var.mul_(0.5).add_(inpt.detach().var(dim=[0, 2, 3], correction=1, keepdim=False) * 0.5)
    return out, mean.view(-1), rstd.view(-1)
""", """
fn f(
    inpt: &Tensor,
    weight: &Tensor,
    bias: &Tensor,
    running_mean: &mut Tensor,
    running_var: &mut Tensor,
) -> (Tensor, Tensor, Tensor) {
    let mean = inpt.mean_dim(&[0, 2, 3], true);
    let var = inpt.var_dim(&[0, 2, 3], 0, true);
    let rstd = (var + 1e-05).rsqrt();
    let out = (inpt - mean) * rstd * weight.view(&[1, 3, 1, 1]) + bias.view(&[1, 3, 1, 1]);
    running_mean.mul_(0.5).add_(mean.detach().view(&[-1]) * 0.5);
    running_var.mul_(0.5).add_(inpt.detach().var_dim(&[0, 2, 3], 1, false) * 0.5);
    (out, mean.view(&[-1]), rstd.view(&[-1]))
}
""", [
    C("grad", [L("x", [2, 3, 2, 2], True), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3])],
      ["x.copy()", "w", "b", "rm", "rv"]),
    C("nograd", [L("x", [2, 3, 2, 2]), L("w", [3]), L("b", [3]), L("rm", [3]), L("rv", [3])], ["x", "w", "b", "rm", "rv"]),
    C("x_leaf_grad", [L("x", [2, 3, 2, 2], True), L("w", [3]), L("b", [3]), L("rm", [3]), L("rv", [3])], ["x", "w", "b", "rm", "rv"]),
    C("stats_grad_copies", [L("x", [2, 3, 2, 2], True), L("w", [3], True), L("b", [3], True), L("rm", [3], True), L("rv", [3], True)],
      ["x", "w", "b", "rm.copy()", "rv.copy()"], note=ZERO_GRAD),
]))

add(case("test_batchnorm_inference", """
def f(x, w, b, running_mean, running_var):
    return (x - running_mean.view(1, 4, 1, 1)) / (running_var.view(1, 4, 1, 1).abs() + 1e-05).sqrt() * w.view(1, 4, 1, 1) + b.view(1, 4, 1, 1)
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor, running_mean: &Tensor, running_var: &Tensor) -> Tensor {
    (x - running_mean.view(&[1, 4, 1, 1])) / (running_var.view(&[1, 4, 1, 1]).abs() + 1e-05).sqrt() * w.view(&[1, 4, 1, 1])
        + b.view(&[1, 4, 1, 1])
}
""", [
    C("nograd", [L("x", [1, 4, 2, 2]), L("w", [4]), L("b", [4]), L("rm", [4]), L("rv", [4])], ["x", "w", "b", "rm", "rv"]),
    C("params_grad", [L("x", [1, 4, 2, 2]), L("w", [4], True), L("b", [4], True), L("rm", [4]), L("rv", [4])], ["x", "w", "b", "rm", "rv"]),
]))

add(case("test_inputs_overlapping_with_mutation_recompile", """
def f(a, b, c):
    for t in (a, b, c):
        t.add_(1)
    return a
""", """
fn f(a: &mut Tensor, b: &mut Tensor, c: &mut Tensor) -> Tensor {
    a.add_(1.0);
    b.add_(1.0);
    c.add_(1.0);
    a
}
""", [
    C("overlapping_nograd", [L("x", [20])], ["x.narrow(0,0,5)", "x.narrow(0,7,6)", "x.narrow(0,9,11)"]),
    C("non_overlapping_nograd", [L("x", [20])], ["x.narrow(0,0,5)", "x.narrow(0,7,6)", "x.narrow(0,13,2)"]),
    C("overlapping_grad", [L("x", [20], True)], ["p.narrow(0,0,5)", "p.narrow(0,7,6)", "p.narrow(0,9,11)"],
      lets=[["p", "x.copy()"]], note=ALIAS_ASSERT),
    C("non_overlapping_grad", [L("x", [20], True)], ["p.narrow(0,0,5)", "p.narrow(0,7,6)", "p.narrow(0,13,2)"],
      lets=[["p", "x.copy()"]]),
    C("leaf_views_grad", [L("x", [20], True)], ["x.narrow(0,0,5)", "x.narrow(0,7,6)", "x.narrow(0,13,2)"],
      note=LEAF_VIEW_INPLACE),
]))

add(case("test_different_inputs_overlapping_set_with_mutation", """
def f(a, b, c, d):
    a.mul_(2)
    return a + b + c + d
""", """
fn f(a: &mut Tensor, b: &Tensor, c: &Tensor, d: &Tensor) -> Tensor {
    a.mul_(2.0);
    a + b + c + d
}
""", [
    C("a_b_overlapping_nograd", [L("x", [20])], ["x.narrow(0,0,5)", "x.narrow(0,4,5)", "x.narrow(0,10,5)", "x.narrow(0,15,5)"]),
    C("a_b_c_overlapping_nograd", [L("x", [20])], ["x.narrow(0,0,5)", "x.narrow(0,4,5)", "x.narrow(0,8,5)", "x.narrow(0,15,5)"]),
    C("a_b_overlapping_grad", [L("x", [20], True)], ["p.narrow(0,0,5)", "p.narrow(0,4,5)", "p.narrow(0,10,5)", "p.narrow(0,15,5)"],
      lets=[["p", "x.copy()"]]),
    C("a_b_c_overlapping_grad", [L("x", [20], True)], ["p.narrow(0,0,5)", "p.narrow(0,4,5)", "p.narrow(0,8,5)", "p.narrow(0,15,5)"],
      lets=[["p", "x.copy()"]]),
    C("disjoint_grad", [L("x", [20], True)], ["p.narrow(0,0,5)", "p.narrow(0,5,5)", "p.narrow(0,10,5)", "p.narrow(0,15,5)"],
      lets=[["p", "x.copy()"]]),
]))

add(case("test_no_storage_overlap_guards_no_mutation", """
def f(a, b):
    return a + b
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    a + b
}
""", [
    C("overlapping_nograd", [L("x", [20])], ["x.narrow(0,0,10)", "x.narrow(0,5,10)"]),
    C("overlapping_leaf_grad", [L("x", [20], True)], ["x.narrow(0,0,10)", "x.narrow(0,5,10)"]),
    C("overlapping_grad", [L("x", [20], True)], ["p.narrow(0,0,10)", "p.narrow(0,5,10)"], lets=[["p", "x.copy()"]]),
]))

add(case("test_no_storage_overlap_guards_no_aliasing", """
def f(a, b):
    a.add_(1)
    b.add_(1)
    return a
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.add_(1.0);
    b.add_(1.0);
    a
}
""", [
    C("nograd", [L("x", [20]), L("y", [20])], ["x.narrow(0,0,10)", "y.narrow(0,5,10)"]),
    C("grad", [L("x", [20], True), L("y", [20], True)], ["p.narrow(0,0,10)", "q.narrow(0,5,10)"],
      lets=[["p", "x.copy()"], ["q", "y.copy()"]], note=ZERO_GRAD),
    C("a_grad", [L("x", [20], True), L("y", [20])], ["p.narrow(0,0,10)", "y.narrow(0,5,10)"], lets=[["p", "x.copy()"]]),
]))

add(case("test_inputs_overlapping_with_mutation_stress", """
def f(a, b, c, d, e):
    for t in (a, b, c, d, e):
        t.add_(1)
    return a
""", """
fn f(a: &mut Tensor, b: &mut Tensor, c: &mut Tensor, d: &mut Tensor, e: &mut Tensor) -> Tensor {
    a.add_(1.0);
    b.add_(1.0);
    c.add_(1.0);
    d.add_(1.0);
    e.add_(1.0);
    a
}
""", [
    C("nograd", [L("x", [20])], ["x.narrow(0,0,5)", "x.narrow(0,5,5)", "x.narrow(0,10,5)", "x.narrow(0,15,5)", "x.narrow(0,2,10)"]),
    C("grad", [L("x", [20], True)], ["p.narrow(0,0,5)", "p.narrow(0,5,5)", "p.narrow(0,10,5)", "p.narrow(0,15,5)", "p.narrow(0,2,10)"],
      lets=[["p", "x.copy()"]], note=ALIAS_ASSERT),
]))

add(case("test_donated_buffer5", """
def f(x, z):
    y = x.view(2, 3)
    z = torch.nn.functional.relu(z)
    return torch.mm(y, x) + z
""", """
fn f(x: &Tensor, z: &Tensor) -> Tensor {
    let y = x.view(&[2, 3]);
    let z = z.relu();
    y.mm(x) + z
}
""", [
    C("leaf_grad", [L("x", [3, 2], True), L("z", [2, 2], True)], ["x", "z"]),
    C("x_grad", [L("x", [3, 2], True), L("z", [2, 2])], ["x.copy()", "z"]),
    C("nograd", [L("x", [3, 2]), L("z", [2, 2])], ["x", "z"]),
    C("z_view_of_x_grad", [L("x", [3, 2], True)], ["p", "p.narrow(0,0,2)"], lets=[["p", "x.copy()"]]),
]))

add(case("test_donated_buffer_with_retain_or_create_graph1", """
def f(x, param):
    return torch.nn.functional.relu(x) + param
""", """
fn f(x: &Tensor, param: &Tensor) -> Tensor {
    x.relu() + param
}
""", [
    C("leaf_grad", [L("x", [3, 3], True), L("p", [3, 3], True)], ["x", "p"]),
    C("param_grad", [L("x", [3, 3]), L("p", [3, 3], True)], ["x", "p"]),
    C("nograd", [L("x", [3, 3]), L("p", [3, 3])], ["x", "p"]),
    C("dupe_leaf_grad", [L("x", [3, 3], True)], ["x", "x"]),
]))

# ---------------------------------------------------------------------------
# TestAOTDispatch (the subclass tests, with plain tensors)
# ---------------------------------------------------------------------------

add(case("test_aot_dispatch_simple", """
def f(a, b):
    aa = torch.mul(a, 6)
    bb = torch.div(b, 2)
    return aa + bb
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    let aa = a * 6.0;
    let bb = b / 2.0;
    aa + bb
}
""", [
    C("leaf_grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a", "b"]),
    C("grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a.copy()", "b.copy()"]),
    C("dupe_leaf_grad", [L("a", [3, 3], True)], ["a", "a"]),
]))

add(case("test_aot_dispatch_inference", """
def f(a, b):
    aa = torch.mul(a, 6)
    bb = torch.div(b, 2)
    return aa + bb
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    let aa = a * 6.0;
    let bb = b / 2.0;
    aa + bb
}
""", [
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
    C("dupe_nograd", [L("a", [3, 3])], ["a", "a"]),
    C("alias_nograd", [L("a", [3, 3])], ["a", "a.t()"]),
]))

add(case("test_aot_dispatch_incorrect_backward", """
def f(a, b):
    aa = torch.mul(a, 2)
    bb = torch.add(b, 3)
    out_subclass = torch.div(aa, bb)
    out_reg = torch.add(b, b)
    return out_subclass, out_reg
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    let aa = a * 2.0;
    let bb = b + 3.0;
    let out_subclass = aa / bb;
    let out_reg = b + b;
    (out_subclass, out_reg)
}
""", [
    C("leaf_grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a", "b"]),
    C("a_grad", [L("a", [3, 3], True), L("b", [3, 3])], ["a", "b"]),
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
]))

add(case("test_aot_dispatch_output_alias", """
def f(a, b):
    return b.view(3, 3), a * b
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    (b.view(&[3, 3]), a * b)
}
""", [
    C("leaf_grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a", "b"]),
    C("b_grad", [L("a", [3, 3]), L("b", [3, 3], True)], ["a", "b.copy()"]),
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
    C("dupe_leaf_grad", [L("a", [3, 3], True)], ["a", "a"]),
    C("b_view_arg_grad", [L("a", [3, 3]), L("b", [9], True)], ["a", "b.view([3,3])"]),
]))

add(case("test_aot_dispatch_input_mutation", """
def f(a, b):
    a.mul_(2)
    b.mul_(3)
    return a + b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.mul_(2.0);
    b.mul_(3.0);
    a + b
}
""", [
    C("grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a.copy()", "b.copy()"]),
    C("a_grad", [L("a", [3, 3], True), L("b", [3, 3])], ["a.copy()", "b"]),
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
    C("dupe_grad", [L("a", [3, 3], True)], ["p", "p"], lets=[["p", "a.copy()"]]),
    C("dupe_nograd", [L("a", [3, 3])], ["a", "a"]),
    C("alias_t_grad", [L("a", [3, 3], True)], ["p", "p.t()"], lets=[["p", "a.copy()"]], note=ALIAS_ASSERT),
    C("alias_diag_row_nograd", [L("a", [3, 3])], ["a.diagonal()", "a.select(0,1)"]),
    C("leaf_grad", [L("a", [3, 3], True), L("b", [3, 3])], ["a", "b"], note=LEAF_INPLACE),
]))

add(case("test_aot_dispatch_input_metadata_mutation", """
def f(a, b):
    a.t_()
    b.unsqueeze_(0)
    return a + b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.t_();
    b.unsqueeze_(0);
    a + b
}
""", [
    C("grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a.copy()", "b.copy()"]),
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
    C("a_grad_b_plain", [L("a", [3, 3], True), L("b", [3, 3])], ["a.copy()", "b"]),
    C("dupe_nograd", [L("a", [3, 3])], ["a", "a"]),
    C("dupe_grad", [L("a", [3, 3], True)], ["p", "p"], lets=[["p", "a.copy()"]]),
    C("alias_views_grad", [L("a", [3, 3], True)], ["p.t()", "p.view([3,3])"], lets=[["p", "a.copy()"]]),
]))

add(case("test_aot_dispatch_input_data_and_metadata_mutation", """
def f(a, b):
    a.t_()
    b.unsqueeze_(0)
    a.mul_(2)
    b.mul_(3)
    return a + b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> Tensor {
    a.t_();
    b.unsqueeze_(0);
    a.mul_(2.0);
    b.mul_(3.0);
    a + b
}
""", [
    C("grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a.copy()", "b.copy()"]),
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
    C("b_grad", [L("a", [3, 3]), L("b", [3, 3], True)], ["a", "b.copy()"]),
    C("dupe_nograd", [L("a", [3, 3])], ["a", "a"]),
    C("dupe_grad", [L("a", [3, 3], True)], ["p", "p"], lets=[["p", "a.copy()"]]),
    C("alias_views_nograd", [L("a", [3, 3])], ["a.t()", "a.view([3,3])"]),
]))

add(case("test_aot_dispatch_input_mutation_and_output_alias", """
def f(a, b):
    a.mul_(2)
    b.mul_(3)
    return b.view(3, 3), a + b
""", """
fn f(a: &mut Tensor, b: &mut Tensor) -> (Tensor, Tensor) {
    a.mul_(2.0);
    b.mul_(3.0);
    (b.view(&[3, 3]), a + b)
}
""", [
    C("grad", [L("a", [3, 3], True), L("b", [3, 3], True)], ["a.copy()", "b.copy()"]),
    C("nograd", [L("a", [3, 3]), L("b", [3, 3])], ["a", "b"]),
    C("b_grad_only", [L("a", [3, 3]), L("b", [3, 3], True)], ["a", "b.copy()"]),
    C("dupe_grad", [L("a", [3, 3], True)], ["p", "p"], lets=[["p", "a.copy()"]]),
    C("alias_rows_grad", [L("a", [6, 3], True)], ["p.narrow(0,0,3)", "p.narrow(0,3,3)"], lets=[["p", "a.copy()"]]),
]))

# ---------------------------------------------------------------------------
# TestAOTExport / TestPartitioning / TestAOTModuleSimplified functions
# ---------------------------------------------------------------------------

add(case("test_aot_export_simplified_basic", """
def f(x, y):
    return x * y, y * y.detach()
""", """
fn f(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    (x * y, y * y.detach())
}
""", [
    C("leaf_grad", [L("x", [2], True), L("y", [2], True)], ["x", "y"]),
    C("y_grad", [L("x", [2]), L("y", [2], True)], ["x", "y.copy()"]),
    C("nograd", [L("x", [2]), L("y", [2])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [2], True)], ["x", "x"]),
]))

add(case("test_aot_export_forward_mutation_no_buffer_mut", """
def f(buffer1, x):
    x.add_(4)
    return x.cos().sum() + buffer1.sum()
""", """
fn f(buffer1: &Tensor, x: &mut Tensor) -> Tensor {
    x.add_(4.0);
    x.cos().sum() + buffer1.sum()
}
""", [
    C("nograd", [L("buf", [6, 4]), L("x", [6, 4])], ["buf", "x"]),
    C("x_grad", [L("buf", [6, 4]), L("x", [6, 4], True)], ["buf", "x.copy()"]),
    C("x_leaf_grad", [L("buf", [6, 4]), L("x", [6, 4], True)], ["buf", "x"], note=LEAF_INPLACE),
    C("dupe_nograd", [L("x", [6, 4])], ["x", "x"]),
]))

add(case("test_aot_export_forward_mutation_multiple_mut", """
def f(buffer1, x, y):
    y.add_(4)
    buffer1.add_(5)
    return x.cos().sum() + y.sin().sum(), buffer1.sum()
""", """
fn f(buffer1: &mut Tensor, x: &Tensor, y: &mut Tensor) -> (Tensor, Tensor) {
    y.add_(4.0);
    buffer1.add_(5.0);
    (x.cos().sum() + y.sin().sum(), buffer1.sum())
}
""", [
    C("nograd", [L("buf", [6, 4]), L("x", [6, 4]), L("y", [6, 4])], ["buf", "x", "y"]),
    C("xy_grad", [L("buf", [6, 4]), L("x", [6, 4], True), L("y", [6, 4], True)], ["buf", "x", "y.copy()"]),
    C("dupe_buf_y_nograd", [L("buf", [6, 4]), L("x", [6, 4])], ["buf", "x", "buf"]),
    C("dupe_buf_y_grad", [L("buf", [6, 4], True), L("x", [6, 4])], ["p", "x", "p"], lets=[["p", "buf.copy()"]]),
]))

add(case("test_aot_export_input_mutation_on_parameter_banned", """
def f(p, x):
    p.mul_(2)
    return p + x
""", """
fn f(p: &mut Tensor, x: &Tensor) -> Tensor {
    p.mul_(2.0);
    p + x
}
""", [
    C("param_leaf_grad", [L("p", [2], True), L("x", [2])], ["p", "x"], note=LEAF_INPLACE),
    C("param_grad", [L("p", [2], True), L("x", [2])], ["p.copy()", "x"]),
    C("nograd", [L("p", [2]), L("x", [2])], ["p", "x"]),
]))

add(case("test_aot_export_synthetic_bases_banned", """
def f(p, x, y):
    x.mul_(2)
    return x + y
""", """
fn f(p: &Tensor, x: &mut Tensor, y: &Tensor) -> Tensor {
    x.mul_(2.0);
    x + y
}
""", [
    C("alias_nograd", [L("p", [2], True), L("x", [2])], ["p", "x", "x.view([-1])"]),
    C("alias_grad", [L("p", [2], True), L("x", [2], True)], ["p", "q", "q.view([-1])"], lets=[["q", "x.copy()"]]),
    C("no_alias_grad", [L("p", [2], True), L("x", [2], True), L("y", [2])], ["p", "x.copy()", "y"]),
]))

add(case("test_aot_export_input_dupes_banned", """
def f(p, x, y):
    x.mul_(2)
    return x + y
""", """
fn f(p: &Tensor, x: &mut Tensor, y: &Tensor) -> Tensor {
    x.mul_(2.0);
    x + y
}
""", [
    C("dupe_nograd", [L("p", [2], True), L("x", [2])], ["p", "x", "x"]),
    C("dupe_grad", [L("p", [2], True), L("x", [2], True)], ["p", "q", "q"], lets=[["q", "x.copy()"]]),
    C("dupe_leaf_grad", [L("p", [2], True), L("x", [2], True)], ["p", "x", "x"], note=LEAF_INPLACE),
]))

add(case("test_aot_export_multiple_outputs_require_grad_banned", """
def f(p, x):
    out = p * x
    return out, out.sum()
""", """
fn f(p: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    let out = p * x;
    (out, out.sum())
}
""", [
    C("param_grad", [L("p", [2], True), L("x", [2])], ["p", "x"]),
    C("nograd", [L("p", [2]), L("x", [2])], ["p", "x"]),
    C("dupe_leaf_grad", [L("p", [2], True)], ["p", "p"]),
]))

add(case("test_aot_export_predispatch_func_composite_implicit", """
def f(p, x):
    y = x @ x
    y.add_(2)
    return x.sum() + y.sum()
""", """
fn f(p: &Tensor, x: &Tensor) -> Tensor {
    let y = x.matmul(x);
    y.add_(2.0);
    x.sum() + y.sum()
}
""", [
    C("x_grad", [L("p", [2], True), L("x", [2, 2], True)], ["p", "x"]),
    C("nograd", [L("p", [2]), L("x", [2, 2])], ["p", "x"]),
    C("x_transposed_grad", [L("p", [2]), L("x", [2, 2], True)], ["p", "x.t()"]),
]))

add(case("test_aot_export_predispatch_buffer_mutation_metadata", """
def f(foo, x):
    foo.add_(4)
    return x.sum() + foo.sum()
""", """
fn f(foo: &mut Tensor, x: &Tensor) -> Tensor {
    foo.add_(4.0);
    x.sum() + foo.sum()
}
""", [
    C("nograd", [L("foo", [2, 2]), L("x", [2, 2])], ["foo", "x"]),
    C("x_grad", [L("foo", [2, 2]), L("x", [2, 2], True)], ["foo", "x"]),
    C("foo_row_view", [L("foo", [3, 2]), L("x", [2, 2], True)], ["foo.narrow(0,1,2)", "x"]),
    C("dupe_nograd", [L("x", [2, 2])], ["x", "x"]),
]))

add(case("test_aot_export_predispatch_reshape", """
def f(x):
    y = x.reshape(4, 4)
    return y.sum()
""", """
fn f(x: &Tensor) -> Tensor {
    let y = x.reshape(&[4, 4]);
    y.sum()
}
""", [
    C("leaf_grad", [L("x", [2, 8], True)], ["x"]),
    C("nograd", [L("x", [2, 8])], ["x"]),
    C("transposed_leaf_grad", [L("x", [8, 2], True)], ["x.t()"]),
]))

add(case("test_aot_export_predispatch_contiguous", """
def f(x):
    y = x.contiguous()
    return y.sum()
""", """
fn f(x: &Tensor) -> Tensor {
    let y = x.contiguous();
    y.sum()
}
""", [
    C("leaf_grad", [L("x", [2, 8], True)], ["x"]),
    C("nograd", [L("x", [2, 8])], ["x"]),
    C("transposed_grad", [L("x", [8, 2], True)], ["p.t()"], lets=[["p", "x.copy()"]]),
]))

add(case("test_contiguous", """
def f(x):
    return x.view(2, 3).t()
""", """
fn f(x: &Tensor) -> Tensor {
    x.view(&[2, 3]).t()
}
""", [
    C("leaf_grad", [L("x", [6], True)], ["x"]),
    C("grad", [L("x", [6], True)], ["x.copy()"]),
    C("nograd", [L("x", [6])], ["x"]),
    C("row_view_grad", [L("x", [2, 6], True)], ["x.select(0,1)"]),
]))

add(case("test_recompute_partitioning", """
def f(a, b):
    return torch.sin(torch.sin(a)) + b
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    a.sin().sin() + b
}
""", [
    C("leaf_grad", [L("a", [4, 4], True), L("b", [4, 4], True)], ["a", "b"]),
    C("a_grad", [L("a", [4, 4], True), L("b", [4, 4])], ["a", "b"]),
    C("nograd", [L("a", [4, 4]), L("b", [4, 4])], ["a", "b"]),
]))

add(case("test_min_cut_partitioner", """
def f(a, b, c, d):
    x = a + b + c + d
    return x.cos().cos()
""", """
fn f(a: &Tensor, b: &Tensor, c: &Tensor, d: &Tensor) -> Tensor {
    let x = a + b + c + d;
    x.cos().cos()
}
""", [
    C("leaf_grad", [L("a", [3], True), L("b", [3], True), L("c", [3], True), L("d", [3], True)], ["a", "b", "c", "d"]),
    C("nograd", [L("a", [3]), L("b", [3]), L("c", [3]), L("d", [3])], ["a", "b", "c", "d"]),
    C("all_dupe_leaf_grad", [L("a", [3], True)], ["a", "a", "a", "a"]),
]))

add(case("test_min_cut_partitioner_recomputable_ops", """
def f(x):
    return x * x * x
""", """
fn f(x: &Tensor) -> Tensor {
    x * x * x
}
""", [
    C("leaf_grad", [L("x", [3], True)], ["x"]),
    C("nograd", [L("x", [3])], ["x"]),
]))

add(case("test_min_cut_partitioner_save_shape", """
def f(x):
    return x.sum(dim=[1], keepdim=False)
""", """
fn f(x: &Tensor) -> Tensor {
    x.sum_dim(&[1], false)
}
""", [
    C("leaf_grad", [L("x", [4, 4], True)], ["x"]),
    C("nograd", [L("x", [4, 4])], ["x"]),
    C("transposed_leaf_grad", [L("x", [4, 4], True)], ["x.t()"]),
]))

add(case("test_generate_gives_inference_graph", """
def f(x):
    with torch.no_grad():
        return torch.mul(x, x)
""", """
fn f(x: &Tensor) -> Tensor {
    no_grad! { x * x }
}
""", [
    C("leaf_grad", [L("x", [4], True)], ["x"]),
    C("grad", [L("x", [4], True)], ["x.copy()"]),
    C("nograd", [L("x", [4])], ["x"]),
]))

add(case("test_default_partitioner_getitem", """
def f(x, mod_weight, mod_bias):
    return torch.nn.functional.layer_norm(x, [8], mod_weight, mod_bias, eps=1e-6)
""", """
fn f(x: &Tensor, mod_weight: &Tensor, mod_bias: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[-1], true);
    let var = x.var_dim(&[-1], 0, true);
    (x - mean) * (var + 1e-06).rsqrt() * mod_weight + mod_bias
}
""", [
    C("leaf_grad", [L("x", [3, 8], True), L("w", [8], True), L("b", [8], True)], ["x", "w", "b"]),
    C("params_grad", [L("x", [3, 8]), L("w", [8], True), L("b", [8], True)], ["x", "w", "b"]),
    C("nograd", [L("x", [3, 8]), L("w", [8]), L("b", [8])], ["x", "w", "b"]),
]))

add(case("test_aot_module_simplified", """
def f(x, y, w, b):
    return torch.nn.functional.linear(x, w, b) + y
""", """
fn f(x: &Tensor, y: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    x.matmul(w.t()) + b + y
}
""", [
    C("leaf_grad", [L("x", [4, 2], True), L("y", [4, 3], True), L("w", [3, 2], True), L("b", [3], True)], ["x", "y", "w", "b"]),
    C("params_only_grad", [L("x", [4, 2]), L("y", [4, 3]), L("w", [3, 2], True), L("b", [3], True)], ["x", "y", "w", "b"]),
    C("nograd", [L("x", [4, 2]), L("y", [4, 3]), L("w", [3, 2]), L("b", [3])], ["x", "y", "w", "b"]),
]))

add(case("test_aot_module_simplified_preserves_stack_trace", """
def f(x, y, w, b):
    z = torch.nn.functional.linear(x, w, b)
    z = z + y
    z = z.relu()
    return z
""", """
fn f(x: &Tensor, y: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let z = x.matmul(w.t()) + b;
    let z = z + y;
    z.relu()
}
""", [
    C("leaf_grad", [L("x", [4, 2], True), L("y", [4, 3], True), L("w", [3, 2], True), L("b", [3], True)], ["x", "y", "w", "b"]),
    C("nograd", [L("x", [4, 2]), L("y", [4, 3]), L("w", [3, 2]), L("b", [3])], ["x", "y", "w", "b"]),
]))

# ---------------------------------------------------------------------------
# dynamo's test_aot_autograd.py
# ---------------------------------------------------------------------------

add(case("test_mutation", """
def f(param, y):
    with torch.no_grad():
        param.add_(y)
    return y
""", """
fn f(param: &mut Tensor, y: &Tensor) -> Tensor {
    no_grad! {
        param.add_(y);
    }
    y
}
""", [
    C("param_leaf_grad", [L("p", [4], True), L("y", [4])], ["p", "y"]),
    C("nograd", [L("p", [4]), L("y", [4])], ["p", "y"]),
    C("y_leaf_grad", [L("p", [4]), L("y", [4], True)], ["p", "y"]),
    C("dupe_leaf_grad", [L("p", [4], True)], ["p", "p"]),
    C("dupe_nograd", [L("p", [4])], ["p", "p"]),
    C("param_row_view_leaf_grad", [L("p", [2, 4], True), L("y", [4])], ["p.select(0,1)", "y"]),
]))

add(case("test_negative_testing", """
def f(x, y):
    return torch.sin(x).add_(y)
""", """
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x.sin().add_(y)
}
""", [
    C("leaf_grad", [L("x", [4], True), L("y", [4], True)], ["x", "y"]),
    C("y_grad", [L("x", [4]), L("y", [4], True)], ["x", "y"]),
    C("nograd", [L("x", [4]), L("y", [4])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [4], True)], ["x", "x"]),
]))

# ---------------------------------------------------------------------------
# requires_grad patterns over aliased views of one base
# ---------------------------------------------------------------------------

add(case("xtra2_mutated_view_arg_reduced", """
def f(a):
    a.mul_(2)
    return a.sum(dim=[0], keepdim=False)
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.mul_(2.0);
    a.sum_dim(&[0], false)
}
""", [
    C("grad", [L("x", [3, 3], True)], ["x.copy()"]),
    C("nograd", [L("x", [3, 3])], ["x"]),
    C("leaf_grad", [L("x", [3, 3], True)], ["x"], note=LEAF_INPLACE),
    C("t_view_grad", [L("x", [3, 3], True)], ["p.t()"], lets=[["p", "x.copy()"]]),
    C("diagonal_view_grad", [L("x", [3, 3], True)], ["p.diagonal()"], lets=[["p", "x.copy()"]]),
    C("as_strided_view_grad", [L("x", [3, 3], True)], ["p.as_strided([2,2],[1,3],1)"], lets=[["p", "x.copy()"]]),
    C("narrow_view_nograd", [L("x", [4, 3])], ["x.narrow(0,1,2)"]),
    C("leaf_t_view_grad", [L("x", [3, 3], True)], ["x.t()"], note=LEAF_VIEW_INPLACE),
    C("detached_view_of_grad_leaf", [L("x", [3, 3], True)], ["x.detach().t()"]),
]))

add(case("xtra2_two_views_one_mutated", """
def f(a, b):
    a.add_(1)
    return b * 2
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(1.0);
    b * 2.0
}
""", [
    C("diag_and_t_grad", [L("x", [3, 3], True)], ["p.diagonal()", "p.t()"], lets=[["p", "x.copy()"]]),
    C("diag_and_t_nograd", [L("x", [3, 3])], ["x.diagonal()", "x.t()"]),
    C("row_and_col_grad", [L("x", [3, 3], True)], ["p.select(0,0)", "p.narrow(1,0,1)"], lets=[["p", "x.copy()"]]),
    C("strided_and_flat_grad", [L("x", [3, 3], True)], ["p.as_strided([2,2],[3,1],1)", "p.view([-1])"], lets=[["p", "x.copy()"]]),
    C("disjoint_rows_nograd", [L("x", [3, 3])], ["x.select(0,0)", "x.select(0,2)"]),
    C("leaf_views_grad", [L("x", [3, 3], True)], ["x.diagonal()", "x.t()"], note=LEAF_VIEW_INPLACE),
    C("b_only_grad", [L("x", [3]), L("y", [3, 3], True)], ["x", "y"]),
]))

add(case("xtra2_metadata_mutation_on_view_arg", """
def f(a, b):
    a.t_()
    return a + b, a
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.t_();
    (a + b, a)
}
""", [
    C("rows_of_one_base_grad", [L("x", [4, 2], True)], ["p.narrow(0,0,2)", "p.narrow(0,2,2)"], lets=[["p", "x.copy()"]]),
    C("rows_of_one_base_nograd", [L("x", [4, 2])], ["x.narrow(0,0,2)", "x.narrow(0,2,2)"]),
    C("same_view_twice_grad", [L("x", [2, 2], True)], ["p.view([2,2])", "p.view([2,2])"], lets=[["p", "x.copy()"]]),
    C("grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x.copy()", "y"]),
    C("dupe_grad", [L("x", [2, 2], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("leaf_view_grad", [L("x", [4, 2], True), L("y", [2, 2])], ["x.narrow(0,0,2)", "y"],
      note="eager PyTorch refuses t_ on a view of a leaf that requires grad"),
]))

add(case("xtra2_view_args_output_aliases", """
def f(a, b):
    return a.view(-1), b.t(), a + b
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    (a.view(&[-1]), b.t(), a + b)
}
""", [
    C("views_of_grad_leaf", [L("x", [2, 2], True)], ["x.view([2,2])", "x.t()"]),
    C("views_of_copy", [L("x", [2, 2], True)], ["p.view([2,2])", "p.t()"], lets=[["p", "x.copy()"]]),
    C("views_nograd", [L("x", [2, 2])], ["x.view([2,2])", "x.t()"]),
    C("dupe_leaf_grad", [L("x", [2, 2], True)], ["x", "x"]),
    C("detached_and_leaf", [L("x", [2, 2], True)], ["x.detach()", "x"]),
    C("b_grad", [L("x", [2, 2]), L("y", [2, 2], True)], ["x", "y"]),
]))

add(case("xtra2_diagonal_arg_mutated_base_returned", """
def f(base, diag):
    diag.add_(1)
    return base.t(), diag
""", """
fn f(base: &Tensor, diag: &mut Tensor) -> (Tensor, Tensor) {
    diag.add_(1.0);
    (base.t(), diag)
}
""", [
    C("alias_grad", [L("x", [3, 3], True)], ["p", "p.diagonal()"], lets=[["p", "x.copy()"]]),
    C("alias_nograd", [L("x", [3, 3])], ["x", "x.diagonal()"]),
    C("separate_grad", [L("x", [3, 3], True), L("d", [3], True)], ["x", "d.copy()"]),
    C("separate_nograd", [L("x", [3, 3]), L("d", [3])], ["x", "d"]),
]))

add(case("xtra2_as_strided_args_overlap_mutation", """
def f(a, b):
    a.mul_(2)
    return a + b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.mul_(2.0);
    a + b
}
""", [
    C("overlap_nograd", [L("x", [6])], ["x.as_strided([2,2],[2,1],0)", "x.as_strided([2,2],[2,1],1)"]),
    C("overlap_grad", [L("x", [6], True)], ["p.as_strided([2,2],[2,1],0)", "p.as_strided([2,2],[2,1],1)"],
      lets=[["p", "x.copy()"]]),
    C("disjoint_nograd", [L("x", [8])], ["x.as_strided([2,2],[2,1],0)", "x.as_strided([2,2],[2,1],4)"]),
    C("disjoint_grad", [L("x", [8], True)], ["p.as_strided([2,2],[2,1],0)", "p.as_strided([2,2],[2,1],4)"],
      lets=[["p", "x.copy()"]]),
    C("interleaved_grad", [L("x", [8], True)], ["p.as_strided([2,2],[4,1],0)", "p.as_strided([2,2],[4,1],2)"],
      lets=[["p", "x.copy()"]]),
]))

add(case("xtra2_detached_arg_mutation", """
def f(a, b):
    a.mul_(3)
    return a + b, b.sin()
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.mul_(3.0);
    (a + b, b.sin())
}
""", [
    C("detached_of_grad_leaf", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x.detach()", "y"]),
    C("detached_of_b", [L("x", [2, 3], True)], ["x.detach()", "x"], note=NONDIFF_VIEW),
    C("detached_row_of_b", [L("x", [2, 3], True)], ["x.select(0,0).detach()", "x"], note=NONDIFF_VIEW),
    C("nograd", [L("x", [2, 3]), L("y", [2, 3])], ["x", "y"]),
]))

add(case("xtra2_dupe_three_args_mutate_middle", """
def f(a, b, c):
    b.mul_(2)
    return a + c
""", """
fn f(a: &Tensor, b: &mut Tensor, c: &Tensor) -> Tensor {
    b.mul_(2.0);
    a + c
}
""", [
    C("all_same_nograd", [L("x", [2, 2])], ["x", "x", "x"]),
    C("all_same_grad", [L("x", [2, 2], True)], ["p", "p", "p"], lets=[["p", "x.copy()"]]),
    C("ab_same_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["p", "p", "y"], lets=[["p", "x.copy()"]]),
    C("ac_same_leaf_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x", "q", "x"], lets=[["q", "y.copy()"]], note=ZERO_GRAD),
    C("distinct_grad", [L("x", [2, 2], True), L("y", [2, 2], True), L("z", [2, 2], True)], ["x", "y.copy()", "z"], note=ZERO_GRAD),
]))

add(case("xtra2_dupe_metadata_only", """
def f(a, b):
    a.unsqueeze_(0)
    return a.sum() + b.sum(), a
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.unsqueeze_(0);
    (a.sum() + b.sum(), a)
}
""", [
    C("dupe_nograd", [L("x", [2, 3])], ["x", "x"]),
    C("dupe_grad", [L("x", [2, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("grad", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x.copy()", "y"]),
    C("alias_nograd", [L("x", [2, 3])], ["x.view([2,3])", "x.view([6])"]),
]))

add(case("xtra2_dupe_returned_mutated", """
def f(a, b):
    a.add_(1)
    return b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(1.0);
    b
}
""", [
    C("dupe_nograd", [L("x", [3])], ["x", "x"]),
    C("dupe_grad", [L("x", [3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("alias_grad", [L("x", [2, 3], True)], ["p.select(0,0)", "p"], lets=[["p", "x.copy()"]]),
    C("separate_grad", [L("x", [3], True), L("y", [3], True)], ["x.copy()", "y"]),
]))

# ---------------------------------------------------------------------------
# Metadata mutations (no set_)
# ---------------------------------------------------------------------------

add(case("xtra2_as_strided_inplace_then_mutate", """
def f(a):
    a.as_strided_([2, 2], [2, 1], 1)
    a.mul_(2)
    return a
""", """
fn f(a: &mut Tensor) -> Tensor {
    a.as_strided_(&[2, 2], &[2, 1], 1);
    a.mul_(2.0);
    a
}
""", [
    C("grad", [L("x", [6], True)], ["x.copy()"]),
    C("nograd", [L("x", [6])], ["x"]),
    C("view_arg_grad", [L("x", [2, 3], True)], ["p.view([6])"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra2_transpose_inplace_dupe_other_view", """
def f(a, b):
    a.transpose_(0, 1)
    return a, b.view(-1)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.transpose_(0, 1);
    (a, b.view(&[-1]))
}
""", [
    C("dupe_nograd", [L("x", [2, 3])], ["x", "x"]),
    C("dupe_grad", [L("x", [2, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
    C("grad", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x.copy()", "y"]),
    C("nograd", [L("x", [2, 3]), L("y", [2, 3])], ["x", "y"]),
]))

add(case("xtra2_unsqueeze_inplace_twice", """
def f(a):
    a.unsqueeze_(0)
    a.unsqueeze_(2)
    return a.squeeze(0), a * 2
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor) {
    a.unsqueeze_(0);
    a.unsqueeze_(2);
    (a.squeeze(0), a * 2.0)
}
""", [
    C("grad", [L("x", [2, 3], True)], ["x.copy()"]),
    C("nograd", [L("x", [2, 3])], ["x"]),
    C("row_view_grad", [L("x", [2, 3], True)], ["p.select(0,1)"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra2_metadata_mutation_under_no_grad_leaf", """
def f(a, b):
    with torch.no_grad():
        a.t_()
    return a * b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    no_grad! {
        a.t_();
    }
    a * b
}
""", [
    C("leaf_grad", [L("x", [2, 3], True), L("y", [3, 2])], ["x", "y"], note=NO_GRAD_T_LEAF),
    C("y_grad", [L("x", [2, 3]), L("y", [3, 2], True)], ["x", "y"], note=BW_VERSION),
    C("nograd", [L("x", [2, 3]), L("y", [3, 2])], ["x", "y"]),
]))

add(case("xtra2_squeeze_inplace_then_view_outputs", """
def f(a):
    a.squeeze_(0)
    return a.t(), a.view(-1), a.sum()
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    a.squeeze_(0);
    (a.t(), a.view(&[-1]), a.sum())
}
""", [
    C("grad", [L("x", [1, 2, 3], True)], ["x.copy()"]),
    C("nograd", [L("x", [1, 2, 3])], ["x"]),
    C("unsqueezed_view_grad", [L("x", [2, 3], True)], ["p.unsqueeze(0)"], lets=[["p", "x.copy()"]]),
]))

# ---------------------------------------------------------------------------
# Intermediate bases, outputs that do not require grad, no_grad views
# ---------------------------------------------------------------------------

add(case("xtra2_no_grad_views_of_input_and_intermediate", """
def f(a):
    with torch.no_grad():
        t = a * 2
        return t.view(-1), a.view(-1), a.t()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    no_grad! {
        let t = a * 2.0;
        (t.view(&[-1]), a.view(&[-1]), a.t())
    }
}
""", [
    C("leaf_grad", [L("x", [2, 2], True)], ["x"], note=NO_GRAD_VIEWS),
    C("grad", [L("x", [2, 2], True)], ["x.copy()"], note=NO_GRAD_VIEWS),
    C("nograd", [L("x", [2, 2])], ["x"]),
]))

add(case("xtra2_intermediate_views_mixed_detach", """
def f(a, b):
    t = a + b
    return t.select(0, 0), t.select(0, 1).detach(), t.narrow(1, 1, 2)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    let t = a + b;
    (t.select(0, 0), t.select(0, 1).detach(), t.narrow(1, 1, 2))
}
""", [
    C("leaf_grad", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x", "y"]),
    C("b_grad", [L("x", [2, 3]), L("y", [2, 3], True)], ["x", "y"]),
    C("nograd", [L("x", [2, 3]), L("y", [2, 3])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [2, 3], True)], ["x", "x"]),
]))

add(case("xtra2_intermediate_mutated_through_view_outputs", """
def f(a):
    t = a * 2
    v1 = t.t()
    v2 = t.diagonal()
    v2.mul_(3)
    return v1, v2
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let t = a * 2.0;
    let v1 = t.t();
    let v2 = t.diagonal();
    v2.mul_(3.0);
    (v1, v2)
}
""", [
    C("leaf_grad", [L("x", [3, 3], True)], ["x"]),
    C("nograd", [L("x", [3, 3])], ["x"]),
    C("view_arg_grad", [L("x", [9], True)], ["x.view([3,3])"]),
]))

add(case("xtra2_outputs_mixed_requires_grad", """
def f(a, b):
    m = a.gt(b)
    return a.detach() * 2, a * b, m, torch.where(m, a, b)
""", """
fn f(a: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let m = a.gt(b);
    (a.detach() * 2.0, a * b, m, a.where_(&m, b))
}
""", [
    C("leaf_grad", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x", "y"]),
    C("a_grad", [L("x", [2, 3], True), L("y", [2, 3])], ["x.copy()", "y"]),
    C("b_grad", [L("x", [2, 3]), L("y", [2, 3], True)], ["x", "y"]),
    C("nograd", [L("x", [2, 3]), L("y", [2, 3])], ["x", "y"]),
    C("alias_t_leaf_grad", [L("x", [3, 3], True)], ["x", "x.t()"]),
]))

add(case("xtra2_inference_mutation_with_alias_outputs", """
def f(a, b):
    a.add_(b)
    return a.t(), a.sum(), b.view(-1)
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    a.add_(b);
    (a.t(), a.sum(), b.view(&[-1]))
}
""", [
    C("nograd", [L("x", [2, 3]), L("y", [2, 3])], ["x", "y"]),
    C("b_leaf_grad", [L("x", [2, 3]), L("y", [2, 3], True)], ["x", "y"]),
    C("grad", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x.copy()", "y"]),
    C("dupe_nograd", [L("x", [2, 3])], ["x", "x"]),
    C("dupe_grad", [L("x", [2, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra2_all_no_grad_body_mutation_and_views", """
def f(a, b):
    with torch.no_grad():
        a.mul_(2)
        c = a + b
        return c, a.view(-1), b.t()
""", """
fn f(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    no_grad! {
        a.mul_(2.0);
        let c = a + b;
        (c, a.view(&[-1]), b.t())
    }
}
""", [
    C("leaf_grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x", "y"], note=NO_GRAD_VIEWS),
    C("grad", [L("x", [2, 2], True), L("y", [2, 2], True)], ["x.copy()", "y"], note=NO_GRAD_VIEWS),
    C("nograd", [L("x", [2, 2]), L("y", [2, 2])], ["x", "y"]),
    C("dupe_leaf_grad", [L("x", [2, 2], True)], ["x", "x"], note=NO_GRAD_VIEWS),
]))

# ---------------------------------------------------------------------------
# Realistic training steps
# ---------------------------------------------------------------------------

add(case("xtra2_attention_kv_cache_update", """
def f(cache_k, cache_v, k, v, q):
    cache_k.narrow(0, 2, 1).copy_(k)
    cache_v.narrow(0, 2, 1).copy_(v)
    keys = cache_k.narrow(0, 0, 3)
    vals = cache_v.narrow(0, 0, 3)
    attn = (q.matmul(keys.t()) * 0.5).softmax(-1)
    return attn.matmul(vals), attn
""", """
fn f(cache_k: &mut Tensor, cache_v: &mut Tensor, k: &Tensor, v: &Tensor, q: &Tensor) -> (Tensor, Tensor) {
    cache_k.narrow(0, 2, 1).copy_(k);
    cache_v.narrow(0, 2, 1).copy_(v);
    let keys = cache_k.narrow(0, 0, 3);
    let vals = cache_v.narrow(0, 0, 3);
    let attn = (q.matmul(keys.t()) * 0.5).softmax(-1);
    (attn.matmul(vals), attn)
}
""", [
    C("kvq_grad", [L("ck", [4, 3]), L("cv", [4, 3]), L("k", [1, 3], True), L("v", [1, 3], True), L("q", [2, 3], True)],
      ["ck", "cv", "k", "v", "q"]),
    C("q_grad", [L("ck", [4, 3]), L("cv", [4, 3]), L("k", [1, 3]), L("v", [1, 3]), L("q", [2, 3], True)],
      ["ck", "cv", "k", "v", "q"]),
    C("nograd", [L("ck", [4, 3]), L("cv", [4, 3]), L("k", [1, 3]), L("v", [1, 3]), L("q", [2, 3])],
      ["ck", "cv", "k", "v", "q"]),
    C("caches_in_one_buffer_grad", [L("buf", [8, 3]), L("k", [1, 3], True), L("v", [1, 3], True), L("q", [2, 3], True)],
      ["buf.narrow(0,0,4)", "buf.narrow(0,4,4)", "k", "v", "q"]),
    C("same_cache_dupe", [L("c", [4, 3]), L("k", [1, 3], True), L("v", [1, 3], True), L("q", [2, 3])],
      ["c", "c", "k", "v", "q"]),
    C("cache_grad_copy", [L("ck", [4, 3], True), L("cv", [4, 3], True), L("k", [1, 3], True), L("v", [1, 3]), L("q", [2, 3])],
      ["ck.copy()", "cv.copy()", "k", "v", "q"]),
]))

add(case("xtra2_attention_masked_where", """
def f(q, k, v, mask_src):
    s = q.matmul(k.t())
    m = mask_src.gt(0.0)
    s = torch.where(m, s, torch.full_like(s, -10000.0))
    p = s.softmax(-1)
    return p.matmul(v), m
""", """
fn f(q: &Tensor, k: &Tensor, v: &Tensor, mask_src: &Tensor) -> (Tensor, Tensor) {
    let s = q.matmul(k.t());
    let m = mask_src.gt(0.0);
    let s = s.where_(&m, s.full_like(-10000.0));
    let p = s.softmax(-1);
    (p.matmul(v), m)
}
""", [
    C("qkv_grad", [L("q", [2, 3], True), L("k", [3, 3], True), L("v", [3, 2], True), L("m", [2, 3])], ["q", "k", "v", "m"]),
    C("v_grad", [L("q", [2, 3]), L("k", [3, 3]), L("v", [3, 2], True), L("m", [2, 3])], ["q", "k", "v", "m"]),
    C("nograd", [L("q", [2, 3]), L("k", [3, 3]), L("v", [3, 2]), L("m", [2, 3])], ["q", "k", "v", "m"]),
    C("qk_same_leaf_grad", [L("q", [3, 3], True), L("v", [3, 2]), L("m", [3, 3])], ["q", "q", "v", "m"]),
]))

add(case("xtra2_layernorm_residual_relu_inplace", """
def f(x, w, g, b):
    mean = x.mean(dim=[-1], keepdim=True)
    var = x.var(dim=[-1], correction=0, keepdim=True)
    h = (x - mean) * (var + 1e-05).rsqrt() * g + b
    h = h.matmul(w)
    h.add_(x)
    h.relu_()
    return h
""", """
fn f(x: &Tensor, w: &Tensor, g: &Tensor, b: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[-1], true);
    let var = x.var_dim(&[-1], 0, true);
    let h = (x - mean) * (var + 1e-05).rsqrt() * g + b;
    let h = h.matmul(w);
    h.add_(x);
    h.relu_();
    h
}
""", [
    C("all_leaf_grad", [L("x", [2, 4], True), L("w", [4, 4], True), L("g", [4], True), L("b", [4], True)], ["x", "w", "g", "b"]),
    C("params_grad", [L("x", [2, 4]), L("w", [4, 4], True), L("g", [4], True), L("b", [4], True)], ["x", "w", "g", "b"]),
    C("nograd", [L("x", [2, 4]), L("w", [4, 4]), L("g", [4]), L("b", [4])], ["x", "w", "g", "b"]),
    C("x_view_grad", [L("x", [8], True), L("w", [4, 4]), L("g", [4]), L("b", [4])], ["x.view([2,4])", "w", "g", "b"]),
]))

add(case("xtra2_residual_block_two_relu_inplace", """
def f(x, w1, w2):
    h = x.matmul(w1)
    h.relu_()
    h = h.matmul(w2)
    h.add_(x)
    h.relu_()
    return h, h.sum(dim=[1], keepdim=False)
""", """
fn f(x: &Tensor, w1: &Tensor, w2: &Tensor) -> (Tensor, Tensor) {
    let h = x.matmul(w1);
    h.relu_();
    let h = h.matmul(w2);
    h.add_(x);
    h.relu_();
    (h, h.sum_dim(&[1], false))
}
""", [
    C("all_leaf_grad", [L("x", [2, 3], True), L("w1", [3, 3], True), L("w2", [3, 3], True)], ["x", "w1", "w2"]),
    C("w_grad", [L("x", [2, 3]), L("w1", [3, 3], True), L("w2", [3, 3], True)], ["x", "w1", "w2"]),
    C("nograd", [L("x", [2, 3]), L("w1", [3, 3]), L("w2", [3, 3])], ["x", "w1", "w2"]),
    C("tied_weights_leaf_grad", [L("x", [2, 3], True), L("w", [3, 3], True)], ["x", "w", "w"]),
    C("tied_transposed_grad", [L("x", [2, 3]), L("w", [3, 3], True)], ["x", "w", "w.t()"]),
]))

add(case("xtra2_relu_inplace_on_input_row", """
def f(x, w):
    x.narrow(0, 0, 1).relu_()
    return x * w
""", """
fn f(x: &mut Tensor, w: &Tensor) -> Tensor {
    x.narrow(0, 0, 1).relu_();
    x * w
}
""", [
    C("grad", [L("x", [2, 3], True), L("w", [2, 3], True)], ["x.copy()", "w"]),
    C("w_grad", [L("x", [2, 3]), L("w", [2, 3], True)], ["x", "w"]),
    C("nograd", [L("x", [2, 3]), L("w", [2, 3])], ["x", "w"]),
    C("leaf_grad", [L("x", [2, 3], True), L("w", [2, 3])], ["x", "w"], note=LEAF_VIEW_INPLACE),
    C("dupe_grad", [L("x", [2, 3], True)], ["p", "p"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra2_sgd_step_returns_params", """
def f(w, b, gw, gb, x, lr):
    with torch.no_grad():
        w.sub_(gw * lr)
        b.sub_(gb * lr)
    return x.matmul(w) + b, w, b.view(1, 2)
""", """
fn f(w: &mut Tensor, b: &mut Tensor, gw: &Tensor, gb: &Tensor, x: &Tensor, lr: f64) -> (Tensor, Tensor, Tensor) {
    no_grad! {
        w.sub_(gw * lr);
        b.sub_(gb * lr);
    }
    (x.matmul(w) + b, w, b.view(&[1, 2]))
}
""", [
    C("params_leaf_grad", [L("w", [3, 2], True), L("b", [2], True), L("gw", [3, 2]), L("gb", [2]), L("x", [2, 3])],
      ["w", "b", "gw", "gb", "x", 0.1]),
    C("params_copy_grad", [L("w", [3, 2], True), L("b", [2], True), L("gw", [3, 2]), L("gb", [2]), L("x", [2, 3], True)],
      ["w.copy()", "b.copy()", "gw", "gb", "x", 0.5]),
    C("nograd", [L("w", [3, 2]), L("b", [2]), L("gw", [3, 2]), L("gb", [2]), L("x", [2, 3])],
      ["w", "b", "gw", "gb", "x", 0.1]),
    C("params_in_one_buffer", [L("flat", [8], True), L("gw", [3, 2]), L("gb", [2]), L("x", [2, 3])],
      ["p.narrow(0,0,6).view([3,2])", "p.narrow(0,6,2)", "gw", "gb", "x", 0.1], lets=[["p", "flat.copy()"]]),
    C("grads_with_grad", [L("w", [3, 2], True), L("b", [2], True), L("gw", [3, 2], True), L("gb", [2], True), L("x", [2, 3])],
      ["w", "b", "gw", "gb", "x", 0.1]),
]))

add(case("xtra2_adam_step_scalars", """
def f(w, g, m, v, x, lr, bc1, bc2):
    with torch.no_grad():
        m.mul_(0.9).add_(g * 0.1)
        v.mul_(0.999).add_(g * g * 0.001)
        w.sub_((m / bc1) / ((v / bc2).abs().sqrt() + 1e-08) * lr)
    return x.matmul(w).tanh().sum(dim=[1], keepdim=False)
""", """
fn f(w: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, x: &Tensor, lr: f64, bc1: f64, bc2: f64) -> Tensor {
    no_grad! {
        m.mul_(0.9).add_(g * 0.1);
        v.mul_(0.999).add_(g * g * 0.001);
        w.sub_((m / bc1) / ((v / bc2).abs().sqrt() + 1e-08) * lr);
    }
    x.matmul(w).tanh().sum_dim(&[1], false)
}
""", [
    C("param_leaf_grad", [L("w", [3, 2], True), L("g", [3, 2]), L("m", [3, 2]), L("v", [3, 2]), L("x", [2, 3])],
      ["w", "g", "m", "v", "x", 0.01, 0.1, 0.001]),
    C("param_copy_grad", [L("w", [3, 2], True), L("g", [3, 2]), L("m", [3, 2]), L("v", [3, 2]), L("x", [2, 3], True)],
      ["w.copy()", "g", "m", "v", "x", 0.01, 0.1, 0.001]),
    C("nograd", [L("w", [3, 2]), L("g", [3, 2]), L("m", [3, 2]), L("v", [3, 2]), L("x", [2, 3])],
      ["w", "g", "m", "v", "x", 0.01, 0.1, 0.001]),
    C("moments_in_one_buffer", [L("w", [3, 2], True), L("g", [3, 2]), L("st", [2, 3, 2]), L("x", [2, 3])],
      ["w", "g", "st.select(0,0)", "st.select(0,1)", "x", 0.01, 0.1, 0.001]),
    C("moments_dupe", [L("w", [3, 2], True), L("g", [3, 2]), L("m", [3, 2]), L("x", [2, 3])],
      ["w", "g", "m", "m", "x", 0.01, 0.1, 0.001], note=DUPE_INDEX),
]))

add(case("xtra2_grad_accumulation_into_buffer", """
def f(acc, x, w):
    for i in range(2):
        acc.add_(x.select(0, i).matmul(w))
    return acc.sum() * 0.5, acc
""", """
fn f(acc: &mut Tensor, x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    for i in 0..2 {
        acc.add_(x.select(0, i).matmul(w));
    }
    (acc.sum() * 0.5, acc)
}
""", [
    C("w_leaf_grad", [L("acc", [2, 2]), L("x", [2, 2, 3]), L("w", [3, 2], True)], ["acc", "x", "w"]),
    C("xw_grad", [L("acc", [2, 2]), L("x", [2, 2, 3], True), L("w", [3, 2], True)], ["acc", "x", "w"]),
    C("acc_grad", [L("acc", [2, 2], True), L("x", [2, 2, 3]), L("w", [3, 2], True)], ["acc.copy()", "x", "w"]),
    C("nograd", [L("acc", [2, 2]), L("x", [2, 2, 3]), L("w", [3, 2])], ["acc", "x", "w"]),
    C("acc_leaf_grad", [L("acc", [2, 2], True), L("x", [2, 2, 3]), L("w", [3, 2])], ["acc", "x", "w"], note=LEAF_INPLACE),
]))

add(case("xtra2_grad_buffer_accumulate_no_grad", """
def f(gbuf, w, x):
    out = x.matmul(w)
    with torch.no_grad():
        gbuf.add_(x.t().matmul(out) * 0.5)
    return out.square().sum(), gbuf.view(-1)
""", """
fn f(gbuf: &mut Tensor, w: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    let out = x.matmul(w);
    no_grad! {
        gbuf.add_(x.t().matmul(out) * 0.5);
    }
    (out.square().sum(), gbuf.view(&[-1]))
}
""", [
    C("w_leaf_grad", [L("g", [3, 2]), L("w", [3, 2], True), L("x", [2, 3])], ["g", "w", "x"]),
    C("nograd", [L("g", [3, 2]), L("w", [3, 2]), L("x", [2, 3])], ["g", "w", "x"]),
    C("gbuf_leaf_grad", [L("g", [3, 2], True), L("w", [3, 2], True), L("x", [2, 3])], ["g", "w", "x"]),
    C("gbuf_is_weight_leaf_grad", [L("w", [3, 2], True), L("x", [2, 3])], ["w", "w", "x"], note=DUPE_INDEX),
    C("gbuf_is_weight_nograd", [L("w", [3, 2]), L("x", [2, 3])], ["w", "w", "x"]),
]))

add(case("xtra2_ema_update_returns_views", """
def f(ema, w, x):
    with torch.no_grad():
        ema.mul_(0.9).add_(w * 0.1)
    return ema.view(-1), w.t(), x.matmul(w).sum()
""", """
fn f(ema: &mut Tensor, w: &Tensor, x: &Tensor) -> (Tensor, Tensor, Tensor) {
    no_grad! {
        ema.mul_(0.9).add_(w * 0.1);
    }
    (ema.view(&[-1]), w.t(), x.matmul(w).sum())
}
""", [
    C("w_leaf_grad", [L("ema", [3, 2]), L("w", [3, 2], True), L("x", [2, 3])], ["ema", "w", "x"]),
    C("nograd", [L("ema", [3, 2]), L("w", [3, 2]), L("x", [2, 3])], ["ema", "w", "x"]),
    C("ema_is_copy_of_grad", [L("w", [3, 2], True), L("x", [2, 3])], ["p", "w", "x"], lets=[["p", "w.detach()"]],
      note=NONDIFF_VIEW),
    C("ema_grad_copy", [L("ema", [3, 2], True), L("w", [3, 2], True), L("x", [2, 3])], ["ema.copy()", "w", "x"]),
]))

add(case("xtra2_batchnorm_train_running_stats_inplace_returned", """
def f(x, w, b, running_mean, running_var):
    mean = x.mean(dim=[0], keepdim=False)
    var = x.var(dim=[0], correction=0, keepdim=False)
    with torch.no_grad():
        running_mean.mul_(0.9).add_(mean * 0.1)
        running_var.mul_(0.9).add_(var * 0.1)
    y = (x - mean) * (var + 1e-05).rsqrt() * w + b
    y.relu_()
    return y, running_mean, running_var.view(1, 3)
""", """
fn f(x: &Tensor, w: &Tensor, b: &Tensor, running_mean: &mut Tensor, running_var: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        running_mean.mul_(0.9).add_(mean * 0.1);
        running_var.mul_(0.9).add_(var * 0.1);
    }
    let y = (x - mean) * (var + 1e-05).rsqrt() * w + b;
    y.relu_();
    (y, running_mean, running_var.view(&[1, 3]))
}
""", [
    C("train", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3])], ["x", "w", "b", "rm", "rv"]),
    C("params_only", [L("x", [4, 3]), L("w", [3], True), L("b", [3], True), L("rm", [3]), L("rv", [3])], ["x", "w", "b", "rm", "rv"]),
    C("nograd", [L("x", [4, 3]), L("w", [3]), L("b", [3]), L("rm", [3]), L("rv", [3])], ["x", "w", "b", "rm", "rv"]),
    C("stats_rows_of_one_buffer", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("st", [2, 3])],
      ["x", "w", "b", "st.select(0,0)", "st.select(0,1)"]),
    C("stats_dupe", [L("x", [4, 3], True), L("w", [3], True), L("b", [3], True), L("st", [3])], ["x", "w", "b", "st", "st"], note=DUPE_INDEX),
]))

add(case("xtra2_masked_fill_where_inplace_mask", """
def f(x, mask_src, w):
    m = mask_src.lt(0.0)
    h = torch.where(m, torch.zeros_like(x), x)
    h.mul_(w)
    return h, m, h.sum(dim=[0], keepdim=True)
""", """
fn f(x: &Tensor, mask_src: &Tensor, w: &Tensor) -> (Tensor, Tensor, Tensor) {
    let m = mask_src.lt(0.0);
    let h = x.zeros_like().where_(&m, x);
    h.mul_(w);
    (h, m, h.sum_dim(&[0], true))
}
""", [
    C("x_w_leaf_grad", [L("x", [2, 3], True), L("m", [2, 3]), L("w", [2, 3], True)], ["x", "m", "w"]),
    C("w_grad", [L("x", [2, 3]), L("m", [2, 3]), L("w", [2, 3], True)], ["x", "m", "w"]),
    C("nograd", [L("x", [2, 3]), L("m", [2, 3]), L("w", [2, 3])], ["x", "m", "w"]),
    C("mask_src_is_x_leaf_grad", [L("x", [2, 3], True), L("w", [2, 3])], ["x", "x", "w"]),
]))

add(case("xtra2_optimizer_zero_grad_then_accumulate", """
def f(g, w, x):
    with torch.no_grad():
        g.zero_()
    loss = x.matmul(w).sigmoid().sum()
    with torch.no_grad():
        g.add_(w * 0.01)
    return loss, g
""", """
fn f(g: &mut Tensor, w: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    no_grad! {
        g.zero_();
    }
    let loss = x.matmul(w).sigmoid().sum();
    no_grad! {
        g.add_(w * 0.01);
    }
    (loss, g)
}
""", [
    C("w_leaf_grad", [L("g", [3, 2]), L("w", [3, 2], True), L("x", [2, 3])], ["g", "w", "x"]),
    C("nograd", [L("g", [3, 2]), L("w", [3, 2]), L("x", [2, 3])], ["g", "w", "x"]),
    C("g_leaf_grad", [L("g", [3, 2], True), L("w", [3, 2], True), L("x", [2, 3])], ["g", "w", "x"]),
    C("g_view_of_buffer", [L("buf", [2, 3, 2]), L("w", [3, 2], True), L("x", [2, 3])], ["buf.select(0,1)", "w", "x"]),
]))

add(case("xtra2_weight_tying_no_mutation", """
def f(w_in, w_out, x):
    h = x.matmul(w_in).tanh()
    return h.matmul(w_out.t()), h
""", """
fn f(w_in: &Tensor, w_out: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    let h = x.matmul(w_in).tanh();
    (h.matmul(w_out.t()), h)
}
""", [
    C("tied_leaf_grad", [L("w", [3, 3], True), L("x", [2, 3])], ["w", "w", "x"]),
    C("tied_grad", [L("w", [3, 3], True), L("x", [2, 3], True)], ["p", "p", "x"], lets=[["p", "w.copy()"]]),
    C("separate_grad", [L("a", [3, 3], True), L("b", [3, 3], True), L("x", [2, 3])], ["a", "b", "x"]),
    C("tied_transposed_grad", [L("w", [3, 3], True), L("x", [2, 3])], ["w", "w.t()", "x"]),
    C("nograd", [L("w", [3, 3]), L("x", [2, 3])], ["w", "w", "x"]),
]))

# ---------------------------------------------------------------------------
# What autograd saves: eager PyTorch saves only what the gradients that are
# needed use, so mutating an input that was not saved is allowed
# ---------------------------------------------------------------------------

add(case("xtra2_saved_tensors_not_needed_mul_div_mm", """
def f(x, w, d):
    y = x * w + x / d + x.matmul(w.t()).sum(dim=[1], keepdim=True)
    with torch.no_grad():
        x.mul_(0.5)
    return y, x
""", """
fn f(x: &mut Tensor, w: &Tensor, d: &Tensor) -> (Tensor, Tensor) {
    let y = x * w + x / d + x.matmul(w.t()).sum_dim(&[1], true);
    no_grad! {
        x.mul_(0.5);
    }
    (y, x)
}
""", [
    C("x_leaf_grad", [L("x", [2, 3], True), L("w", [2, 3]), L("d", [2, 3])], ["x", "w", "d"]),
    C("x_grad", [L("x", [2, 3], True), L("w", [2, 3]), L("d", [2, 3])], ["x.copy()", "w", "d"]),
    C("nograd", [L("x", [2, 3]), L("w", [2, 3]), L("d", [2, 3])], ["x", "w", "d"]),
    C("x_view_leaf_grad", [L("x", [6], True), L("w", [2, 3]), L("d", [2, 3])], ["x.view([2,3])", "w", "d"]),
]))

add(case("xtra2_saved_results_unary_then_input_zeroed", """
def f(x):
    y = x.exp() + x.tanh() + x.relu() + x.sigmoid() + x.sum()
    with torch.no_grad():
        x.zero_()
    return y
""", """
fn f(x: &mut Tensor) -> Tensor {
    let y = x.exp() + x.tanh() + x.relu() + x.sigmoid() + x.sum();
    no_grad! {
        x.zero_();
    }
    y
}
""", [
    C("leaf_grad", [L("x", [2, 3], True)], ["x"]),
    C("grad", [L("x", [2, 3], True)], ["x.copy()"]),
    C("nograd", [L("x", [2, 3])], ["x"]),
    C("row_view_leaf_grad", [L("x", [2, 3], True)], ["x.select(0,1)"]),
]))

add(case("xtra2_mutate_self_overlapping_arg", """
def f(a, b):
    a.mul_(2)
    return a + b
""", """
fn f(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.mul_(2.0);
    a + b
}
""", [
    C("stride0_nograd", [L("x", [3]), L("y", [2, 3])], ["x.as_strided([2,3],[0,1],0)", "y"]),
    C("stride0_grad", [L("x", [3], True), L("y", [2, 3], True)], ["p.as_strided([2,3],[0,1],0)", "y"], lets=[["p", "x.copy()"]]),
    C("plain_grad", [L("x", [2, 3], True), L("y", [2, 3], True)], ["x.copy()", "y"]),
    C("b_is_stride0_view_nograd", [L("x", [3])], ["p", "x.as_strided([2,3],[0,1],0)"], lets=[["p", "x.view([1,3])"]]),
]))

add(case("xtra2_buffer_becomes_grad_then_view_outputs", """
def f(buf, w):
    buf.add_(w)
    return buf.view(-1), buf.t(), buf * 2
""", """
fn f(buf: &mut Tensor, w: &Tensor) -> (Tensor, Tensor, Tensor) {
    buf.add_(w);
    (buf.view(&[-1]), buf.t(), buf * 2.0)
}
""", [
    C("w_leaf_grad", [L("buf", [2, 3]), L("w", [2, 3], True)], ["buf", "w"]),
    C("buf_row_of_plain_base", [L("base", [3, 2, 3]), L("w", [2, 3], True)], ["base.select(0,1)", "w"]),
    C("nograd", [L("buf", [2, 3]), L("w", [2, 3])], ["buf", "w"]),
    C("both_grad", [L("buf", [2, 3], True), L("w", [2, 3], True)], ["buf.copy()", "w"]),
    C("w_is_buf_nograd", [L("buf", [2, 3])], ["buf", "buf"]),
]))

add(case("xtra2_intermediate_mutated_no_grad_view_output", """
def f(a):
    t = a * 2
    v = t.view(-1)
    with torch.no_grad():
        t.add_(1)
    return v, t
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let t = a * 2.0;
    let v = t.view(&[-1]);
    no_grad! {
        t.add_(1.0);
    }
    (v, t)
}
""", [
    C("leaf_grad", [L("x", [2, 3], True)], ["x"]),
    C("nograd", [L("x", [2, 3])], ["x"]),
    C("view_arg_grad", [L("x", [3, 2], True)], ["p.t()"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra2_intermediate_row_zeroed_under_no_grad", """
def f(a):
    t = a.sin()
    with torch.no_grad():
        t.select(0, 0).zero_()
    return t, t.sum()
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let t = a.sin();
    no_grad! {
        t.select(0, 0).zero_();
    }
    (t, t.sum())
}
""", [
    C("leaf_grad", [L("x", [2, 3], True)], ["x"]),
    C("nograd", [L("x", [2, 3])], ["x"]),
    C("grad", [L("x", [2, 3], True)], ["x.copy()"]),
]))

add(case("xtra2_view_outputs_created_before_mutation", """
def f(a):
    v = a.view(-1)
    w = a.t()
    a.mul_(2)
    return v, w, a.sum()
""", """
fn f(a: &mut Tensor) -> (Tensor, Tensor, Tensor) {
    let v = a.view(&[-1]);
    let w = a.t();
    a.mul_(2.0);
    (v, w, a.sum())
}
""", [
    C("grad", [L("x", [2, 3], True)], ["x.copy()"]),
    C("nograd", [L("x", [2, 3])], ["x"]),
    C("leaf_grad", [L("x", [2, 3], True)], ["x"], note=LEAF_INPLACE),
    C("row_view_grad", [L("x", [3, 2, 3], True)], ["p.select(0,1)"], lets=[["p", "x.copy()"]]),
]))

# ---------------------------------------------------------------------------
# Session 4 probes: training shapes that now run compiled
# ---------------------------------------------------------------------------

add(case("xtra4_overlapping_views_mutated", """
def f(a, b, w):
    a.mul_(w)
    s = a.sin().sum(0) + b * 2
    return s, b.t()
""", """
fn f(a: &mut Tensor, b: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    a.mul_(w);
    let s = a.sin().sum_dim(&[0], false) + b * 2.0;
    (s, b.t())
}
""", [
    C("grad", [L("x", [4, 3], True), L("w", [3], True)], ["p.narrow(0,1,2)", "p.narrow(0,0,3)", "w"], lets=[["p", "x.copy()"]]),
    C("nograd", [L("x", [4, 3]), L("w", [3])], ["p.narrow(0,1,2)", "p.narrow(0,0,3)", "w"], lets=[["p", "x.copy()"]]),
    C("leaf_views", [L("x", [4, 3], True), L("w", [3], True)], ["x.narrow(0,1,2)", "x.narrow(0,0,3)", "w"]),
]))

add(case("xtra4_base_and_view_passed", """
def f(x, v, y):
    v.copy_(y * 3)
    x.add_(1)
    return (x * x).sum(1), v.view(-1)
""", """
fn f(x: &mut Tensor, v: &mut Tensor, y: &Tensor) -> (Tensor, Tensor) {
    v.copy_(&(y * 3.0));
    x.add_(1.0);
    (x.square().sum_dim(&[1], false), v.view(&[-1]))
}
""", [
    C("grad", [L("a", [3, 4], True), L("y", [4], True)], ["p", "p.select(0,1)", "y"], lets=[["p", "a.copy()"]]),
    C("nograd", [L("a", [3, 4]), L("y", [4])], ["p", "p.select(0,1)", "y"], lets=[["p", "a.copy()"]]),
    C("y_only", [L("a", [3, 4]), L("y", [4], True)], ["p", "p.select(0,1)", "y"], lets=[["p", "a.copy()"]]),
]))

add(case("xtra4_flat_buffer_params", """
def f(w, b, gw, x):
    with torch.no_grad():
        w.sub_(gw * 0.1)
        b.sub_(0.05)
    return (x @ w + b).tanh(), w, b.view(1, 2)
""", """
fn f(w: &mut Tensor, b: &mut Tensor, gw: &Tensor, x: &Tensor) -> (Tensor, Tensor, Tensor) {
    no_grad! {
        w.sub_(gw * 0.1);
        b.sub_(0.05);
    }
    ((x.matmul(w) + b).tanh(), w, b.view(&[1, 2]))
}
""", [
    C("grad", [L("flat", [8], True), L("gw", [3, 2]), L("x", [2, 3], True)],
      ["p.narrow(0,0,6).view([3,2])", "p.narrow(0,6,2)", "gw", "x"], lets=[["p", "flat.copy()"]]),
    C("nograd", [L("flat", [8]), L("gw", [3, 2]), L("x", [2, 3])],
      ["p.narrow(0,0,6).view([3,2])", "p.narrow(0,6,2)", "gw", "x"], lets=[["p", "flat.copy()"]]),
]))

add(case("xtra4_transposed_alias_mutated", """
def f(a, b):
    b.mul_(2)
    return a * 3, (b + 1).sum()
""", """
fn f(a: &Tensor, b: &mut Tensor) -> (Tensor, Tensor) {
    b.mul_(2.0);
    (a * 3.0, (b + 1.0).sum())
}
""", [
    C("grad", [L("x", [3, 3], True)], ["p", "p.t()"], lets=[["p", "x.copy()"]]),
    C("diag", [L("x", [3, 3], True)], ["p", "p.diagonal()"], lets=[["p", "x.copy()"]]),
    C("nograd", [L("x", [3, 3])], ["p", "p.t()"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra4_contiguous_then_write", """
def f(a, w):
    c = a.contiguous()
    c.mul_(w)
    return c, a.sum()
""", """
fn f(a: &mut Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let c = a.contiguous();
    c.mul_(w);
    (c, a.sum())
}
""", [
    C("grad_contig", [L("x", [3, 4], True), L("w", [3, 4], True)], ["p", "w"], lets=[["p", "x.copy()"]]),
    C("nograd_contig", [L("x", [3, 4]), L("w", [3, 4])], ["x", "w"]),
    C("grad_transposed", [L("x", [4, 3], True), L("w", [3, 4], True)], ["p.t()", "w"], lets=[["p", "x.copy()"]],
      note="contiguous() copies the transposed input, so it is not mutated: only a run shows it"),
    C("nograd", [L("x", [4, 3]), L("w", [3, 4])], ["x.t()", "w"]),
]))

add(case("xtra4_as_strided_inside", """
def f(a, w):
    v = a.as_strided([2, 2], [3, 1], 1)
    return (v * w).exp(), a.sum()
""", """
fn f(a: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let v = a.as_strided(&[2, 2], &[3, 1], 1);
    ((v * w).exp(), a.sum())
}
""", [
    C("grad", [L("x", [3, 3], True), L("w", [2, 2], True)], ["x", "w"]),
    C("nograd", [L("x", [3, 3]), L("w", [2, 2])], ["x", "w"]),
    C("of_narrow_outside", [L("x", [4, 3], True), L("w", [2, 2], True)], ["p.narrow(0,1,2)", "w"], lets=[["p", "x.copy()"]]),
]))

add(case("xtra4_no_grad_slice_step", """
def f(p, g, x):
    with torch.no_grad():
        p.narrow(0, 0, 2).sub_(g * 0.5)
    return (x @ p).sum()
""", """
fn f(p: &mut Tensor, g: &Tensor, x: &Tensor) -> Tensor {
    no_grad! {
        p.narrow(0, 0, 2).sub_(g * 0.5);
    }
    x.matmul(p).sum()
}
""", [
    C("grad", [L("w", [3, 2], True), L("g", [2, 2]), L("x", [4, 3], True)], ["w.copy()", "g", "x"]),
    C("leaf_grad", [L("w", [3, 2], True), L("g", [2, 2]), L("x", [4, 3], True)], ["w", "g", "x"]),
    C("nograd", [L("w", [3, 2]), L("g", [2, 2]), L("x", [4, 3])], ["w", "g", "x"]),
]))

add(case("xtra4_no_grad_view_returned", """
def f(a):
    b = a * 2
    with torch.no_grad():
        v = b.view(-1)
    return b.sum(), v
""", """
fn f(a: &Tensor) -> (Tensor, Tensor) {
    let b = a * 2.0;
    let v = no_grad! { b.view(&[-1]) };
    (b.sum(), v)
}
""", std([("x", [2, 3])])))

add(case("xtra4_unused_values", """
def f(a, b):
    u = a.exp()
    t = b * 2
    t.add_(1)
    return (a * b).sum()
""", """
fn f(a: &Tensor, b: &Tensor) -> Tensor {
    let u = a.exp();
    let t = b * 2.0;
    t.add_(1.0);
    (a * b).sum()
}
""", std([("x", [3]), ("y", [3])])))

add(case("xtra4_reshape_of_transposed_written", """
def f(a, w):
    r = a.t().reshape(-1)
    r.mul_(2)
    return (r * w).sum(), a
""", """
fn f(a: &mut Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let r = a.t().reshape(&[-1]);
    r.mul_(2.0);
    ((r * w).sum(), a)
}
""", [
    C("grad_copy", [L("x", [2, 3], True), L("w", [6], True)], ["p", "w"], lets=[["p", "x.copy()"]]),
    C("grad_view", [L("x", [1, 3], True), L("w", [3], True)], ["p", "w"], lets=[["p", "x.copy()"]],
      note="the transpose of a [1, 3] tensor reshapes as a view, so the input is mutated: only a run shows it"),
    C("nograd", [L("x", [2, 3]), L("w", [6])], ["x", "w"]),
]))
