"""Helpers shared by the new-user oracle corpora (cases_new_user*.py):
leaves, calls and cases in the format gen.py reads."""


def L(name, shape, rg=False):
    d = {"name": name, "shape": list(shape)}
    if rg:
        d["requires_grad"] = True
    return d


def V(name, shape, values, dtype="f32"):
    return {"name": name, "shape": list(shape), "values": [int(v) if dtype == "bool" else v for v in values], "dtype": dtype}


def C(label, leaves, args):
    return {"label": label, "leaves": leaves, "args": args}


def calls(floats, fixed=(), args=None, mutated=()):
    """`grad` (float leaves require grad; mutated ones are passed as copies)
    and `nograd` calls; `fixed` leaves never require grad; `args` lists the
    arguments (names, or numbers for scalar parameters)."""
    args = args or [n for n, _ in floats] + [f["name"] for f in fixed]

    def call(label, rg):
        leaves = [L(n, s, rg) for n, s in floats] + list(fixed)
        a = [(x + ".copy()") if (rg and isinstance(x, str) and x in mutated) else x for x in args]
        return C(label, leaves, a)
    return [call("grad", True), call("nograd", False)]


def case(name, python, rust, calls):
    return {"name": name, "python": python.strip("\n") + "\n", "rust": rust.strip("\n"), "calls": calls}
