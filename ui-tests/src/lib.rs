//! trybuild cases for #[aot_fn] diagnostics live in tests/.
