//! `AOT_LOG=profile`: the whole process profiled, and its table printed to
//! stderr at exit.
//!
//! `AOT_LOG` is read once, by the first backend call (or the first
//! [`super::profile`] or [`super::process_profile`]), which also starts the
//! process's clock. The table is printed by a handler registered with the
//! C library's `atexit`: Rust has no exit hook of its own (statics are
//! never dropped, and the main thread's thread-locals may not be), while
//! the C library runs its handlers when `main` returns and on
//! `std::process::exit`, on every platform Rust's standard library runs
//! on. The handler catches any panic, since unwinding out of it would
//! abort.

use crate::backend::profile_record;
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

extern "C" {
    /// The C library's `atexit` (C89): registers `f` to run at `exit`.
    fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
}

/// When `AOT_LOG` was read with `profile` in it.
static START: OnceLock<Instant> = OnceLock::new();

/// Reads `AOT_LOG` unless it was read; with `profile`, turns process-wide
/// recording on and registers the report at exit. The gate's value after.
pub(super) fn read_aot_log() -> u32 {
    let gate = profile_record::gate();
    if !profile_record::unread(gate) {
        return gate;
    }
    static REGISTER: Once = Once::new();
    let on = crate::aot_log::names("profile");
    if on {
        START.get_or_init(Instant::now);
        REGISTER.call_once(|| {
            // SAFETY: `print_report` is an `extern "C" fn()` that never
            // unwinds (it catches panics) and only uses statics that live
            // for the whole process.
            if unsafe { atexit(print_report) } != 0 {
                eprintln!("AOT_LOG=profile: the report cannot be registered to print at exit (atexit failed)");
            }
        });
    }
    profile_record::set_read(on);
    profile_record::gate()
}

/// The time since `AOT_LOG=profile` started the process's clock.
pub(super) fn since_start() -> Duration {
    START.get().map_or(Duration::ZERO, Instant::elapsed)
}

extern "C" fn print_report() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(p) = super::process_profile() {
            eprintln!("aot profile (AOT_LOG=profile, every thread of the process):\n{p:#}");
        }
    });
}
