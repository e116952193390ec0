//! The record behind the profiler (`crate::profile`): per backend call, its
//! row (a name and a device), its time, and the bytes and flops it moves,
//! summed into [`Table`]s. The storage opens a [`Span`] around each backend
//! call; the tables hold plain data, so this layer knows nothing of the
//! report that reads them.
//!
//! Where a call is recorded:
//! - into the innermost open scope of its thread ([`Scope`], one per
//!   `profile(..)`), and
//! - into the process table when the whole process is profiled
//!   (`AOT_LOG=profile`, [`set_read`]).
//!
//! One atomic, [`GATE`], says whether anything records: it holds whether
//! `AOT_LOG` was read, whether the process is profiled, and how many scopes
//! are open on any thread. Off, a call costs that one load ([`gate`] is
//! [`OFF`]). A span opened inside another on the same thread (a primitive
//! built from other primitives) is not recorded: its time is its
//! parent's, so the rows never count time twice.
//!
//! A device that runs work asynchronously times it with events
//! ([`DeviceEvents`]); their times are read later ([`Table::resolve`]),
//! when a scope closes, when the process table is read, and every
//! [`RESOLVE_EVERY`] pending calls, so recording waits for the device at
//! most once per that many calls.

use crate::device::Device;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `AOT_LOG` was read ([`GATE`]'s bit).
const READ: u32 = 1;
/// The whole process is profiled.
const PROCESS: u32 = 2;
/// One open scope; [`GATE`] above its two low bits counts them.
const SCOPE: u32 = 4;

/// [`gate`] when nothing records: `AOT_LOG` was read, it does not name
/// `profile`, and no scope is open.
pub(crate) const OFF: u32 = READ;

/// See the module's documentation: without [`READ`] until `AOT_LOG` is read.
static GATE: AtomicU32 = AtomicU32::new(0);

/// Device times wait to be read until this many calls are pending in a
/// table; then the table reads them (waiting for the device once).
pub(crate) const RESOLVE_EVERY: usize = 1024;

/// The state of recording: [`OFF`], unread ([`unread`]: `AOT_LOG` not
/// read yet), or anything else (something may record; [`Span::open`]
/// decides).
#[inline(always)]
pub(crate) fn gate() -> u32 {
    GATE.load(Ordering::Relaxed)
}

/// Whether `gate` says `AOT_LOG` was not read yet.
pub(crate) fn unread(gate: u32) -> bool {
    gate & READ == 0
}

/// Notes that `AOT_LOG` was read; `process_wide`: it names `profile`.
pub(crate) fn set_read(process_wide: bool) {
    GATE.fetch_or(READ | if process_wide { PROCESS } else { 0 }, Ordering::Relaxed);
}

/// Whether the whole process is profiled (`AOT_LOG=profile`).
pub(crate) fn process_wide() -> bool {
    gate() & PROCESS != 0
}

/// A device's clock around one backend call: an event recorded on the
/// device's stream when the span opens, another at [`stop`](Self::stop).
pub(crate) trait DeviceEvents: Send + Sync {
    /// Records the end event (the call's work has been queued).
    fn stop(&mut self);
    /// The device's time between the two events, waiting for the end
    /// event; `None` if the device cannot say (the host time stands).
    fn elapsed(&self) -> Option<Duration>;
}

/// What a call moves: bytes read plus bytes written, and floating-point
/// operations where they are the measure (matmul).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub bytes: u64,
    pub flops: u64,
}

impl Cost {
    /// Both costs together.
    pub(crate) fn plus(self, o: Cost) -> Cost {
        Cost { bytes: self.bytes + o.bytes, flops: self.flops + o.flops }
    }
}

/// One row's sums.
#[derive(Clone, Default)]
pub(crate) struct Acc {
    pub calls: u64,
    /// The time of the calls whose time is known.
    pub time: Duration,
    pub bytes: u64,
    pub flops: u64,
    /// Calls timed by device events not read yet, each with its host time
    /// (which stands if the events cannot be read).
    pending: Vec<(Duration, Arc<dyn DeviceEvents>)>,
}

/// Rows by device, then by name.
#[derive(Clone, Default)]
pub(crate) struct Table {
    devices: Vec<(Device, HashMap<String, Acc>)>,
    /// Calls whose device time is pending, in all rows.
    pending: usize,
}

/// How a finished call was timed.
#[derive(Clone)]
enum Timing {
    Host(Duration),
    Device(Duration, Arc<dyn DeviceEvents>),
}

impl Table {
    const fn new() -> Table {
        Table { devices: Vec::new(), pending: 0 }
    }

    fn acc(&mut self, device: Device, name: &str) -> &mut Acc {
        let at = match self.devices.iter().position(|(d, _)| *d == device) {
            Some(at) => at,
            None => {
                self.devices.push((device, HashMap::new()));
                self.devices.len() - 1
            }
        };
        let rows = &mut self.devices[at].1;
        // Looked up by `&str` first: a row's name is allocated once.
        if !rows.contains_key(name) {
            rows.insert(name.to_string(), Acc::default());
        }
        rows.get_mut(name).expect("inserted above")
    }

    fn add(&mut self, device: Device, name: &str, cost: Cost, timing: Timing) {
        let acc = self.acc(device, name);
        acc.calls += 1;
        acc.bytes += cost.bytes;
        acc.flops += cost.flops;
        match timing {
            Timing::Host(t) => acc.time += t,
            Timing::Device(host, events) => {
                acc.pending.push((host, events));
                self.pending += 1;
                if self.pending >= RESOLVE_EVERY {
                    self.resolve();
                }
            }
        }
    }

    /// Reads every pending device time (waiting for the device).
    pub(crate) fn resolve(&mut self) {
        for (_, rows) in &mut self.devices {
            for acc in rows.values_mut() {
                for (host, events) in acc.pending.drain(..) {
                    acc.time += events.elapsed().unwrap_or(host);
                }
            }
        }
        self.pending = 0;
    }

    /// Adds `other`'s rows to this table's.
    fn merge(&mut self, other: &Table) {
        for (device, rows) in &other.devices {
            for (name, o) in rows {
                let acc = self.acc(*device, name);
                acc.calls += o.calls;
                acc.time += o.time;
                acc.bytes += o.bytes;
                acc.flops += o.flops;
                acc.pending.extend(o.pending.iter().cloned());
            }
        }
        self.pending += other.pending;
    }

    /// The rows, `(device, name, sums)`, in no particular order; call
    /// [`resolve`](Self::resolve) first for final times.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (Device, &str, &Acc)> {
        self.devices.iter().flat_map(|(d, rows)| rows.iter().map(move |(n, a)| (*d, n.as_str(), a)))
    }
}

/// The process table (`AOT_LOG=profile`).
static PROCESS_TABLE: Mutex<Table> = Mutex::new(Table::new());

fn process_table() -> std::sync::MutexGuard<'static, Table> {
    // A poisoned lock only follows a panic elsewhere; the sums are still valid.
    PROCESS_TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The process table so far, its device times read.
pub(crate) fn process_snapshot() -> Table {
    let mut t = process_table();
    t.resolve();
    t.clone()
}

/// This thread's recording state.
struct Local {
    /// Spans open on this thread (0 or 1: inner spans are not opened).
    depth: Cell<u32>,
    /// The open scopes, innermost last.
    scopes: RefCell<Vec<Table>>,
}

thread_local! {
    static LOCAL: Local = const { Local { depth: Cell::new(0), scopes: RefCell::new(Vec::new()) } };
}

/// An open scope of this thread: the calls made until it finishes are
/// recorded into its table (and, when it closes, into the enclosing
/// scope's). Dropped without [`finish`](Self::finish) (a panic), it closes
/// the same way.
pub(crate) struct Scope {
    /// Not `Send`: the scope is this thread's.
    _thread: std::marker::PhantomData<*const ()>,
}

impl Scope {
    pub(crate) fn open() -> Scope {
        LOCAL.with(|l| l.scopes.borrow_mut().push(Table::new()));
        GATE.fetch_add(SCOPE, Ordering::Relaxed);
        Scope { _thread: std::marker::PhantomData }
    }

    /// Closes the scope: its table, device times read.
    pub(crate) fn finish(self) -> Table {
        let mut t = close();
        std::mem::forget(self);
        t.resolve();
        t
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        close();
    }
}

/// Pops this thread's innermost scope, adds it to the enclosing one.
fn close() -> Table {
    GATE.fetch_sub(SCOPE, Ordering::Relaxed);
    LOCAL.with(|l| {
        let mut scopes = l.scopes.borrow_mut();
        let t = scopes.pop().unwrap_or_default();
        if let Some(outer) = scopes.last_mut() {
            outer.merge(&t);
        }
        t
    })
}

/// One backend call being timed; recorded when dropped.
pub(crate) struct Span<'a> {
    device: Device,
    name: &'a str,
    cost: Cost,
    scoped: bool,
    process: bool,
    events: Option<Box<dyn DeviceEvents>>,
    start: Instant,
}

impl<'a> Span<'a> {
    /// A span for a call named `name` on `device`, when this thread
    /// records and no span is open on it; `gate` is [`gate`]'s value.
    /// `cost` and `events` are called only then.
    pub(crate) fn open(
        gate: u32,
        device: Device,
        name: &'a str,
        cost: impl FnOnce() -> Cost,
        events: impl FnOnce() -> Option<Box<dyn DeviceEvents>>,
    ) -> Option<Span<'a>> {
        let process = gate & PROCESS != 0;
        // `try_with`: a call made while the thread's locals are torn down
        // is not recorded.
        let scoped = LOCAL
            .try_with(|l| {
                let scoped = !l.scopes.borrow().is_empty();
                let opens = l.depth.get() == 0 && (scoped || process);
                if opens {
                    l.depth.set(1);
                }
                opens.then_some(scoped)
            })
            .ok()??;
        let cost = cost();
        let events = events();
        Some(Span { device, name, cost, scoped, process, events, start: Instant::now() })
    }

    /// Counts `bytes` more for the call (what it wrote, once its result
    /// is known).
    pub(crate) fn add_bytes(&mut self, bytes: u64) {
        self.cost.bytes += bytes;
    }

    /// Drops the span without recording it (the call declined, nothing ran).
    pub(crate) fn cancel(mut self) {
        self.scoped = false;
        self.process = false;
    }
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        let timing = match self.events.take() {
            Some(mut e) => {
                e.stop();
                Timing::Device(self.start.elapsed(), Arc::from(e))
            }
            None => Timing::Host(self.start.elapsed()),
        };
        // `try_with`: a span may close while the thread's locals are torn down.
        let _ = LOCAL.try_with(|l| {
            l.depth.set(0);
            if self.scoped {
                if let Some(t) = l.scopes.borrow_mut().last_mut() {
                    t.add(self.device, self.name, self.cost, timing.clone());
                }
            }
        });
        if self.process {
            process_table().add(self.device, self.name, self.cost, timing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Duration);
    impl DeviceEvents for Fixed {
        fn stop(&mut self) {}
        fn elapsed(&self) -> Option<Duration> {
            Some(self.0)
        }
    }

    #[test]
    fn device_times_replace_host_times_when_read() {
        let mut t = Table::new();
        let cost = Cost { bytes: 8, flops: 0 };
        t.add(Device::Cpu, "copy", cost, Timing::Host(Duration::from_millis(2)));
        t.add(Device::Cuda(0), "copy", cost, Timing::Device(Duration::from_millis(1), Arc::new(Fixed(Duration::from_millis(5)))));
        t.resolve();
        let mut rows: Vec<_> = t.rows().map(|(d, n, a)| (d, n.to_string(), a.calls, a.time, a.bytes)).collect();
        rows.sort_by_key(|r| r.0 != Device::Cpu);
        assert_eq!(
            rows,
            [
                (Device::Cpu, "copy".into(), 1, Duration::from_millis(2), 8),
                (Device::Cuda(0), "copy".into(), 1, Duration::from_millis(5), 8)
            ]
        );
    }

    #[test]
    fn an_inner_scope_counts_in_the_outer_one_and_nested_spans_once() {
        let outer = Scope::open();
        let inner = Scope::open();
        {
            let _a = Span::open(gate(), Device::Cpu, "a", Cost::default, || None).expect("a scope is open");
            assert!(Span::open(gate(), Device::Cpu, "b", Cost::default, || None).is_none(), "inside a span");
        }
        let inner = inner.finish();
        let outer = outer.finish();
        for t in [&inner, &outer] {
            let names: Vec<(&str, u64)> = t.rows().map(|(_, n, a)| (n, a.calls)).collect();
            assert_eq!(names, [("a", 1)]);
        }
        assert!(Span::open(gate(), Device::Cpu, "c", Cost::default, || None).is_none() || process_wide());
    }
}
