//! The fault matrix shared by the device tests (`tests/wgpu_backend.rs`,
//! `tests/ptx.rs`): every injectable fault of a backend, as the library
//! lists them in `FAULTS`, with the phase its error must report.
#![allow(dead_code)]

use computeq::plumbing::Phase;
use computeq::plumbing::FAULTS;

/// The faults of `backend` (`"wgpu"`, `"cuda"`): the entry's name (`oom`)
/// and the phase of its error. An out-of-memory fault fails the first
/// allocation, whichever phase makes it: `Execute` here, and a backend
/// that allocates at upload says so itself.
pub fn faults_of(backend: &str) -> Vec<(&'static str, Phase)> {
    let list: Vec<_> = FAULTS
        .iter()
        .filter_map(|f| f.strip_prefix(backend)?.strip_prefix(':'))
        .map(|name| {
            let phase = match name {
                "compile" => Phase::Compile,
                "upload" => Phase::Upload,
                "dispatch" | "launch" | "oom" => Phase::Execute,
                "readback" | "download" => Phase::Download,
                other => panic!("a fault with no phase in the matrix: {backend}:{other}"),
            };
            (name, phase)
        })
        .collect();
    assert!(!list.is_empty(), "no faults listed for {backend}");
    list
}
