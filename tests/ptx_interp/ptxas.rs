//! `ptxas` for the tests: found through `PTXAS`, then `PATH`, then the
//! development install in `.tools/pip`; missing, the callers skip (after
//! printing why) unless `COMPUTEQ_REQUIRE` lists `ptxas`.

use std::path::PathBuf;

pub fn required(what: &str) -> bool {
    std::env::var("COMPUTEQ_REQUIRE")
        .is_ok_and(|v| v.split(',').any(|s| s.trim().eq_ignore_ascii_case(what)))
}

/// The `ptxas` binary, or `None` (after printing why) when the tests may
/// skip it.
pub fn find() -> Option<PathBuf> {
    let candidates = std::env::var_os("PTXAS")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("ptxas"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        )
        .chain(std::iter::once(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/pip/nvidia/cuda_nvcc/bin/ptxas"),
        ));
    for c in candidates {
        if c.is_file() {
            return Some(c);
        }
    }
    assert!(
        !required("ptxas"),
        "COMPUTEQ_REQUIRE lists ptxas but it was found neither in PTXAS nor on PATH"
    );
    eprintln!("skipping ptxas validation: no ptxas (set PTXAS, or COMPUTEQ_REQUIRE=ptxas to fail)");
    None
}

pub const TARGETS: [&str; 3] = ["sm_70", "sm_80", "sm_90"];

/// Assembles `text` for every target of [`TARGETS`].
pub fn check(ptxas: &PathBuf, name: &str, text: &str) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("computeq-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join(format!("{name}-{}.ptx", N.fetch_add(1, Ordering::Relaxed)));
    let mut assembled = 0;
    for target in TARGETS {
        // The module stays `.target sm_70`: the driver JIT-compiles it for
        // newer GPUs exactly as ptxas does here for `--gpu-name`.
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        let out = std::process::Command::new(ptxas)
            .args(["--gpu-name", target, "-o", "/dev/null"])
            .arg(&file)
            .output()
            .map_err(|e| format!("running ptxas: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && unknown_target(&stderr) {
            // A newer ptxas drops old targets (CUDA 13's has no sm_70); the
            // module is still checked for every target this one knows.
            skipped_target(target);
            continue;
        }
        if !out.status.success() {
            return Err(format!(
                "ptxas {target} rejected {name}:\n{stderr}\n{}",
                context(text, &stderr)
            ));
        }
        assembled += 1;
    }
    let _ = std::fs::remove_file(&file);
    if assembled == 0 {
        return Err(format!("ptxas knows none of the targets {TARGETS:?}"));
    }
    Ok(())
}

/// Whether ptxas refused the `--gpu-name` value itself (not the module).
fn unknown_target(stderr: &str) -> bool {
    stderr.contains("is not defined for option 'gpu-name'")
}

/// Says once per target that this ptxas cannot assemble for it.
fn skipped_target(target: &str) {
    use std::sync::Mutex;
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let first = {
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        let first = !said.iter().any(|t| t == target);
        if first {
            said.push(target.to_string());
        }
        first
    };
    // Printed after the lock is released: no I/O under a lock.
    if first {
        eprintln!("ptxas does not know {target} (a newer CUDA dropped it); not assembled for it");
    }
}

/// The lines around the first line ptxas complains about.
fn context(text: &str, stderr: &str) -> String {
    let line = stderr
        .split(", line ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(1);
    text.lines()
        .enumerate()
        .skip(line.saturating_sub(15))
        .take(30)
        .map(|(i, l)| format!("{:5} {l}\n", i + 1))
        .collect()
}
