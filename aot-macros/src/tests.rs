//! Pipeline tests: the IR listings of lowered functions (insta snapshots),
//! and the expansion-speed report.

use crate::diag::Errors;
use crate::{ast, expand, lower, valid};
use proc_macro2::TokenStream;

/// Runs parse -> validate -> lower and returns the listing.
fn listing(src: &str) -> String {
    let func: syn::ItemFn = syn::parse_str(src).expect("test source parses");
    let mut errors = Errors::default();
    let sig = valid::signature(&func.sig, &mut errors).expect("valid signature");
    let mut body = ast::parse_block(&func.block, &mut errors);
    valid::body(&mut body, &mut errors);
    let lowered = lower::lower(&func.sig.ident.to_string(), &sig, &body, Default::default(), &mut errors);
    assert!(errors.is_empty(), "{}", errors.to_compile_errors());
    lowered.expect("lowered").graph.to_string()
}

#[test]
fn contract_example() {
    insta::assert_snapshot!(listing(
        "fn f(a: &mut Tensor, b: &Tensor, lr: f64) -> (Tensor, Tensor) {
            a.mul_(2.0);
            let c = a + b * lr;
            (c, a.view(&[-1]))
        }"
    ), @r"
    fn f(%0 a: &mut Tensor, %1 b: &Tensor, lr: f64) -> (Tensor, Tensor) {
        mul_(%0, 2.0)
        %2 = mul(%1, lr)
        %3 = add(%0, %2)  // c
        %4 = view(%0, [-1])
        return (%3, %4)
    }
    ");
}

#[test]
fn no_grad_loops_scalars_and_reflected_operators() {
    insta::assert_snapshot!(listing(
        "fn step(w: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, n: i64) -> Tensor {
            no_grad! {
                buf.mul_(0.9).add_(g);
                w.sub_(&buf * (lr * 2.0));
            }
            let mut acc = w.zeros_like();
            for i in 0..=1 {
                let s = w.select(0, i + n);
                acc = acc + s;
            }
            let y = no_grad! { 1.0 - acc };
            2.0 / y.sum_dim(&[-1], true).to_dtype(DType::F64)
        }"
    ), @r"
    fn step(%0 w: &mut Tensor, %1 buf: &mut Tensor, %2 g: &Tensor, lr: f64, n: i64) -> Tensor {
        no_grad {
            mul_(%1, 0.9)
            add_(%1, %2)
            %3 = mul(%1, (lr * 2.0))
            sub_(%0, %3)
        }
        %4 = zeros_like(%0)  // acc
        %5 = select(%0, 0, (0 + n))  // s
        %6 = add(%4, %5)  // acc
        %7 = select(%0, 0, (1 + n))  // s
        %8 = add(%6, %7)  // acc
        no_grad {
            %9 = neg(%8)
            %10 = add(%9, 1.0)  // y
        }
        %11 = sum_dim(%10, [-1], true)
        %12 = to_dtype(%11, DType::F64)
        %13 = reciprocal(%12)
        %14 = mul(%13, 2.0)
        return %14
    }
    ");
}

#[test]
fn shadowing_tuples_and_returning_inputs() {
    insta::assert_snapshot!(listing(
        "fn f(x: &Tensor, y: &mut Tensor) -> (Tensor, Tensor, Tensor) {
            let x = x + 1.0;
            let (a, b) = (x.t(), y.detach());
            y.t_();
            (a, y, b)
        }"
    ), @r"
    fn f(%0 x: &Tensor, %1 y: &mut Tensor) -> (Tensor, Tensor, Tensor) {
        %2 = add(%0, 1.0)  // x
        %3 = t(%2)  // a
        %4 = detach(%1)  // b
        t_(%1)
        return (%3, %1, %4)
    }
    ");
}

#[test]
fn static_calls_spread_their_tensor_list() {
    insta::assert_snapshot!(listing(
        "fn f(cache: &mut Tensor, pos: &Tensor, kv: &Tensor, d: i64) -> Tensor {
            cache.index_copy_(1, &pos, &kv);
            let c = Tensor::cat(&[&cache, &kv.t(), &kv], d);
            aot_runtime::Tensor::stack(&[c], -1).index_select(0, &pos)
        }"
    ), @r"
    fn f(%0 cache: &mut Tensor, %1 pos: &Tensor, %2 kv: &Tensor, d: i64) -> Tensor {
        index_copy_(%0, 1, %1, %2)
        %3 = t(%2)
        %4 = cat(%0, %3, %2, d)  // c
        %5 = stack(%4, -1)
        %6 = index_select(%5, 0, %1)
        return %6
    }
    ");
}

/// The errors of a body, as one string.
fn errors_of(src: &str) -> String {
    let func: syn::ItemFn = syn::parse_str(src).expect("test source parses");
    let mut errors = Errors::default();
    let sig = valid::signature(&func.sig, &mut errors).expect("valid signature");
    let mut body = ast::parse_block(&func.block, &mut errors);
    valid::body(&mut body, &mut errors);
    let _ = lower::lower(&func.sig.ident.to_string(), &sig, &body, Default::default(), &mut errors);
    errors.to_compile_errors().to_string()
}

#[test]
fn static_call_mistakes_are_reported() {
    let bad = [
        ("a.cat(&[&b], 0)", "`cat` is not a method"),
        ("Tensor::cta(&[&a, &b], 0)", "did you mean `Tensor::cat`?"),
        ("Tensor::index_select(&a, 0, &b)", "`index_select` is a method"),
        ("Tensor::cat(&[&a, 2.0], 0)", "expects a list of tensors, found a float scalar in it"),
        ("Tensor::cat(a, 0)", "expects a list of tensors here, found a tensor"),
        ("Tensor::cat(&[], 0)", "needs at least one tensor"),
        ("Tensor::stack(&[&a, &b])", "`stack` takes 2 arguments but 1 was supplied"),
        ("Tensor::cat(&[&a, &b], 0.5)", "expects an integer here"),
        ("a.index_copy_(0, &b)", "`index_copy_` takes 3 arguments"),
    ];
    for (expr, want) in bad {
        let got = errors_of(&format!("fn f(a: &Tensor, b: &Tensor) -> Tensor {{ {expr} }}"));
        assert!(got.contains(want), "{expr}: {got}");
    }
}

#[test]
fn arange_mistakes_are_reported() {
    let bad = [
        ("a.arange(0, 3, 1, DType::I64)", "`arange` is not a method: it is a function of `Tensor`"),
        ("Tensor::arange()", "`arange` takes 1 to 5 arguments but 0 were supplied"),
        ("Tensor::arange(0, 4, 1, DType::I64, &a.device(), 2)", "takes 1 to 5 arguments but 6 were supplied"),
        ("Tensor::arange(0, 4, 1, DType::I64, &a)", "expects a device like `&x.device()` here, found an expression that is not"),
        ("Tensor::arange(0, 4, 1, &a.device())", "expects a dtype like `DType::F32` here, found a device"),
        ("Tensor::arange(0, DType::F32)", "expects a number here, found a dtype"),
        ("Tensor::arange(0, a)", "`Tensor::arange` expects a number here, found a tensor"),
        ("Tensor::arange(0, 4, 1, DType::I64, &n.device())", "`device` is called on a float scalar"),
        ("a.add(&a.device())", "found a device (only `Tensor::arange(.., &x.device())` takes one)"),
    ];
    for (expr, want) in bad {
        let got = errors_of(&format!("fn f(a: &Tensor, b: &Tensor, n: f64) -> Tensor {{ {expr} }}"));
        assert!(got.contains(want), "{expr}: {got}");
    }
    let none = errors_of("fn f(n: i64) -> Tensor { Tensor::arange(0, n) }");
    assert!(none.contains("takes the device of the function's tensor parameters, and this function has none"), "{none}");
    // every form lowers
    for ok in [
        "Tensor::arange(4)",
        "Tensor::arange(0, n)",
        "Tensor::arange(n, 0.0, -0.5)",
        "Tensor::arange(0, a.size(0), 2, DType::F16)",
        "Tensor::arange(0, 4, 1, DType::I64, &b.device())",
    ] {
        let got = errors_of(&format!("fn f(a: &Tensor, b: &Tensor, n: f64) -> Tensor {{ {ok} }}"));
        assert!(got.is_empty(), "{ok}: {got}");
    }
}

/// A function of `n` elementwise ops, for the expansion-speed report.
fn long_function(n: usize) -> TokenStream {
    let mut body = String::from("let mut h = x.copy();\n");
    for i in 0..n {
        let line = match i % 4 {
            0 => "h = h * w + 1.0;\n",
            1 => "h = h.tanh();\n",
            2 => "h.mul_(0.5);\n",
            _ => "h = h.view(&[-1]).reshape(&[4, -1]);\n",
        };
        body.push_str(line);
    }
    format!("pub fn long(x: &Tensor, w: &Tensor) -> Tensor {{ {body} h }}").parse().expect("generated source parses")
}

/// Not a timed assertion: prints how long expanding a 100-op function takes
/// (run with `--nocapture`). The budget is 50 ms per expansion.
#[test]
fn expansion_speed_report() {
    let item = long_function(100);
    let first = expand::expand(TokenStream::new(), item.clone()).to_string();
    assert!(!first.contains("compile_error"), "{first}");
    let runs = 100;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(expand::expand(TokenStream::new(), item.clone()));
    }
    let per = start.elapsed() / runs;
    println!("expanding a 100-op #[aot_fn] takes {per:?} per expansion ({runs} runs; budget 50 ms)");
}

/// No input makes the macro panic: every variant of a DSL function with one
/// word removed or replaced expands to code or to `compile_error!`s.
#[test]
fn mutated_sources_never_panic() {
    let src = "pub fn f(a: &mut Tensor, b: &Tensor, lr: f64, n: usize) -> (Tensor, Tensor) { \
        no_grad! { a.mul_(2.0).add_(&b); } \
        let c = (a + b * lr).view(&[-1, 2]).t(); \
        for i in 0..2 { a.select(0, i).zero_(); } \
        let (p, q) = (c.sum_dim(&[0], true), a.narrow(0, 0, n as i64)); \
        (p.where_(&p.gt(0.0), 1.0), q.to_dtype(DType::F64)) }";
    let words: Vec<&str> = src.split_whitespace().collect();
    let replacements = ["", "x", "1", "&", ".", "-", "a.t_()", "{", "(x)"];
    let mut expanded = 0;
    for i in 0..words.len() {
        for r in replacements {
            let mut w = words.clone();
            w[i] = r;
            // Unbalanced delimiters do not even lex; rustc would reject them before us.
            let Ok(item) = w.join(" ").parse::<TokenStream>() else { continue };
            std::hint::black_box(expand::expand(TokenStream::new(), item));
            expanded += 1;
        }
    }
    assert!(expanded > 150, "{expanded}");
}

#[test]
fn struct_parameters_lower_used_fields_to_inputs() {
    // Fields become inputs on first use, named by path; a repeated use is
    // the same input; scalar parameters keep their own input index.
    insta::assert_snapshot!(listing(
        "fn f(lr: f64, m: &mut Net, x: &Tensor) -> Tensor {
            let h = x.matmul(&m.l1.w) * lr;
            for i in 0..2 {
                m.layers[i].mul_(lr);
            }
            h + m.l1.w.sum()
        }"
    ), @r"
    fn f(lr: f64, %0 x: &Tensor, %1 m.l1.w: &mut Tensor, %4 m.layers.0: &mut Tensor, %5 m.layers.1: &mut Tensor) -> Tensor {
        %2 = matmul(%0, %1)
        %3 = mul(%2, lr)  // h
        mul_(%4, lr)
        mul_(%5, lr)
        %6 = sum(%1)
        %7 = add(%3, %6)
        return %7
    }
    ");
}

#[test]
fn struct_parameters_expand_through_the_tree_boundary() {
    let out = expand::expand(
        TokenStream::new(),
        "fn f(m: &mut Mlp, x: &Tensor) -> Tensor { m.w1.mul_(2.0); x.matmul(&m.w1) + m.layers[1] }".parse().unwrap(),
    )
    .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains("Arg :: tree (& * m)"), "{out}");
    assert!(out.contains("load_source"), "{out}");
    assert!(out.contains("(\"m\" , true) , (\"x\" , false)"), "{out}");
    // Each used field is type-checked as a tensor, once.
    assert_eq!(out.matches("= & m . w1 ;").count(), 1, "{out}");
    assert!(out.contains("= & m . layers [1usize] ;"), "{out}");
}

#[test]
fn struct_parameter_errors() {
    for (src, want) in [
        ("fn f(m: &Mlp) { m.w1.mul_(2.0); }", "a field of parameter `m`, which is taken by shared reference"),
        ("fn f(m: &Mlp, k: i64) -> Tensor { m.layers[k].sum() }", "must be known when the macro expands"),
        ("fn f(x: &Tensor) -> Tensor { x.grad }", "field access on `x`"),
        ("fn f(x: &Tensor) -> Tensor { x[0] }", "indexing a tensor on `x`"),
        ("fn f(m: &Mlp) -> Tensor { m.sum() }", "called on a struct of tensors"),
        ("fn f(m: &Mlp) -> Tensor { m }", "the body ends in a struct of tensors"),
        ("fn f(m: &Mlp) -> Tensor { let n = m; n.w1 }", "cannot be bound to another name"),
        ("fn f(m: &Mlp) -> Mlp { m.w1 }", "the function returns a struct, but the body ends in a tensor"),
        (
            "fn f(m: &Mlp, s: f64) -> Mlp { Mlp { w1: m.w1, lr: s } }",
            "must be a tensor, a struct of tensors or a literal, found a float scalar",
        ),
        ("fn f(m: &Mlp) -> Mlp { Mlp { w1: m.w1, ..m } }", "struct update syntax"),
    ] {
        let out = expand::expand(TokenStream::new(), src.parse().unwrap()).to_string();
        assert!(out.contains("compile_error") && out.contains(want), "{src}: {out}");
    }
}

#[test]
fn returned_structs_are_rebuilt_from_the_outputs() {
    let out = expand::expand(
        TokenStream::new(),
        "fn f(m: &Net, s: f64) -> Net { Net { l1: Linear { w: m.l1.w * s, b: m.l1.b }, out: m.out.exp() } }".parse().unwrap(),
    )
    .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains(":: aot_runtime :: Result < Net >"), "{out}");
    assert!(out.contains("Net { l1 : Linear { w : __aot_out0 , b : __aot_out1 } , out : __aot_out2 }"), "{out}");
    assert!(out.contains("arity (& __aot_outputs , 3usize"), "{out}");
}

#[test]
fn literal_attributes_of_a_returned_struct_are_recorded() {
    let out = expand::expand(TokenStream::new(), "fn f(x: &Tensor) -> W { W { q: x.exp(), bits: 8, on: true, r: 0.5 } }".parse().unwrap())
        .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains("W { q : __aot_out0 , bits : 8 , on : true , r : 0.5 }"), "{out}");
}

#[test]
fn metadata_mutation_of_a_field_requires_no_subclass_on_its_path() {
    let out =
        expand::expand(TokenStream::new(), "fn f(l: &mut Layer) { l.w.q.t_(); let a = &mut l.w; a.scale.unsqueeze_(0); }".parse().unwrap())
            .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains("__no_metadata_mutation (& * l)"), "{out}");
    assert!(out.contains("__no_metadata_mutation (& l . w)"), "{out}");
    assert_eq!(out.matches("__no_metadata_mutation").count(), 4, "{out}");
    // Out-of-place ops and data mutations need no check.
    let out =
        expand::expand(TokenStream::new(), "fn f(l: &mut Layer) -> Tensor { l.w.q.add_(1.0); l.w.q.t() }".parse().unwrap()).to_string();
    assert!(!out.contains("__no_metadata_mutation"), "{out}");
}

#[test]
fn float_constants_resolve_with_and_without_std() {
    for src in ["f64::consts::PI", "std::f64::consts::PI", "core::f64::consts::PI"] {
        let e: syn::Expr = syn::parse_str(src).unwrap();
        let mut errors = crate::diag::Errors::default();
        match crate::ast::parse_expr(&e, &mut errors) {
            crate::ast::Expr::Float(v, _) => assert_eq!(v, std::f64::consts::PI, "{src}"),
            other => panic!("{src}: {other:?}"),
        }
    }
    let e: syn::Expr = syn::parse_str("f32::consts::E").unwrap();
    let mut errors = crate::diag::Errors::default();
    assert!(matches!(crate::ast::parse_expr(&e, &mut errors), crate::ast::Expr::Float(v, _) if v == f64::from(std::f32::consts::E)));
}

#[test]
fn loop_bounds_that_are_no_integers_are_reported() {
    for (head, want) in [
        ("for _ in 0..LAYERS", "cannot read the value of `LAYERS`"),
        ("for _ in 0..=model::LAYERS", "cannot read the value of `model::LAYERS`"),
        ("for _ in 0..x", "a loop bound must be an integer, found a tensor"),
        ("for _ in 0..(n as f64)", "a loop bound must be an integer, found a float scalar"),
        ("for _ in 0..", "a range with both bounds"),
    ] {
        let got = errors_of(&format!("fn f(x: &Tensor, n: i64) {{ {head} {{ x.exp(); }} }}"));
        assert!(got.contains(want), "{head}: {got}");
    }
}

#[test]
fn loops_over_parameters_and_sizes_become_loop_nodes() {
    // The body is traced once, as its own graph: the loop variable, the
    // captured tensors and the carried `h`, whose result `h` is afterwards.
    insta::assert_snapshot!(listing(
        "fn rnn(x: &Tensor, w: &Tensor, n: i64) -> Tensor {
            let mut h = x.select(1, 0);
            for t in 0..x.size(1) {
                h = (x.select(1, t) + h.matmul(w)).tanh();
            }
            for _ in 1..=n {
                h = h * 2.0;
            }
            h
        }"
    ), @r"
    fn rnn(%0 x: &Tensor, %1 w: &Tensor, n: i64) -> Tensor {
        %2 = select(%0, 1, 0)  // h
        (%3) = for t in 0..x.size(1) over (%2, %0, %1) { 4 ops }
        (%4) = for _ in 1..(n + 1) over (%3) { 1 ops }
        return %4
    }
    ");
}

#[test]
fn what_a_loop_over_a_call_time_bound_cannot_do_is_reported() {
    for (body, want) in [
        // A `Vec` field's index must be known when the macro expands.
        ("for t in 0..n { x.add_(&m.blocks[t].w); }", "known only when the function is called"),
        // Only tensors are loop-carried.
        ("let mut s = 1.0; for t in 0..n { s = s * 2.0; } x.mul_(s);", "can reassign only tensors"),
        // A write to a `&Tensor` input inside the body is refused as outside.
        ("for t in 0..n { y.add_(1.0); }", "which is declared `&Tensor`"),
    ] {
        let src = format!("fn f(x: &mut Tensor, y: &Tensor, m: &Model, n: i64) {{ {body} }}");
        let got = expand::expand(TokenStream::new(), src.parse().expect("tokens")).to_string();
        assert!(got.contains(want), "{body}: {got}");
    }
}

#[test]
fn calls_become_call_nodes_with_a_callee_table() {
    let out = expand::expand(
        TokenStream::new(),
        "fn f(x: &Tensor, p: &mut Tensor, lr: f64) -> Tensor { let (a, b) = layers::split(&x); step(&mut p, &a, lr * 2.0); b }"
            .parse()
            .unwrap(),
    )
    .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    // The callees' sources, in the order of the call sites' indices.
    assert!(out.contains("layers :: split :: __aot_source as fn"), "{out}");
    assert!(out.contains("step :: __aot_source as fn"), "{out}");
    // rustc checks each call: a pair bound by the tuple, `()` unused.
    assert!(out.contains("let _r : (:: aot_runtime :: Tensor , :: aot_runtime :: Tensor ,) ="), "{out}");
    assert!(out.contains("step (:: aot_runtime :: compiled :: __private :: proxy :: < & mut :: aot_runtime :: Tensor > ()"), "{out}");
    let errs = expand::expand(TokenStream::new(), "fn f(x: &Tensor) -> Tensor { f(&x) }".parse().unwrap()).to_string();
    assert!(errs.contains("calls itself"), "{errs}");
}

/// A method of Rust's numbers called as an associated function
/// (`f64::powi(b, t)`, `std::f64::sqrt(x)`) is the method call.
#[test]
fn number_methods_as_associated_functions() {
    let assoc = listing("fn f(x: &Tensor, b: f64, t: i64) -> Tensor { x * (1.0 - f64::powi(b, t)) * std::f64::sqrt(b) }");
    let method = listing("fn f(x: &Tensor, b: f64, t: i64) -> Tensor { x * (1.0 - b.powi(t)) * b.sqrt() }");
    assert_eq!(assoc, method);
}
