//! The C renderer of the kernel stage: a [`Kernel`] as one complete CUDA C
//! translation unit ([`render_cuda`]), which NVRTC compiles for the GPU and
//! a host C++ compiler compiles, through the shim of [`host`], for tests on
//! the CPU.
//!
//! Each body op is rendered from its one definition,
//! [`super::elementwise::with_op`], called on a recording value, so the C
//! performs the operations the CPU backend performs, in the same order;
//! the f32 transcendental functions are the C functions of
//! [`super::c_math`], rendered once per unit from [`super::math`].
//!
//! # Types
//! Every body value has a [`DType`] and every op a compute dtype
//! ([`KernelTypes`]: the runtime's plan of a call, or
//! [`KernelTypes::infer`]'s from the inputs' dtypes). f32 computes in
//! `float`, f64 in `double`, i64 in `long long`, bool in `bool`; f16 and
//! bf16 load and store `__half` and `__nv_bfloat16` (from
//! `cuda_fp16.h`/`cuda_bf16.h`, included only for them), compute in
//! `float`, and round each op's result to the half type, as eager does.
//! An operand of another dtype than its op's compute dtype is cast first,
//! as eager casts: to f16/bf16 from a double or an integer with a single
//! rounding (through a float rounded to odd), to i64 truncating and
//! saturating (NaN to 0), to bool as `!= 0`, from bool as 0 or 1.
//! Comparisons give `bool`, `where_` selects, `to_dtype`/`cast_like` are
//! the cast alone. Integer arithmetic wraps (through `unsigned long long`,
//! where C defines overflow). A literal scalar of float arithmetic is
//! rendered inline, rounded to the compute type as `Compute::of` rounds it
//! (`1.5f` for `(float)1.5`); a scalar of a comparison, `where_` or integer
//! arithmetic is cast to the compute dtype itself, as eager takes it.
//!
//! # ABI
//! The entry point is `extern "C" __global__ void <name>(T *out, const T0
//! *in0, .., const aot_params_<name> p)`, with `T`, `T0`, .. the storage
//! types of the result and of each input, one pointer per kernel input, in
//! the order of the kernel's loads. A multi-output kernel
//! ([`Kernel::extra_outs`]) takes one more pointer per further value
//! after `out` (`T1 *out1, ..`): every output has `out`'s offset and
//! strides, and each thread writes all of them at the position it computes.
//! `p` is passed by value; every field is 8 bytes, so it is a flat
//! sequence of 8-byte words, in this order ([`pack_params`] builds it):
//!
//! | field | words |
//! |---|---|
//! | `long long numel` | 1 |
//! | `long long contiguous` (non-zero: the fast path, below) | 1 |
//! | `long long sizes[rank]`: the output's shape | rank |
//! | `long long out_offset`, `out_strides[rank]` | 1 + rank |
//! | per input `j`: `in<j>_offset`, `in<j>_strides[rank]` (0 on broadcast dims) | 1 + rank each |
//! | `double scalars[slots]`: the [`ScalarSlots`] values | slots |
//!
//! Arrays of length 0 are left out. Offsets and strides count elements.
//! Shapes and strides are run-time values (the guard key holds neither), so
//! only the rank, the dtype and the body are compiled in. Element `i`
//! (`0 <= i < numel`) is unravelled over `sizes` in row-major order, and
//! each operand's element is `offset + Σ index[d] * strides[d]`. With
//! `contiguous` set (every operand has the row-major strides of `sizes`:
//! none broadcast or permuted), the kernel reads and writes element
//! `offset + i` instead, skipping the index arithmetic, four elements at a
//! time where every operand's `offset` address is aligned to four of its
//! elements, or to 16 bytes (vectorised loads and stores: 16 bytes for
//! f32).
//!
//! A scalar operand that is not a literal (it reads a scalar parameter) has
//! a slot: the runtime evaluates its expression at call time and passes the
//! value as a double ([`scalar_f64`]); the kernel converts it to the
//! compute type.
//!
//! An output may be an input's buffer only with that input's exact layout
//! (an in-place kernel): each element is read, then written, by one thread.
//! Other overlaps are not supported; pointers are not `__restrict__` so
//! that the in-place case stays defined.
//!
//! # Launch and compilation
//! Elementwise kernels: a one-dimensional grid of any size: a grid-stride loop covers `numel`
//! (for example 256 threads a block, and blocks up to a few per
//! multiprocessor). No shared memory, no synchronisation.
//!
//! NVRTC must be given `--fmad=false`, and none of the fast-math options
//! (the defaults `--prec-div=true --prec-sqrt=true --ftz=false` are
//! required): contracting `a * b + c` into an FMA, or approximate division
//! and square root, would change the bits. So compiled, every op except
//! `pow` (both types) and the f64 transcendental functions gives the CPU
//! backend's bits; those call the platform's libm (CUDA's on the GPU, the
//! C library's on the host), as does f32 `sin`/`cos` beyond
//! [`super::math::SIN_COS_LIMIT`], and may differ from the CPU in the last
//! place. (f64 `gelu` calls the platform's `erf`/`erfc`, where the CPU
//! backend has [`super::erf`]'s; even the host's C library differs from
//! it by an ulp at some inputs.) The units were checked by hand with NVRTC
//! 12.9 (`compute_80`, `compute_90`, `--fmad=false`, only `--include-path`
//! to the CUDA runtime headers): every unit of the tests (each kernel, in
//! each dtype, at ranks 0, 1 and 3) compiles without a warning, also
//! concatenated into one program, and its PTX assembles with ptxas 12.9
//! for sm_80 and sm_90.
//!
//! # Reductions
//! A kernel with a reduction (and its prologue and epilogue) is rendered by
//! the `reduce` module: a block (or, for short rows, a warp) per row,
//! shuffles and shared memory, f64 accumulation; its ABI extends this one
//! with the row geometry ([`pack_reduce_params`]) and its launch needs
//! synchronisation (the host shim's fibers).
//!
//! # Not covered yet
//! Integer `pow` of a scalar exponent (eager's op, for its error),
//! non-elementwise kernels other than reductions, vectorised loads on
//! the strided path, and 32-bit index arithmetic for small tensors.
//! The integer/bool units and the f64-to-half conversions were checked
//! through the host shim only (not yet with NVRTC).

mod body;
pub mod fibers;
pub mod host;
mod reduce;
mod segments;
mod types;

pub use reduce::{pack_reduce_params, ReduceLaunch};
pub use segments::{launch_blocks, pack_segments, render_cuda_segments, same_code, segments_per_launch};

pub use types::KernelTypes;

use super::Kernel;
use crate::dtype::DType;
use crate::graph::Op;
use crate::types::{Arg, ScalarError, ScalarExpr, ScalarValue};
use std::fmt::Write as _;

/// The C types of a dtype in a rendered kernel. `Bool` is one byte per
/// element, 0 or 1 (the runtime's bool storage), as C++'s `bool` on every
/// ABI CUDA supports.
impl DType {
    /// The C type of stored elements.
    pub fn storage(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F64 => "double",
            DType::F16 => "__half",
            DType::BF16 => "__nv_bfloat16",
            DType::I64 => "long long",
            DType::Bool => "bool",
        }
    }

    /// The C type the body computes in.
    pub fn compute(self) -> &'static str {
        match self {
            DType::F64 => "double",
            DType::I64 => "long long",
            DType::Bool => "bool",
            DType::F32 | DType::F16 | DType::BF16 => "float",
        }
    }

    /// The CUDA header the storage type needs.
    pub fn header(self) -> Option<&'static str> {
        match self {
            DType::F16 => Some("cuda_fp16.h"),
            DType::BF16 => Some("cuda_bf16.h"),
            _ => None,
        }
    }

    /// `x`, a stored element, in the compute type.
    fn load(self, x: &str) -> String {
        match self {
            DType::F16 => format!("__half2float({x})"),
            DType::BF16 => format!("__bfloat162float({x})"),
            _ => x.to_string(),
        }
    }

    /// `x`, a stored element, as a C `double` (exact for every dtype).
    pub fn to_double(self, x: &str) -> String {
        match self {
            DType::Bool => format!("({x} ? 1.0 : 0.0)"),
            d => format!("(double){}", d.load(x)),
        }
    }

    /// `x`, a C `double`, as a stored element, rounded once as eager's
    /// conversion from f64 rounds (half types through a float rounded to
    /// odd; i64 truncating and saturating, NaN to 0). Needs
    /// [`DType::double_helpers`] in the unit.
    pub fn from_double(self, x: &str) -> String {
        match self {
            DType::F64 => x.to_string(),
            DType::F32 => format!("(float)({x})"),
            DType::F16 => format!("__float2half_rn(aot_f64_to_f32_odd({x}))"),
            DType::BF16 => format!("__float2bfloat16_rn(aot_f64_to_f32_odd({x}))"),
            DType::I64 => format!("aot_f64_to_i64({x})"),
            DType::Bool => format!("(({x}) != 0.0)"),
        }
    }

    /// The C helpers of [`from_double`](Self::from_double), guarded so
    /// that units joined into one translation unit define them once.
    pub fn double_helpers() -> String {
        format!(
            "#ifndef AOT_DOUBLE_HELPERS\n#define AOT_DOUBLE_HELPERS\n{}{}#endif\n",
            body::Helper::F64ToI64.render(),
            body::Helper::F64ToF32Odd.render()
        )
    }

    /// `x`, a computed value, as a stored element (exact: every op's result
    /// is already rounded to the half type).
    fn store(self, x: &str) -> String {
        match self {
            DType::F16 => format!("__float2half_rn({x})"),
            DType::BF16 => format!("__float2bfloat16_rn({x})"),
            _ => x.to_string(),
        }
    }
}

/// The scalar operands of a kernel body that are not literals, in order of
/// first use, each once: slot `k` of the kernel's `scalars` is the value of
/// `exprs()[k]` at call time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScalarSlots {
    exprs: Vec<ScalarExpr>,
}

impl ScalarSlots {
    /// The slots of `k`'s body.
    pub fn of(k: &Kernel) -> ScalarSlots {
        let mut exprs: Vec<ScalarExpr> = Vec::new();
        for n in &k.body {
            for a in &n.args {
                if let Arg::Scalar(e) = a {
                    if e.as_const().is_none() && !exprs.contains(e) {
                        exprs.push(e.clone());
                    }
                }
            }
        }
        ScalarSlots { exprs }
    }

    /// The expressions, by slot.
    pub fn exprs(&self) -> &[ScalarExpr] {
        &self.exprs
    }

    /// The slot of `e`.
    pub fn slot(&self, e: &ScalarExpr) -> Option<usize> {
        self.exprs.iter().position(|x| x == e)
    }

    /// The slots' values for a call with these scalar arguments (indexed by
    /// parameter position, as [`ScalarExpr::eval`] takes them).
    pub fn values(&self, params: &[Option<ScalarValue>]) -> Result<Vec<f64>, ScalarError> {
        self.exprs.iter().map(|e| e.eval(params).map(scalar_f64)).collect()
    }
}

/// A scalar as the kernel receives it: floats as they are, integers
/// converted (as eager's scalar operands are), bools as 0 or 1.
pub fn scalar_f64(v: ScalarValue) -> f64 {
    match v {
        ScalarValue::F64(x) => x,
        ScalarValue::I64(x) => x as f64,
        ScalarValue::Bool(b) => f64::from(u8::from(b)),
    }
}

/// A kernel rendered for one dtype and rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedKernel {
    /// The `extern "C" __global__` entry point: the kernel's name (any
    /// character that C does not allow in a name replaced by `_`).
    pub name: String,
    /// One complete CUDA C translation unit. Units of kernels with
    /// different names may be concatenated into one: the shared helpers
    /// are guarded, the rest is named after the kernel (so one kernel
    /// rendered for two dtypes or ranks needs two names for that).
    pub source: String,
}

/// Why a kernel could not be rendered, or its parameters packed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A body node that cannot be typed or rendered.
    #[error("kernel `{kernel}`: body node {node}: {msg}")]
    Body {
        /// The kernel's name.
        kernel: String,
        /// The body node's index.
        node: usize,
        /// What is wrong.
        msg: String,
    },
    /// The launch parameters could not be packed (sizes, strides or masks
    /// that do not fit the kernel): what is wrong.
    #[error("kernel parameters: {0}")]
    Params(String),
}

/// `k` as CUDA C for inputs of `dtype`, with outputs of rank `rank`;
/// `scalars` are the body's slots ([`ScalarSlots::of`]). The values' types
/// are [`KernelTypes::infer`]'s. See the module doc for the ABI.
pub fn render_cuda(k: &Kernel, dtype: DType, rank: usize, scalars: &ScalarSlots) -> Result<RenderedKernel, RenderError> {
    render_cuda_typed(k, &KernelTypes::infer(k, &vec![dtype; k.num_inputs()])?, rank, scalars)
}

/// [`render_cuda`] with the body values' types given (the runtime's plan of
/// a call, see [`KernelTypes`]).
pub fn render_cuda_typed(k: &Kernel, types: &KernelTypes, rank: usize, scalars: &ScalarSlots) -> Result<RenderedKernel, RenderError> {
    check(k, types)?;
    let name = c_name(k);
    if let Some(r) = k.reduction() {
        if !k.extra_outs.is_empty() {
            return Err(RenderError::Body { kernel: k.name.clone(), node: r, msg: "a multi-output kernel with a reduction".into() });
        }
        return reduce::render(k, r, types, rank, scalars, name);
    }
    let (mut s, ins, outs) = elementwise_parts(k, types, rank, scalars, &name)?;
    entry(&mut s, &name, &ins, &outs, rank, Head::Global);
    Ok(RenderedKernel { name, source: s })
}

/// The types cover the body, and the loads come first, in order.
fn check(k: &Kernel, types: &KernelTypes) -> Result<(), RenderError> {
    if types.values.len() != k.num_values || types.compute.len() != k.num_values {
        return Err(RenderError::Body {
            kernel: k.name.clone(),
            node: 0,
            msg: format!("types for {} of {} values", types.values.len(), k.num_values),
        });
    }
    if let Some((i, n)) = k.body.iter().enumerate().find(|(i, n)| matches!(n.op, Op::Load(j) if j != *i)) {
        return Err(RenderError::Body { kernel: k.name.clone(), node: i, msg: format!("`{}` out of order", n.op.name()) });
    }
    Ok(())
}

/// An elementwise kernel's unit up to its entry: the preamble, the
/// parameter struct and the body function; and the storage dtypes of its
/// inputs and outputs.
fn elementwise_parts(
    k: &Kernel,
    types: &KernelTypes,
    rank: usize,
    scalars: &ScalarSlots,
    name: &str,
) -> Result<(String, Vec<DType>, Vec<DType>), RenderError> {
    let inputs = k.num_inputs();
    let body = body::render_body(k, types, scalars)?;
    let mut s = preamble(k, types, rank, &body.helpers);
    params_struct(&mut s, name, &["numel", "contiguous"], rank, inputs, scalars.exprs().len());
    let ins = types.values[..inputs].to_vec();
    let outs = k.outs().map(|v| types.values.get(v.index()).copied()).collect::<Option<Vec<DType>>>();
    let outs = outs.ok_or_else(|| RenderError::Body { kernel: k.name.clone(), node: 0, msg: "a stored value beyond the body's".into() })?;
    body_fn(&mut s, name, &ins, &outs, &body);
    Ok((s, ins, outs))
}

/// `k`'s name as a C identifier.
fn c_name(k: &Kernel) -> String {
    let name: String = k.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        format!("k_{name}")
    } else {
        name
    }
}

/// The unit's first lines: a comment, the headers its types need, and the
/// guarded helpers.
fn preamble(k: &Kernel, types: &KernelTypes, rank: usize, helpers: &[body::Helper]) -> String {
    let inputs = k.num_inputs();
    let stored = k.outs().filter_map(|v| types.values.get(v.index()));
    let dtypes: Vec<DType> = types.values.iter().take(inputs).chain(stored).copied().collect();
    let mut s = format!("// Kernel `{}` ({dtypes:?}, rank {rank}), generated by aot. NVRTC: --fmad=false.\n", k.name);
    let mut headers: Vec<&str> = types.values.iter().chain(&types.compute).filter_map(|d| d.header()).collect();
    headers.sort_unstable();
    headers.dedup();
    for h in headers {
        let _ = writeln!(s, "#include <{h}>");
    }
    s.push_str(VEC4);
    let mut helpers = helpers.to_vec();
    helpers.sort();
    helpers.dedup();
    for h in helpers {
        let guard = format!("AOT_HELPER_{}", h.name().to_uppercase());
        let _ = write!(s, "#ifndef {guard}\n#define {guard}\n{}#endif\n", h.render());
    }
    s
}

/// Four consecutive elements as one aligned value (at most 16 bytes of
/// alignment, the widest GPU access), for the vectorised loads of the
/// contiguous path (`entry`).
const VEC4: &str = "#ifndef AOT_VEC4
#define AOT_VEC4
template <class T> struct alignas(4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16) aot_vec4 { T v[4]; };
#endif
";

/// `struct aot_params_<name>`: the `heads` counts, then the sizes, the
/// output's and each input's offset and strides, and the scalar slots (an
/// empty array is left out, C has none).
fn params_struct(s: &mut String, name: &str, heads: &[&str], rank: usize, inputs: usize, slots: usize) {
    let arr = |s: &mut String, ty: &str, field: String, n: usize| {
        if n > 0 {
            let _ = writeln!(s, "    {ty} {field}[{n}];");
        }
    };
    let _ = writeln!(s, "struct aot_params_{name} {{");
    for f in heads {
        let _ = writeln!(s, "    long long {f};");
    }
    arr(s, "long long", "sizes".into(), rank);
    let _ = writeln!(s, "    long long out_offset;");
    arr(s, "long long", "out_strides".into(), rank);
    for j in 0..inputs {
        let _ = writeln!(s, "    long long in{j}_offset;");
        arr(s, "long long", format!("in{j}_strides"), rank);
    }
    arr(s, "double", "scalars".into(), slots);
    let _ = writeln!(s, "}};");
}

/// `aot_body_<name>(c0, .., p, r1, ..)`: the stored value from the loaded
/// inputs; a multi-output kernel's further values are assigned to `r1 ..`.
fn body_fn(s: &mut String, name: &str, ins: &[DType], outs: &[DType], body: &body::Body) {
    let st = outs[0].storage();
    let mut params: Vec<String> = ins.iter().enumerate().map(|(j, d)| format!("const {} c{j}", d.compute())).collect();
    params.push(format!("const aot_params_{name} &p"));
    params.extend(outs.iter().enumerate().skip(1).map(|(j, d)| format!("{} &r{j}", d.storage())));
    let _ = writeln!(s, "static __device__ __forceinline__ {st} aot_body_{name}({}) {{", params.join(", "));
    if !body.lines.iter().any(|l| l.contains("p.scalars")) {
        let _ = writeln!(s, "    (void)p;");
    }
    for l in &body.lines {
        let _ = writeln!(s, "{l}");
    }
    for (j, (d, v)) in outs.iter().skip(1).zip(&body.extra).enumerate() {
        let _ = writeln!(s, "    r{} = {};", j + 1, d.store(&format!("c{v}")));
    }
    let _ = writeln!(s, "    return {};\n}}", outs[0].store(&format!("c{}", body.out)));
}

/// Whose blocks an entry's loop spreads over: the launch's (the kernel's
/// entry point), or a segment's of a launch of segments (`segments.rs`),
/// given as `block` and `blocks`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Head {
    Global,
    Segment,
}

/// The entry point: the grid-stride loop, with the contiguous fast path.
/// A multi-output kernel's further outputs are `out1 ..`, at `out`'s
/// positions. For a [`Head::Segment`], the same loop as the device
/// function `aot_run_<name>`.
fn entry(s: &mut String, name: &str, ins: &[DType], outs: &[DType], rank: usize, head: Head) {
    let inputs = ins.len();
    let mut params = vec![format!("{} *out", outs[0].storage())];
    params.extend(outs.iter().enumerate().skip(1).map(|(j, d)| format!("{} *out{j}", d.storage())));
    params.extend(ins.iter().enumerate().map(|(j, d)| format!("const {} *in{j}", d.storage())));
    let call = |idx: &dyn Fn(usize) -> String, at: &str| -> String {
        let mut args: Vec<String> = ins.iter().enumerate().map(|(j, d)| d.load(&format!("in{j}[{}]", idx(j)))).collect();
        args.push("p".into());
        args.extend((1..outs.len()).map(|j| format!("out{j}[{at}]")));
        format!("aot_body_{name}({})", args.join(", "))
    };
    if head == Head::Global {
        params.push(format!("const aot_params_{name} p"));
        let _ = writeln!(s, "extern \"C\" __global__ void {name}({}) {{", params.join(", "));
        s.push_str("    const long long step = (long long)blockDim.x * gridDim.x;\n");
        s.push_str("    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    } else {
        params.extend([format!("const aot_params_{name} &p"), "const long long block".into(), "const long long blocks".into()]);
        let _ = writeln!(s, "static __device__ __forceinline__ void aot_run_{name}({}) {{", params.join(", "));
        s.push_str("    const long long step = (long long)blockDim.x * blocks;\n");
        s.push_str("    const long long first = block * blockDim.x + threadIdx.x;\n");
    }
    s.push_str("    if (p.contiguous) {\n");
    contiguous_vec4(s, name, ins, outs);
    s.push_str("        for (long long i = first; i < p.numel; i += step) {\n");
    let _ = writeln!(s, "            out[p.out_offset + i] = {};", call(&|j| format!("p.in{j}_offset + i"), "p.out_offset + i"));
    s.push_str("        }\n        return;\n    }\n");
    s.push_str("    for (long long i = first; i < p.numel; i += step) {\n");
    if rank > 0 {
        s.push_str("        long long rem = i;\n");
    }
    s.push_str("        long long o = p.out_offset;\n");
    for j in 0..inputs {
        let _ = writeln!(s, "        long long o{j} = p.in{j}_offset;");
    }
    // Innermost dimension first; dimension 0 takes what is left.
    for d in (0..rank).rev() {
        if d > 0 {
            let _ = writeln!(s, "        {{\n            const long long q = rem / p.sizes[{d}];");
            let _ = writeln!(s, "            const long long ix = rem - q * p.sizes[{d}];\n            rem = q;");
        } else {
            s.push_str("        {\n            const long long ix = rem;\n");
        }
        let _ = writeln!(s, "            o += ix * p.out_strides[{d}];");
        for j in 0..inputs {
            let _ = writeln!(s, "            o{j} += ix * p.in{j}_strides[{d}];");
        }
        s.push_str("        }\n");
    }
    let _ = writeln!(s, "        out[o] = {};\n    }}\n}}", call(&|j| format!("o{j}"), "o"));
}

/// The contiguous path's vectorised loop: when every operand's first
/// element is aligned to four of its elements (at most 16 bytes), each
/// thread loads and stores four consecutive elements per iteration as one
/// `aot_vec4` (one 16-byte access for f32, two for f64), then the scalar
/// loop finishes the last `numel % 4`. Each element is still read, then
/// written, by one thread, so an in-place kernel stays defined.
fn contiguous_vec4(s: &mut String, name: &str, ins: &[DType], outs: &[DType]) {
    // Operands: the outputs (`out`, `out1`, ..), then the inputs.
    let no = outs.len();
    let base = |j: usize| match j {
        0 => "out + p.out_offset".to_string(),
        j if j < no => format!("out{j} + p.out_offset"),
        j => format!("in{0} + p.in{0}_offset", j - no),
    };
    let ty = |j: usize| if j < no { outs[j] } else { ins[j - no] }.storage();
    let aligned: Vec<String> =
        (0..no + ins.len()).map(|j| format!("(unsigned long long)({}) % alignof(aot_vec4<{}>) == 0", base(j), ty(j))).collect();
    let _ = writeln!(s, "        if ({}) {{", aligned.join(" && "));
    s.push_str("            const long long nvec = p.numel / 4;\n");
    s.push_str("            for (long long v = first; v < nvec; v += step) {\n");
    for j in 0..ins.len() {
        let _ = writeln!(s, "                const aot_vec4<{0}> v{j} = ((const aot_vec4<{0}> *)({1}))[v];", ty(no + j), base(no + j));
    }
    let _ = writeln!(s, "                aot_vec4<{}> r;", outs[0].storage());
    for (j, d) in outs.iter().enumerate().skip(1) {
        let _ = writeln!(s, "                aot_vec4<{}> r{j};", d.storage());
    }
    for k in 0..4 {
        let mut args: Vec<String> = ins.iter().enumerate().map(|(j, d)| d.load(&format!("v{j}.v[{k}]"))).collect();
        args.push("p".into());
        args.extend((1..no).map(|j| format!("r{j}.v[{k}]")));
        let _ = writeln!(s, "                r.v[{k}] = aot_body_{name}({});", args.join(", "));
    }
    let _ = writeln!(s, "                ((aot_vec4<{}> *)({}))[v] = r;", outs[0].storage(), base(0));
    for j in 1..no {
        let _ = writeln!(s, "                ((aot_vec4<{}> *)({}))[v] = r{j};", ty(j), base(j));
    }
    s.push_str("            }\n");
    s.push_str("            for (long long i = nvec * 4 + first; i < p.numel; i += step) {\n");
    let mut args: Vec<String> = ins.iter().enumerate().map(|(j, d)| d.load(&format!("in{j}[p.in{j}_offset + i]"))).collect();
    args.push("p".into());
    args.extend((1..no).map(|j| format!("out{j}[p.out_offset + i]")));
    let _ = writeln!(s, "                out[p.out_offset + i] = aot_body_{name}({});", args.join(", "));
    s.push_str("            }\n            return;\n        }\n");
}

/// An operand's layout, in elements.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The index of the operand's first element in its storage.
    pub offset: i64,
    /// One per dimension of the output (0 where broadcast).
    pub strides: &'a [i64],
}

/// The params words of a launch (module doc, "ABI"): `sizes` is the
/// output's shape, `scalars` the slot values. Sets `contiguous` when every
/// operand has the row-major strides of `sizes` (size-1 dimensions aside).
pub fn pack_params(sizes: &[i64], out: Operand<'_>, inputs: &[Operand<'_>], scalars: &[f64]) -> Result<Vec<u64>, RenderError> {
    let rank = sizes.len();
    if let Some(bad) = std::iter::once(&out).chain(inputs).find(|o| o.strides.len() != rank) {
        return Err(RenderError::Params(format!("{} strides for a rank-{rank} output", bad.strides.len())));
    }
    let numel = sizes.iter().try_fold(1i64, |n, &s| if s < 0 { None } else { n.checked_mul(s) });
    let numel = numel.ok_or_else(|| RenderError::Params(format!("sizes {sizes:?} have no element count")))?;
    let mut dense = vec![0i64; rank];
    let mut step = 1i64;
    for d in (0..rank).rev() {
        dense[d] = step;
        step = step.saturating_mul(sizes[d]);
    }
    let contiguous = std::iter::once(&out).chain(inputs).all(|o| (0..rank).all(|d| sizes[d] == 1 || o.strides[d] == dense[d]));
    let mut w: Vec<u64> = vec![numel as u64, u64::from(contiguous)];
    w.extend(sizes.iter().map(|&s| s as u64));
    for o in std::iter::once(&out).chain(inputs) {
        w.push(o.offset as u64);
        w.extend(o.strides.iter().map(|&s| s as u64));
    }
    w.extend(scalars.iter().map(|v| v.to_bits()));
    Ok(w)
}

#[cfg(test)]
mod tests;
