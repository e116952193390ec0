//! Reduction kernels as CUDA C: a [`Kernel`] whose body holds a reduction
//! (`sum`, `mean`, `sum_dim`, `mean_dim`, `amax_dim`, `var_dim`, `softmax`,
//! `log_softmax`) with its prologue and epilogue ([`Kernel::prologue`]).
//!
//! Every operand, the output included, is laid out over the reduction's
//! input shape `S` (of the rank the unit is rendered for), stride 0 where
//! it broadcasts; an output with one value per row has stride 0 along the
//! reduced dims. A *row* is the set of elements one output folds (the
//! softmax dim's elements for softmax). [`pack_reduce_params`] orders the
//! dims of `S` as its kept dims, then its reduced dims: a row is an index
//! of the first `nkept` dims, an element of the row an index of the rest.
//!
//! # Launch
//! Rows are spread over the grid (a grid-stride loop over rows). Long rows
//! take a whole block each: each thread folds every `blockDim.x`-th
//! element, then the block combines its threads' values by warp shuffles
//! (`__shfl_down_sync`) and one value per warp through shared memory, and
//! every thread gets the row's value. Short rows (`warp_rows`: at most 64
//! elements) take one warp each, combined by shuffles alone.
//! [`pack_reduce_params`] picks the mode, the block and the grid.
//!
//! # Per row
//! 1. The prologue runs per loaded element (`aot_pro_<name>`, the body's
//!    own ops, as the elementwise renderer emits them), and its value is
//!    folded: `sum`/`mean`/`var` in `double` for float dtypes (as the CPU
//!    backend, which accumulates every float sum in f64), integer and bool
//!    sums in `long long` (wrapping, as eager), `amax` with NaN propagating
//!    (of floats in `double`, exact). `mean` divides by the row's length
//!    (an empty row gives NaN, as eager); `var` makes a second pass over
//!    the row for the squared deviations from the mean, divided by
//!    `max(0, N - correction)`. The result is rounded to the reduction's
//!    dtype once (f16/bf16 with a single rounding from the double), as
//!    eager's is.
//! 2. softmax/log_softmax make three passes: the row's maximum (NaN
//!    ignored), the f64 sum of `exp(x - max)` (`exp` in the compute type),
//!    then each element `exp(x - max) / sum` (or `x - max - log(sum)`) in
//!    the compute type, rounded to the storage type: the CPU backend's
//!    arithmetic. The prologue is recomputed in each pass rather than kept.
//! 3. The epilogue (`aot_epi_<name>`) runs on the reduced value: once per
//!    row (`epi_len` 1), or at every element of the row (`epi_len` the
//!    row's length: softmax, or a `keepdim` reduction broadcast back over
//!    the row), reading its own inputs there, and writes the output.
//!
//! Sums combine in another order than the CPU's, so a float result may
//! differ from the CPU backend's in the last bits of the f64 accumulator
//! (f32 and half results almost never; f64 results by an ulp or so).
//!
//! # ABI
//! As the elementwise kernels' (`render.rs`): `<name>(T *out, const T0
//! *in0, .., const aot_params_<name> p)`, `p` a sequence of 8-byte words:
//!
//! | field | words |
//! |---|---|
//! | `long long rows`, `row_len`, `epi_len`, `warp_rows`, `nkept` | 5 |
//! | `long long sizes[rank]`: `S`'s kept dims, then its reduced dims | rank |
//! | `long long out_offset`, `out_strides[rank]` (same order) | 1 + rank |
//! | per input `j`: `in<j>_offset`, `in<j>_strides[rank]` | 1 + rank each |
//! | `double scalars[slots]` | slots |
//!
//! The block size is a multiple of 32, at most 1024.

use super::body::{self, Helper};
use super::{DType, KernelTypes, Operand, RenderError, RenderedKernel, ScalarSlots};
use crate::kernel::Kernel;
use crate::op::OpKind;
use crate::types::{Arg, ValueId};
use std::fmt::Write as _;

/// What the reduction computes per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Row {
    Sum,
    Mean,
    Amax,
    Var,
    Softmax { log: bool },
}

fn row_op(op: OpKind) -> Option<Row> {
    Some(match op {
        OpKind::Sum | OpKind::SumDim => Row::Sum,
        OpKind::Mean | OpKind::MeanDim => Row::Mean,
        OpKind::AmaxDim => Row::Amax,
        OpKind::VarDim => Row::Var,
        OpKind::Softmax => Row::Softmax { log: false },
        OpKind::LogSoftmax => Row::Softmax { log: true },
        _ => return None,
    })
}

/// The block-wide (or warp-wide) combination every reduction uses.
const ROW_REDUCE: &str = "#ifndef AOT_ROW_REDUCE
#define AOT_ROW_REDUCE
/* `v` combined by `f` over the threads of a row: a warp (`warp_rows`), or
   the block, one value per warp through `smem` (33 slots); every thread of
   the row gets the result. Every thread of the block must call it. */
template <class T, class F>
static __device__ __forceinline__ T aot_row_reduce(T v, F f, const T id, const bool warp_rows, T *smem) {
    for (int d = 16; d > 0; d /= 2) v = f(v, __shfl_down_sync(0xffffffffu, v, d));
    if (warp_rows) return __shfl_sync(0xffffffffu, v, 0);
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? smem[lane] : id;
        for (int d = 16; d > 0; d /= 2) v = f(v, __shfl_down_sync(0xffffffffu, v, d));
        if (lane == 0) smem[32] = v;
    }
    __syncthreads();
    v = smem[32];
    __syncthreads();
    return v;
}
#endif
";

/// What the entry point needs to know about the kernel.
struct Shape<'a> {
    name: &'a str,
    rank: usize,
    ins: &'a [DType],
    pro_reads: Vec<bool>,
    epi_reads: Vec<bool>,
}

/// `k` (its reduction at body index `r`) as one CUDA C unit named `name`;
/// see the module doc.
pub(super) fn render(
    k: &Kernel,
    r: usize,
    types: &KernelTypes,
    rank: usize,
    slots: &ScalarSlots,
    name: String,
) -> Result<RenderedKernel, RenderError> {
    let fail = |node: usize, msg: String| RenderError::Body { kernel: k.name.clone(), node, msg };
    let n = &k.body[r];
    let op_name = n.op.name();
    let op = n.kind().and_then(row_op).ok_or_else(|| fail(r, format!("`{op_name}` is not a reduction")))?;
    let arg = n.args.first().and_then(Arg::as_tensor).ok_or_else(|| fail(r, format!("`{op_name}` without an operand")))?;
    let result = n.out.ok_or_else(|| fail(r, "no result".into()))?;
    let inputs = k.num_inputs();
    let pro = k.prologue();
    let epi_node = |i: usize| i >= inputs && i != r && !pro[i];
    let mut epi_reads = vec![false; inputs];
    for (_, node) in k.body.iter().enumerate().filter(|(i, _)| epi_node(*i)) {
        for v in node.tensor_args().filter(|v| v.index() < inputs) {
            epi_reads[v.index()] = true;
        }
    }
    let dtype = |v: ValueId| types.values.get(v.index()).copied().ok_or_else(|| fail(r, format!("{v} has no type")));
    let (vd, rd, od) = (dtype(arg)?, dtype(result)?, dtype(k.out)?);
    let eager_float = vd.is_float() && vd == rd;
    if !matches!(op, Row::Sum | Row::Amax) && !eager_float {
        return Err(fail(r, format!("`{op_name}` of {vd:?} to {rd:?}: only floats, to their own dtype")));
    }
    // Folds accumulate in double, integer and bool sums and maxima in long long.
    let acc = if vd.is_float() { DType::F64 } else { DType::I64 };
    let pro_body = body::render_part(k, types, slots, &|i| i >= inputs && pro[i], None, arg)?;
    let epi_body = body::render_part(k, types, slots, &epi_node, Some(result), k.out)?;
    // Softmax finishes in the operand's compute type; the rest from the accumulator.
    let fin_from = match (op, vd) {
        (Row::Softmax { .. }, DType::F64) => DType::F64,
        (Row::Softmax { .. }, _) => DType::F32,
        _ => acc,
    };
    let (fin, fin_helpers) = body::convert_fn(&format!("aot_fin_{name}"), fin_from, rd);
    let correction = match op {
        Row::Var => Some(match n.args.get(2) {
            Some(Arg::Scalar(e)) => {
                body::scalar64(e, slots).ok_or_else(|| fail(r, format!("`{op_name}`: correction {e:?} has no slot")))?
            }
            other => return Err(fail(r, format!("`{op_name}`: correction {other:?}"))),
        }),
        _ => None,
    };

    let helpers: Vec<Helper> = pro_body.helpers.iter().chain(&epi_body.helpers).chain(&fin_helpers).copied().collect();
    let mut s = super::preamble(k, types, rank, &helpers);
    s.push_str(ROW_REDUCE);
    let heads = ["rows", "row_len", "epi_len", "warp_rows", "nkept"];
    super::params_struct(&mut s, &name, &heads, rank, inputs, slots.exprs().len());
    let ins = &types.values[..inputs];
    part_fn(&mut s, &format!("aot_pro_{name}"), &name, ins, None, vd.compute(), &pro_body, &|v| v);
    let store = |v: String| od.store(&v);
    part_fn(&mut s, &format!("aot_epi_{name}"), &name, ins, Some(rd), od.storage(), &epi_body, &store);
    s.push_str(&fin);
    let shape = Shape { name: &name, rank, ins, pro_reads: pro[..inputs].to_vec(), epi_reads };
    entry(&mut s, &shape, op, acc, vd, rd, od, correction.as_deref());
    Ok(RenderedKernel { name, source: s })
}

/// `static __device__ <ret> <fname>(c0, .., [c<inputs>,] p)`: a part of
/// the body over the loaded inputs (and the reduced value `preset`).
#[allow(clippy::too_many_arguments)]
fn part_fn(
    s: &mut String,
    fname: &str,
    name: &str,
    ins: &[DType],
    preset: Option<DType>,
    ret: &str,
    body: &body::Body,
    finish: &dyn Fn(String) -> String,
) {
    let mut params: Vec<String> = ins.iter().enumerate().map(|(j, d)| format!("const {} c{j}", d.compute())).collect();
    if let Some(d) = preset {
        params.push(format!("const {} c{}", d.compute(), ins.len()));
    }
    params.push(format!("const aot_params_{name} &p"));
    let _ = writeln!(s, "static __device__ __forceinline__ {ret} {fname}({}) {{", params.join(", "));
    if !body.lines.iter().any(|l| l.contains("p.scalars")) {
        let _ = writeln!(s, "    (void)p;");
    }
    for l in &body.lines {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(s, "    return {};\n}}", finish(format!("c{}", body.out)));
}

/// The arguments of a part: each input it reads, loaded at its offset
/// `o<j>`; a zero for the others.
fn args(ins: &[DType], reads: &[bool]) -> Vec<String> {
    ins.iter()
        .zip(reads)
        .enumerate()
        .map(|(j, (d, &r))| if r { d.load(&format!("in{j}[o{j}]")) } else { format!("({})0", d.compute()) })
        .collect()
}

/// Adds `index`'s position over dims `from` down to `to` (C expressions)
/// to the offsets `<out>` (output) and `<o><j>` (inputs). The walk stops
/// where the rest of the index is 0, which also keeps an empty row's
/// position 0 from dividing by its dims' size 0.
#[allow(clippy::too_many_arguments)]
fn unravel(s: &mut String, sh: &Shape<'_>, pad: &str, index: &str, from: &str, to: &str, out: &str, o: &str) {
    if sh.rank == 0 {
        return;
    }
    let _ = writeln!(s, "{pad}{{\n{pad}    long long rem = {index};\n{pad}    for (int d = {from}; rem != 0 && d >= {to}; d--) {{");
    let _ = writeln!(s, "{pad}        const long long q = rem / p.sizes[d];\n{pad}        const long long ix = rem - q * p.sizes[d];");
    let _ = writeln!(s, "{pad}        rem = q;\n{pad}        {out} += ix * p.out_strides[d];");
    for j in 0..sh.ins.len() {
        let _ = writeln!(s, "{pad}        {o}{j} += ix * p.in{j}_strides[d];");
    }
    let _ = writeln!(s, "{pad}    }}\n{pad}}}");
}

/// `for (j ..) { <offsets of element j>; <body> }` over `len` elements of
/// the row, each thread of the row taking every `width`-th.
fn each(s: &mut String, sh: &Shape<'_>, len: &str, body: &str) {
    let _ = writeln!(s, "        for (long long j = tid; j < p.{len}; j += width) {{\n            long long o = bo;");
    for j in 0..sh.ins.len() {
        let _ = writeln!(s, "            long long o{j} = b{j};");
    }
    unravel(s, sh, "            ", "j", &format!("{} - 1", sh.rank), "(int)p.nkept", "o", "o");
    // Not every pass reads every operand.
    let unused: Vec<String> = std::iter::once("(void)o;".to_string()).chain((0..sh.ins.len()).map(|j| format!("(void)o{j};"))).collect();
    let _ = writeln!(s, "            {}", unused.join(" "));
    s.push_str(body);
    s.push_str("        }\n");
}

/// The entry point (module doc, "Per row").
#[allow(clippy::too_many_arguments)]
fn entry(s: &mut String, sh: &Shape<'_>, op: Row, acc: DType, vd: DType, rd: DType, od: DType, correction: Option<&str>) {
    let name = sh.name;
    let (at, vc, rc) = (acc.compute(), vd.compute(), rd.compute());
    let mut params = vec![format!("{} *out", od.storage())];
    params.extend(sh.ins.iter().enumerate().map(|(j, d)| format!("const {} *in{j}", d.storage())));
    params.push(format!("const aot_params_{name} p"));
    let _ = writeln!(s, "extern \"C\" __global__ void {name}({}) {{", params.join(", "));
    let _ = writeln!(s, "    __shared__ {at} aot_smem[33];");
    s.push_str(
        "    const bool wr = p.warp_rows != 0;
    const long long per = wr ? (long long)(blockDim.x / 32) : 1LL;
    const long long width = wr ? 32LL : (long long)blockDim.x;
    const long long tid = wr ? (long long)(threadIdx.x % 32) : (long long)threadIdx.x;
    const long long sub = wr ? (long long)(threadIdx.x / 32) : 0LL;
    for (long long first = (long long)blockIdx.x * per; first < p.rows; first += (long long)gridDim.x * per) {
        const long long row = first + sub;
        if (row >= p.rows) continue;
        long long bo = p.out_offset;
",
    );
    for j in 0..sh.ins.len() {
        let _ = writeln!(s, "        long long b{j} = p.in{j}_offset;");
    }
    unravel(s, sh, "        ", "row", "(int)p.nkept - 1", "0", "bo", "b");
    let pro = format!("aot_pro_{name}({}, p)", args(sh.ins, &sh.pro_reads).join(", "));
    let epi = |v: &str| format!("aot_epi_{name}({}, {v}, p)", args(sh.ins, &sh.epi_reads).join(", "));
    let fold = |s: &mut String, body: &str| each(s, sh, "row_len", &format!("            const {vc} x = {pro};\n{body}"));
    let reduce = |s: &mut String, v: &str, f: &str, id: &str| {
        let _ = writeln!(s, "        {v} = aot_row_reduce({v}, []({at} a, {at} b) {{ return {f}; }}, ({at})({id}), wr, aot_smem);");
    };
    let neg_inf = body::literal64(f64::NEG_INFINITY);
    let add = if acc == DType::I64 { "(long long)((unsigned long long)a + (unsigned long long)b)" } else { "a + b" };
    match op {
        Row::Sum | Row::Mean | Row::Amax => {
            let (f, id) = match (op, acc) {
                (Row::Amax, DType::I64) => ("a >= b ? a : b", "-0x7fffffffffffffffLL - 1".to_string()),
                (Row::Amax, _) => ("(a != a || a >= b) ? a : b", neg_inf),
                _ => (add, "0".to_string()),
            };
            let _ = writeln!(s, "        {at} acc = ({at})({id});");
            fold(s, &format!("            {{ const {at} a = acc, b = ({at})x; acc = {f}; }}\n"));
            reduce(s, "acc", f, &id);
            let v = if op == Row::Mean { "acc / (double)p.row_len" } else { "acc" };
            let _ = writeln!(s, "        const {rc} r = aot_fin_{name}({v});");
            each(s, sh, "epi_len", &format!("            out[o] = {};\n", epi("r")));
        }
        Row::Var => {
            s.push_str("        double acc = 0.0;\n");
            fold(s, "            acc += (double)x;\n");
            reduce(s, "acc", "a + b", "0");
            s.push_str("        const double mean = acc / (double)p.row_len;\n        double sq = 0.0;\n");
            fold(s, "            const double dev = (double)x - mean;\n            sq += dev * dev;\n");
            reduce(s, "sq", "a + b", "0");
            let _ = writeln!(s, "        double div = (double)p.row_len - ({});", correction.unwrap_or("0.0"));
            s.push_str("        if (!(div >= 0.0)) div = 0.0;\n");
            let _ = writeln!(s, "        const {rc} r = aot_fin_{name}(sq / div);");
            each(s, sh, "epi_len", &format!("            out[o] = {};\n", epi("r")));
        }
        Row::Softmax { log } => {
            let exp = if vd == DType::F64 { "exp" } else { "expf" };
            let _ = writeln!(s, "        double m = {neg_inf};");
            fold(s, "            if ((double)x > m) m = (double)x;\n");
            reduce(s, "m", "b > a ? b : a", &neg_inf);
            let _ = writeln!(s, "        const {vc} mc = ({vc})m;\n        double acc = 0.0;");
            fold(s, &format!("            acc += (double){exp}(({vc})(x - mc));\n"));
            reduce(s, "acc", "a + b", "0");
            let half = matches!(vd, DType::F16 | DType::BF16);
            let (fin, y) = if log && half {
                // As eager's: the row's sum and its log are rounded to the
                // element type (PyTorch's CPU kernel stores them in it).
                let r = format!("aot_fin_{name}");
                (format!("{r}((float)log((double){r}((float)acc)))"), format!("({vc})(x - mc) - fin"))
            } else if log {
                (format!("({vc})log(acc)"), format!("({vc})(x - mc) - fin"))
            } else {
                (format!("({vc})acc"), format!("{exp}(({vc})(x - mc)) / fin"))
            };
            let _ = writeln!(s, "        const {vc} fin = {fin};");
            let body = format!(
                "            const {vc} x = {pro};\n            const {rc} y = aot_fin_{name}({y});\n            out[o] = {};\n",
                epi("y")
            );
            each(s, sh, "epi_len", &body);
        }
    }
    s.push_str("    }\n}\n");
}

/// How to launch a reduction kernel: its parameter words, grid and block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceLaunch {
    /// The kernel's parameter words (module doc, "ABI").
    pub words: Vec<u64>,
    /// Blocks in the grid: one per row, or per up to four short rows (at most 65535).
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// Whether the kernel writes nothing (no rows, or empty rows written
    /// along the row): then it need not be launched.
    pub empty: bool,
}

/// The launch of a reduction kernel over `shape` (`S`, the reduction's
/// input shape; the kernel rendered for its rank): `reduced` marks the
/// reduced dims; `rows_out`: the epilogue writes every element of a row
/// (else one value per row); `out` and `inputs` laid out over `S` (module
/// doc); `scalars` the slot values.
pub fn pack_reduce_params(
    shape: &[i64],
    reduced: &[bool],
    rows_out: bool,
    out: Operand<'_>,
    inputs: &[Operand<'_>],
    scalars: &[f64],
) -> Result<ReduceLaunch, RenderError> {
    let rank = shape.len();
    if reduced.len() != rank {
        return Err(RenderError::Params(format!("a reduced-dims mask of {} for rank {rank}", reduced.len())));
    }
    if let Some(bad) = std::iter::once(&out).chain(inputs).find(|o| o.strides.len() != rank) {
        return Err(RenderError::Params(format!("{} strides for a rank-{rank} reduction", bad.strides.len())));
    }
    if shape.iter().any(|&n| n < 0) {
        return Err(RenderError::Params(format!("sizes {shape:?}")));
    }
    // Kept dims first, then reduced dims, each in order.
    let order: Vec<usize> = (0..rank).filter(|&d| !reduced[d]).chain((0..rank).filter(|&d| reduced[d])).collect();
    let nkept = reduced.iter().filter(|&&r| !r).count();
    let product = |dims: &[usize]| dims.iter().try_fold(1i64, |n, &d| n.checked_mul(shape[d]));
    let too_big = || RenderError::Params(format!("sizes {shape:?} have no element count"));
    let rows = product(&order[..nkept]).ok_or_else(too_big)?;
    let row_len = product(&order[nkept..]).ok_or_else(too_big)?;
    let epi_len = if rows_out { row_len } else { 1 };
    let warp_rows = row_len <= 64;
    let (block, grid) = if warp_rows {
        let warps = rows.clamp(1, 4);
        (32 * warps, (rows + warps - 1) / warps)
    } else {
        let pow2 = u64::try_from(row_len).unwrap_or(u64::MAX).checked_next_power_of_two().unwrap_or(256);
        (pow2.clamp(64, 256) as i64, rows)
    };
    let mut w: Vec<u64> = vec![rows as u64, row_len as u64, epi_len as u64, u64::from(warp_rows), nkept as u64];
    w.extend(order.iter().map(|&d| shape[d] as u64));
    for o in std::iter::once(&out).chain(inputs) {
        w.push(o.offset as u64);
        w.extend(order.iter().map(|&d| o.strides[d] as u64));
    }
    w.extend(scalars.iter().map(|v| v.to_bits()));
    Ok(ReduceLaunch {
        words: w,
        grid: u32::try_from(grid.clamp(1, 65535)).unwrap_or(65535),
        block: u32::try_from(block).unwrap_or(256),
        empty: rows == 0 || epi_len == 0,
    })
}

#[cfg(test)]
mod tests;
