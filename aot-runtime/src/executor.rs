//! The executors: they run a graph of each stage with the eager kernels.
//!
//! Every executor runs its ops through the evaluation layer
//! (`crate::eval`: the dispatcher, and the gradient rules' primitives).
//!
//! - [`interp`]: the one interpreter, which runs the nodes of every stage
//!   (source, functional, joint), parameterised by the stage's switches;
//!   it also runs the source graph on the real arguments (the eager
//!   reference compiled calls are tested against).
//! - [`functional`]: the functional stage's entry (the inference path);
//!   nothing there writes a caller's tensor.
//! - [`joint`]: the joint stage's entries: joint graphs and their
//!   forward/backward partitions (the training path), grad mode off.
//! - [`kernel`]: the kernel stage's kernels, fused on the inputs' backend
//!   or op by op.
//! - [`out_of_place_writes`]: a first write of an input computed out of
//!   place from the original, without its copy.
//! - [`liveness`]: per node, the values that die there; the interpreter
//!   drops them, so a run holds only the values still to be read;
//!   [`reuse`]: an elementwise result written over the buffer of an
//!   operand that dies at its node.
//! - [`direct_kernels`]: direct kernels for small dense elementwise nodes
//!   and the plan's copies; [`deferred_writes`]: in-place writes of an
//!   input that wait for the epilogue and run on the caller's storage;
//!   [`value_table`]: the value table of a functional run, inline for
//!   small graphs; [`outputs`]: the list of tensors a run returns, inline
//!   for a few; both are [`tensor_slots`], a list of tensor slots held
//!   inline up to a size.
//!
//! The executors do not route calls or apply their effects: the runtime
//! wrappers (`wrappers`) and `CompiledFn` (`compiled`) sit above and call
//! them. The kernel stage reports each kernel it runs to the recording
//! behind `CompiledFn::kernels` (`backend::kernel_record::note_kernel`);
//! the primitives note themselves in the storage, and so does a single
//! op that `reuse` writes over its operand's buffer.

pub(crate) mod deferred_writes;
pub(crate) mod direct_kernels;
pub(crate) mod functional;
pub(crate) mod interp;
pub(crate) mod joint;
pub(crate) mod kernel;
pub(crate) mod liveness;
pub(crate) mod out_of_place_writes;
pub(crate) mod outputs;
pub(crate) mod reuse;
pub(crate) mod tensor_slots;
pub(crate) mod value_table;
