//! `#[aot_fn]` diagnostics (one compile-fail case per diagnostic, with its
//! `.stderr` snapshot) and pass cases covering the whole DSL.
//!
//! Regenerate the snapshots with `TRYBUILD=overwrite cargo test -p ui-tests --test ui`
//! and read every `.stderr` before committing it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
