//! A PTX interpreter for the tests: executes exactly the instruction subset
//! the PTX writer emits, strictly (an unknown instruction, operand form or
//! type mismatch is an error), on a grid of blocks with warps of 32 lanes,
//! shared memory with a race detector, `bar.sync`, warp shuffles and votes,
//! atomics, predicates and every dtype. Never part of the library.
//!
//! - `parse`: PTX text → functions of resolved instructions.
//! - `machine`: the SIMT execution of one launch.
//! - `device`: the interpreter as a `PtxDevice`, so the library's own host
//!   protocol (`computeq::plumbing::backends::ptx::run_plan`, `run_plan_to_host`) drives
//!   it, with strict started downloads.
//! - `backend`: the interpreter as the engine's `cuda` backend.
//! - `ptxas`: finding and running `ptxas` for sm_70, sm_80 and sm_90.
#![allow(dead_code)]

pub mod backend;
pub mod device;
pub mod machine;
pub mod parse;
pub mod ptxas;

pub use device::InterpDevice;
