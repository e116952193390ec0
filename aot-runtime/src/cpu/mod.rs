//! CPU kernels (owned by the kernels work item; see the brief).
