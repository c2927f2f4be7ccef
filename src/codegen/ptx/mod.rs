//! The PTX writer: kernel IR in, PTX text out. Pure text, no CUDA:
//! `ptxas` validates the output and a PTX interpreter (under
//! `tests/ptx_interp`) executes it in the tests, through the host protocol
//! that runs a lowered plan's kernels on any device
//! (`backend::ptx`, the twin of wgpu's).
//!
//! # Design
//!
//! - **Modules.** One module per stage, one `.entry` per kernel of its
//!   [`KernelPlan`](crate::codegen::KernelPlan), `.version 7.0` /
//!   `.target sm_70` by default ([`PtxOptions`]), `.address_size 64`.
//!   `.reqntid` pins the block size to the kernel's workgroup size.
//! - **Parameters.** The kernel's storage bindings in order, each a `.u64`
//!   global pointer, then the whole uniform block as one
//!   `.param .align 16 .b8 cq_uniforms[size]`, byte for byte the
//!   [`UniformLayout`](crate::codegen::UniformLayout) the plan writes. A
//!   captured value is a field of that block: a new value is a new launch
//!   argument, never a new module.
//! - **Control flow.** `If` becomes `@!p bra else; then; bra end; else:
//!   ...; end:`; `For` becomes a head label that tests `var < end` (the
//!   bound is re-read each iteration, as the IR defines) and a back edge.
//!   Every label is unique in its entry.
//! - **Memory.** Shared arrays are `.shared .align 8 .b8` arrays with
//!   32-bit addresses; `bool` elements everywhere are 32-bit words;
//!   `Barrier` is `bar.sync 0`.
//! - **Warps.** A subgroup is a warp of 32 lanes (the whole block when the
//!   block is smaller). Reductions are `shfl.sync.bfly` butterflies, the
//!   inclusive scan `shfl.sync.up` steps, `all`/`any` `vote.sync`,
//!   `broadcast_first` `shfl.sync.idx` from lane 0. 64-bit values shuffle
//!   as two halves.
//! - **Semantics.** See the table in [`writer`]: the guards of
//!   integer division, the explicit NaN and range handling of float→int
//!   casts, `.rn` on every float operation (no contraction into `fma`),
//!   rounding half away from zero, and `f64` helper functions for `exp`,
//!   `ln`, `sin`, `cos` and float `%` (`math`).

mod math;
mod namer;
pub mod writer;

pub use namer::Namer;
pub use writer::{
    element_size, immediate, uniform_offsets, write_kernel, write_module, PtxModule, PtxOptions,
    PtxWriter, WriteError, UNIFORM_PARAM, WARP_SIZE,
};
