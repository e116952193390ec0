//! Tests of `#[aot_fn]` from the outside, as a user crate sees it:
//!
//! - `tests/ui.rs`: trybuild compile-fail cases, one per diagnostic
//!   (`tests/ui/*.rs` with their `.stderr`), and pass cases covering the
//!   whole DSL (`tests/ui/pass/*.rs`);
//! - `tests/oracle_static.rs`: every function of the PyTorch oracle compiles,
//!   and its compile-time metadata agrees with PyTorch's;
//! - `tests/oracle_eager.rs`: the eager reference interpreter reproduces
//!   PyTorch's eager results on every oracle call.
//!
//! The crate itself has no code.
