//! Code generation for devices: a target-neutral kernel IR, the lowering of
//! fused stages to it, and the text writers over it (WGSL here, PTX later).
//!
//! ```text
//! Stage ──lower──▶ KernelPlan { kernels, dispatches, scratch, uniforms, readback }
//!                        │
//!                        ├── wgsl::WgslWriter ──▶ WGSL text ──▶ wgpu pipeline
//!                        └── (ptx writer)     ──▶ PTX text
//! ```
//!
//! # The kernel IR
//!
//! A [`Kernel`] is one compute entry point launched over a one-dimensional
//! grid of workgroups of `workgroup_size` invocations. It declares:
//!
//! - storage bindings `b0, b1, ...` (group 0, binding numbers in order), each
//!   an array of one [`DType`](crate::expr::DType) with an [`Access`]
//!   (`read`, `read_write`, `atomic`). `bool` elements are 32-bit words
//!   holding 0 or 1 on every target;
//! - one uniform block of scalar fields `u0, u1, ...` (binding number
//!   `bindings.len()`), laid out by [`UniformLayout`]: each field aligned to
//!   its size (4 or 8 bytes), the block rounded up to 16 bytes. It carries
//!   the run's length, span, group count, input offsets, enumerate bases and
//!   the query's parameters, so a new captured value reuses the kernel;
//! - workgroup-shared arrays `sh0, sh1, ...`;
//! - typed registers `r0, r1, ...`, all mutable.
//!
//! The body is structured: `Assign`, `Store`, `StoreShared`, `If`, a counted
//! `For` over `u32`, and `Barrier`. Operations carry the reference semantics
//! of `expr::eval` (wrapping integers, integer division by zero = 0,
//! saturating float→int casts with NaN → 0, NaN-skipping float min/max,
//! `round` half away from zero, truncated float `%`); a writer emits the
//! guards its target needs. Subgroup collectives and atomics are optional
//! operations a kernel uses only when the lowering was told the device has
//! them ([`Caps`]). Nothing in the IR is specific to one target language.
//!
//! ## Text form
//!
//! ```text
//! kernel store workgroup(256)
//!   binding b0 in0: [f32] read
//!   binding b1 out0: [f32] read_write
//!   uniform u0 len: u32
//!   uniform u1 span: u32
//!   shared sh0 red0_0: [f32; 256]
//! {
//!   r0 = uniform u0 : u32
//!   r5 = builtin local_id : u32
//!   r9 = add r7, r5 : u32
//!   for r10 = r9 to r8 step 256u32 {
//!     r12 = load b0[r11] : f32
//!     r13 = mul r12, 2.0f32 : f32
//!     store b1[r10] = r13
//!   }
//!   if r14 {
//!     ...
//!   } else {
//!     ...
//!   }
//!   barrier
//! }
//! ```
//!
//! Each assignment prints its destination's type after ` : `; constants
//! print as `Scalar` does (`2.0f32`, `7u32`, `true`, `NaNf32`). `for r = a
//! to b step s` runs `r = a, a + s, ...` while `r < b`. Other operations:
//! `select c, a, b`, `mul_add a, b, c`, `cast a`, `is_nan a`, `builtin
//! local_id | workgroup_id | num_workgroups | global_id | subgroup_size |
//! subgroup_lane | subgroup_id | num_subgroups`, `load shN[i]`,
//! `subgroup.add a` (also `min max all any inclusive_add broadcast_first`),
//! `atomic.add bN[i], v`, and every unary and binary operation of the
//! element IR by its name (`neg abs sqrt ... add sub div rem min max eq lt
//! and or`).
//!
//! # Kernel plans
//!
//! [`lower_stage`] turns one fused stage into a [`KernelPlan`]: the kernels,
//! the dispatches in order with the buffers each binds ([`BufferRef`]:
//! stage inputs, output columns, scratch), and what the host reads back.
//! The algorithms are described in [`lower`].

// Applied by the wgpu backend only (its message is read everywhere).
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
pub(crate) mod finite;
mod kernel;
pub mod lower;
pub(crate) mod plan;
pub mod ptx;
pub mod wgsl;

pub use kernel::{
    op_operands, u32c, visit, Access, AtomicOp, Binding, BindingId, Builtin, FieldId, Kernel,
    KernelBuilder, KernelError, KernelNeeds, Local, LocalDecl, Op, Operand, SharedArray, SharedId,
    Stmt, SubgroupOp, UniformField,
};
pub use lower::{lower_plan, lower_stage, Caps, LowerError};
pub use plan::{
    AggReadback, BufferRef, Dispatch, Groups, KernelPlan, Launch, Readback, Scratch, ScratchInit,
    ScratchLen, UniformLayout, UniformSlot, UniformSource, UniformValues,
};
