//! Guards and the specialisation cache.
//!
//! A compiled function is specialised per [`GuardKey`]: per tensor
//! argument its dtype, device, `requires_grad`, `is_leaf` and rank, plus
//! the alias pattern among the arguments (which are the very same tensor,
//! which share a storage, and which overlap another, distinct one). Shapes
//! are not in the key: the plan reads them at run time.
//!
//! A [`Specialization`] holds the plan the runtime wrappers' pre-compile
//! steps build for its key (`crate::wrappers::CallPlan`); the key's alias
//! pattern (`crate::wrappers::AliasPattern`) is what those steps decide
//! on, so the arguments' aliasing is computed here, once per call, and
//! nowhere else.
//!
//! The key is recomputed and compared, never assumed: a call whose alias
//! pattern differs from the previous one gets its own specialisation
//! (PyTorch reused a stale one, pytorch#139789). The one shortcut is exact:
//! a call with the very tensors of the cache's last call, none of them
//! a view and none of their states written since, reuses that call's key
//! (`last_call.rs`). When the
//! function mutates no input (known statically), the alias pattern cannot
//! change the result and is left out of the key, so no storage comparisons
//! are made.
//!
//! The cache ([`SpecCache`]) is a hashed LRU that keeps at most
//! [`DEFAULT_CAPACITY`] (64) specialisations per function; a call whose key
//! was evicted simply builds its specialisation again. A hit computes the
//! key on the stack (up to [`INLINE_ARGS`] arguments), hashes it, compares
//! it with the cached key and allocates nothing. The same pass keeps each
//! dense argument's geometry (`executor::direct_kernels::Geom`, read under the same
//! look at the tensor's state), which the plan's checks of deferred writes
//! use instead of locking the tensors again. The exceptions: a
//! function that mutates an input, called with distinct arguments sharing
//! a storage (finding which of those overlap allocates), and a view whose
//! base was written since its history was recorded (autograd makes its new
//! `grad_fn` when `is_leaf` is asked).

use super::overlaps::mark_overlaps;
use crate::arg::Arg;
use crate::error::Result;
use crate::executor::direct_kernels::Geom;
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use crate::wrappers::{AliasPattern, ArgAlias, CallPlan};
use aot_ir::{Graph, StaticMeta};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

/// What one argument contributes to the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArgKey {
    /// `u8::MAX` for scalars.
    pub(super) dtype: u8,
    device: (u8, u32),
    requires_grad: bool,
    is_leaf: bool,
    rank: u32,
    /// The first argument that is this very tensor.
    pub(super) same_as: u32,
    /// The first argument sharing this tensor's storage.
    pub(super) storage_as: u32,
    /// Overlaps in memory another, distinct tensor of its storage (a
    /// repeat of a tensor has its first occurrence's bit).
    pub(super) overlaps: bool,
}

/// The guard key of a call, as stored in the cache (a lookup computes a
/// [`ProbeKey`] and builds this only on a miss).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GuardKey {
    grad_enabled: bool,
    args: Vec<ArgKey>,
}

/// Keys of calls with up to this many arguments are computed on the stack.
pub(crate) const INLINE_ARGS: usize = 16;

/// How many arguments' geometries a key's pass keeps.
const GEOM_ARGS: usize = 8;

/// A call's key as computed for a lookup: inline for up to
/// [`INLINE_ARGS`] arguments, so that a cache hit allocates nothing.
#[derive(Clone)]
pub(crate) struct ProbeKey {
    grad_enabled: bool,
    args: ArgKeys,
    /// The geometries of the first [`GEOM_ARGS`] arguments, where dense
    /// (read under the same look at each tensor's state as its key; the
    /// plan's checks of deferred writes use them).
    geoms: [Option<Geom>; GEOM_ARGS],
    /// With `check_unusual`: the first argument in an autograd state the
    /// compiled paths do not model, and why (the key is then incomplete).
    pub(crate) unusual: Option<(usize, &'static str)>,
    /// Whether an argument is a view (whose key follows its base's state).
    pub(crate) has_view: bool,
}

// Inline on purpose: the array lives on the caller's stack, which is what
// keeps a hit free of allocations.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum ArgKeys {
    Inline([ArgKey; INLINE_ARGS], usize),
    Heap(Vec<ArgKey>),
}

impl ProbeKey {
    /// The key of a call with these arguments (the alias part only when
    /// the function mutates an input).
    pub(crate) fn of(args: &[Arg], meta: &StaticMeta) -> ProbeKey {
        ProbeKey::compute(args, meta.mutates_inputs, false)
    }

    /// The key with its alias part computed even where the function
    /// mutates no input (and the cache's key leaves it out): `explain`
    /// reports which arguments are the same tensor.
    pub(crate) fn with_aliases(args: &[Arg]) -> ProbeKey {
        ProbeKey::compute(args, true, false)
    }

    #[inline]
    fn compute(args: &[Arg], with_aliases: bool, check_unusual: bool) -> ProbeKey {
        let mut probe = ProbeKey::empty(args.len());
        probe.fill(args, with_aliases, check_unusual);
        probe
    }

    /// An unfilled key for `n` arguments. A call makes it where it stands
    /// and [`fill`](Self::fill)s it there: the inline keys are a few
    /// hundred bytes, and moving them cost a small call more than
    /// computing them.
    #[inline]
    pub(crate) fn empty(n: usize) -> ProbeKey {
        let args =
            if n <= INLINE_ARGS { ArgKeys::Inline([ArgKey::FILLER; INLINE_ARGS], n) } else { ArgKeys::Heap(vec![ArgKey::FILLER; n]) };
        ProbeKey { grad_enabled: is_grad_enabled(), args, geoms: [None; GEOM_ARGS], unusual: None, has_view: false }
    }

    /// Computes the key of `args` (of the length given to
    /// [`empty`](Self::empty)) in place, with the alias part when
    /// `with_aliases`. With `check_unusual` it also checks
    /// `eager_fallback::unusual_autograd_state`: each view is checked before
    /// its key is computed (which may regenerate its history), and the
    /// first unusual one stops the computation (`unusual` says which).
    pub(crate) fn fill(&mut self, args: &[Arg], with_aliases: bool, check_unusual: bool) {
        let slots = match &mut self.args {
            ArgKeys::Inline(a, n) => &mut a[..*n],
            ArgKeys::Heap(v) => &mut v[..],
        };
        // Whether two distinct tensors share a storage: only then can any
        // overlap, and only then are the geometries compared.
        let mut shared = false;
        // Each tensor's (storage root, tensor) addresses, read once, so that
        // the alias pass compares integers (a call has n^2/2 pairs).
        let mut inline = [(0usize, 0usize); INLINE_ARGS];
        let heap: Vec<(usize, usize)>;
        let ids: &[(usize, usize)] = if !with_aliases {
            &[]
        } else if args.len() <= INLINE_ARGS {
            for (id, a) in inline.iter_mut().zip(args) {
                *id = a.tensor().map_or((0, 0), Tensor::identity);
            }
            &inline[..args.len()]
        } else {
            heap = args.iter().map(|a| a.tensor().map_or((0, 0), Tensor::identity)).collect();
            &heap
        };
        for (i, slot) in slots.iter_mut().enumerate() {
            match ArgKey::of(args, ids, i, check_unusual) {
                Ok((k, geom, view)) => {
                    self.has_view |= view;
                    if let Some(g) = self.geoms.get_mut(i) {
                        *g = geom;
                    }
                    shared |= k.same_as as usize == i && k.storage_as as usize != i;
                    *slot = k;
                }
                Err(why) => {
                    self.unusual = Some((i, why));
                    return;
                }
            }
        }
        if shared {
            mark_overlaps(args, slots);
        }
    }

    /// Argument `p`'s geometry, where the key's pass read one.
    pub(crate) fn geom(&self, p: usize) -> Option<Geom> {
        self.geoms.get(p).copied().flatten()
    }

    fn args(&self) -> &[ArgKey] {
        match &self.args {
            ArgKeys::Inline(a, n) => &a[..*n],
            ArgKeys::Heap(v) => v,
        }
    }

    fn hash(&self) -> u64 {
        key_hash(self.grad_enabled, self.args())
    }

    /// Grad mode when the key was computed.
    pub(crate) fn grad_enabled(&self) -> bool {
        self.grad_enabled
    }

    /// Whether argument `p` is a tensor that requires grad (as
    /// `Tensor::requires_grad` answered when the key was computed).
    pub(crate) fn requires_grad(&self, p: usize) -> bool {
        self.args().get(p).is_some_and(|k| k.requires_grad)
    }

    /// Whether argument `p` is a tensor that is a leaf (as above).
    pub(crate) fn is_leaf(&self, p: usize) -> bool {
        self.args().get(p).is_some_and(|k| k.is_leaf)
    }

    /// The alias pattern of the key.
    pub(crate) fn pattern(&self) -> AliasPattern {
        pattern_of(self.args())
    }

    fn matches(&self, key: &GuardKey) -> bool {
        key.grad_enabled == self.grad_enabled && key.args == self.args()
    }

    fn to_owned(&self) -> GuardKey {
        GuardKey { grad_enabled: self.grad_enabled, args: self.args().to_vec() }
    }
}

/// One hash for a probe and the key it equals. The hash never leaves the
/// process and the keys are not chosen by an adversary, so a fast
/// multiply-rotate hash does (SipHash cost a tenth of a small call).
fn key_hash(grad_enabled: bool, args: &[ArgKey]) -> u64 {
    let mut h = KeyHasher(0);
    grad_enabled.hash(&mut h);
    args.hash(&mut h);
    h.finish()
}

/// The multiply-rotate hash of [`key_hash`].
struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.add(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The table is keyed by [`key_hash`] already: its own hasher passes the
/// hash through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; any other input still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Hash for ArgKey {
    // Two words instead of nine fields: hashing is on every call. Equal
    // keys pack equally, which is all `Hash` needs.
    fn hash<H: Hasher>(&self, h: &mut H) {
        let a = u64::from(self.dtype)
            | u64::from(self.device.0) << 8
            | u64::from(self.requires_grad) << 16
            | u64::from(self.is_leaf) << 17
            | u64::from(self.overlaps) << 18
            | u64::from(self.device.1) << 32;
        h.write_u64(a);
        h.write_u64(u64::from(self.rank) ^ u64::from(self.same_as) << 21 ^ u64::from(self.storage_as) << 42);
    }
}

impl ArgKey {
    /// What a scalar argument contributes.
    const SCALAR: ArgKey = ArgKey {
        dtype: u8::MAX,
        device: (0, 0),
        requires_grad: false,
        is_leaf: false,
        rank: 0,
        same_as: 0,
        storage_as: 0,
        overlaps: false,
    };

    /// The filler of the slots a key does not use: all zeros, which costs
    /// less to write than any other value.
    const FILLER: ArgKey =
        ArgKey { dtype: 0, device: (0, 0), requires_grad: false, is_leaf: false, rank: 0, same_as: 0, storage_as: 0, overlaps: false };

    /// Argument `i`'s key, without `overlaps` (see `overlaps.rs`).
    /// `Err`: with `check_unusual`, why the argument is in an autograd
    /// state the compiled paths do not model.
    /// With it, the argument's geometry where [`autograd_facts`] read one.
    /// `ids`: every argument's [`Tensor::identity`] (`(0, 0)` for a
    /// scalar), or empty for a key without its alias part.
    fn of(
        args: &[Arg],
        ids: &[(usize, usize)],
        i: usize,
        check_unusual: bool,
    ) -> std::result::Result<(ArgKey, Option<Geom>, bool), &'static str> {
        let Some(t) = args[i].tensor() else {
            return Ok((ArgKey { same_as: i as u32, storage_as: i as u32, ..ArgKey::SCALAR }, None, false));
        };
        // One pass over the earlier arguments: the first over the same
        // storage, and the first that is this very tensor (which shares it).
        let (mut same_as, mut storage_as) = (i, i);
        if let Some(&(root, me)) = ids.get(i) {
            for (j, &(r, u)) in ids[..i].iter().enumerate() {
                if r == root {
                    storage_as = storage_as.min(j);
                    if u == me {
                        same_as = j;
                        break;
                    }
                }
            }
        }
        let (requires_grad, is_leaf, rank, geom, view) = autograd_facts(t, check_unusual)?;
        let key = ArgKey {
            dtype: t.dtype() as u8,
            device: match t.device() {
                crate::Device::Cpu => (0, 0),
                crate::Device::Cuda(o) => (1, o as u32),
            },
            requires_grad,
            is_leaf,
            rank,
            same_as: same_as as u32,
            storage_as: storage_as as u32,
            overlaps: false,
        };
        Ok((key, geom, view))
    }
}

/// What [`autograd_facts`] reads of a tensor: `requires_grad`, `is_leaf`,
/// rank, geometry, and whether it is a view.
type Facts = (bool, bool, u32, Option<Geom>, bool);

/// `requires_grad`, `is_leaf`, rank and geometry of `t`, with one look at
/// its state when it is not a view (a view's history may need regenerating
/// from its base, which the full accessors do; its geometry is not kept).
/// `Err`: with `check_unusual`, why a view is in an autograd state the
/// compiled paths do not model (checked before its history is touched).
fn autograd_facts(t: &Tensor, check_unusual: bool) -> std::result::Result<Facts, &'static str> {
    {
        let s = t.state();
        if s.ag.view.is_none() {
            let has_fn = s.ag.grad_fn.is_some();
            return Ok((s.ag.requires_grad || has_fn, !has_fn, s.layout.rank() as u32, Geom::of(&s.layout, t.storage_len()), false));
        }
    }
    if let Some(why) = check_unusual.then(|| super::eager_fallback::unusual_state(t)).flatten() {
        return Err(why);
    }
    Ok((t.requires_grad(), t.is_leaf(), t.rank() as u32, None, true))
}

impl GuardKey {
    /// The alias pattern this key holds, for the wrappers' pre-compile
    /// steps.
    pub(crate) fn pattern(&self) -> AliasPattern {
        pattern_of(&self.args)
    }
}

fn pattern_of(keys: &[ArgKey]) -> AliasPattern {
    AliasPattern(
        keys.iter()
            .map(|k| ArgAlias {
                is_tensor: k.dtype != u8::MAX,
                same_as: k.same_as as usize,
                storage_as: k.storage_as as usize,
                overlaps: k.overlaps,
            })
            .collect(),
    )
}

/// One specialisation: the plan the wrapper chain built for one key
/// (`wrappers::CallPlan`: the wrappers' decisions, the functional graph,
/// and, for calls that record gradients, the training plan built on first
/// use).
#[derive(Debug)]
pub(crate) struct Specialization {
    pub(crate) plan: CallPlan,
}

impl Specialization {
    /// Runs the wrapper chain's pre-compile steps for this key.
    fn build(g: &Graph, meta: &StaticMeta, key: &GuardKey) -> Result<Specialization> {
        let requires_grad = key.args.iter().map(|k| k.requires_grad).collect();
        Ok(Specialization { plan: CallPlan::build(g, meta, &key.pattern(), requires_grad)? })
    }
}

/// How many specialisations one compiled function keeps (see the module
/// doc). Real programs use a handful; the bound only matters for callers
/// that vary argument patterns without end.
pub(crate) const DEFAULT_CAPACITY: usize = 64;

struct Entry {
    key: GuardKey,
    spec: Arc<Specialization>,
    /// The cache's clock at the last hit: the entry with the smallest is
    /// the least recently used.
    last_used: AtomicU64,
}

#[derive(Default)]
struct Table {
    /// By key hash; a bucket holds more than one entry only on a collision.
    by_hash: HashMap<u64, Vec<Entry>, BuildHasherDefault<PassThrough>>,
    len: usize,
}

impl Table {
    fn find(&self, hash: u64, probe: &ProbeKey) -> Option<&Entry> {
        self.by_hash.get(&hash)?.iter().find(|e| probe.matches(&e.key))
    }

    /// Drops the least recently used entry. Linear in the capacity, and
    /// run only on a miss, which builds a specialisation anyway.
    fn evict_one(&mut self) -> bool {
        let oldest =
            self.by_hash.iter().flat_map(|(h, b)| b.iter().enumerate().map(move |(i, e)| (e.last_used.load(Relaxed), *h, i))).min();
        let Some((_, hash, i)) = oldest else { return false };
        let Some(bucket) = self.by_hash.get_mut(&hash) else { return false };
        bucket.swap_remove(i);
        if bucket.is_empty() {
            self.by_hash.remove(&hash);
        }
        self.len -= 1;
        true
    }
}

/// The specialisations of a compiled function: a hashed LRU cache of at
/// most `capacity` entries, shared by every thread that calls the function.
/// Hits take the read lock only (and allocate nothing); a miss builds the
/// specialisation with no lock held, then inserts it unless another thread
/// inserted the same key meanwhile.
pub(crate) struct SpecCache {
    table: RwLock<Table>,
    clock: AtomicU64,
    capacity: usize,
    /// The last call's key, by argument identity (`last_call.rs`).
    pub(super) last: super::last_call::LastCall,
}

impl Default for SpecCache {
    fn default() -> Self {
        SpecCache::with_capacity(DEFAULT_CAPACITY)
    }
}

impl std::fmt::Debug for SpecCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpecCache").field("len", &self.len()).field("capacity", &self.capacity).finish()
    }
}

impl SpecCache {
    /// An empty cache holding at most `capacity` (at least 1) entries.
    pub(crate) fn with_capacity(capacity: usize) -> SpecCache {
        SpecCache { table: RwLock::default(), clock: AtomicU64::new(0), capacity: capacity.max(1), last: Default::default() }
    }

    /// The cached specialisation for this call, if any.
    fn lookup(&self, hash: u64, probe: &ProbeKey) -> Option<Arc<Specialization>> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        let e = table.find(hash, probe)?;
        // A tick without a read-modify-write (a hit's atomics are its
        // cost): racing hits may share a tick, which only blurs the order
        // among entries used at the same moment.
        let now = self.clock.load(Relaxed).wrapping_add(1);
        self.clock.store(now, Relaxed);
        e.last_used.store(now, Relaxed);
        Some(e.spec.clone())
    }

    /// The specialisation for a call with these arguments, built on a miss.
    pub(crate) fn get(&self, g: &Graph, meta: &StaticMeta, args: &[Arg]) -> Result<Arc<Specialization>> {
        self.get_probed(g, meta, &ProbeKey::of(args, meta))
    }

    /// [`get`](Self::get) with the call's key already computed.
    pub(crate) fn get_probed(&self, g: &Graph, meta: &StaticMeta, probe: &ProbeKey) -> Result<Arc<Specialization>> {
        let hash = probe.hash();
        if let Some(spec) = self.lookup(hash, probe) {
            return Ok(spec);
        }
        let key = probe.to_owned();
        let spec = Arc::new(Specialization::build(g, meta, &key)?);
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let now = self.clock.fetch_add(1, Relaxed).wrapping_add(1);
        if let Some(e) = table.find(hash, probe) {
            // Built by another thread meanwhile: keep one specialisation.
            e.last_used.store(now, Relaxed);
            return Ok(e.spec.clone());
        }
        while table.len >= self.capacity && table.evict_one() {}
        table.by_hash.entry(hash).or_default().push(Entry { key, spec: spec.clone(), last_used: AtomicU64::new(now) });
        table.len += 1;
        Ok(spec)
    }

    /// True when a call with these arguments would hit the cache. Computes
    /// the key and looks it up exactly as a call does.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn contains(&self, meta: &StaticMeta, args: &[Arg]) -> bool {
        let probe = ProbeKey::of(args, meta);
        self.lookup(probe.hash(), &probe).is_some()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.read().unwrap_or_else(|e| e.into_inner()).len
    }
}

// The probe lives here, with the cache it inspects.
#[cfg(feature = "test-hooks")]
impl super::CompiledFn {
    /// Whether a call with these arguments finds its specialisation cached:
    /// the guard key and lookup of [`__call`](super::CompiledFn::__call),
    /// nothing else. For tests of the allocation-free hit path
    /// (`testing::cache_probe`).
    pub(crate) fn cache_probe(&self, args: &[Arg]) -> bool {
        self.cache.contains(&self.meta, args)
    }
}

#[cfg(test)]
mod tests;
