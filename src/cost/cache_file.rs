//! Files in the cache directory: one JSON document per kind (calibration,
//! history), named by library version and machine, wrapped in an envelope
//! that says what it is and where it was made.
//!
//! Writes are atomic (a unique temporary file in the same directory, then
//! `rename`), so a reader sees a whole old file or a whole new one, and of
//! two concurrent writers the last one wins with a consistent file (callers
//! that must keep both sides merge before writing). A file that is corrupt,
//! of another format, library version or machine is ignored with a
//! `tracing::warn!` and rebuilt by the next write.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Format tag of every cache file.
const FORMAT: &str = "computeq-cache";
/// Bumped when the layout of a payload changes incompatibly.
const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    format: String,
    format_version: u32,
    kind: String,
    library: String,
    machine: String,
    data: T,
}

/// What identifies this machine: host name, CPU model and thread count,
/// hashed into 16 hex digits (stable across processes).
pub fn machine_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .unwrap_or_default();
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_default();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut h = rustc_hash::FxHasher::default();
        (host.trim(), cpu.as_str(), threads, std::env::consts::ARCH).hash(&mut h);
        format!("{:016x}", h.finish())
    })
}

/// The path of the cache file of `kind` in `dir`:
/// `<kind>-<library version>-<machine>.json`, with `-debug` after the
/// version in builds with debug assertions: their timings (an unoptimized
/// block program runs tens of times slower) must never steer an optimized
/// build's choices, nor the other way round.
pub fn path(dir: &Path, kind: &str) -> PathBuf {
    let profile = if cfg!(debug_assertions) { "-debug" } else { "" };
    dir.join(format!(
        "{kind}-{}{profile}-{}.json",
        env!("CARGO_PKG_VERSION"),
        machine_id()
    ))
}

/// Reads the payload of `kind` from `path`. `None` when the file does not
/// exist (silently) or is unusable (with a warning).
pub fn read<T: DeserializeOwned>(path: &Path, kind: &str) -> Option<T> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "computeq: cannot read cache file; rebuilding it");
            return None;
        }
    };
    let env: Envelope<T> = match serde_json::from_str(&text) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "computeq: corrupt cache file ignored; rebuilding it");
            return None;
        }
    };
    if env.format != FORMAT
        || env.format_version != FORMAT_VERSION
        || env.kind != kind
        || env.library != env!("CARGO_PKG_VERSION")
        || env.machine != machine_id()
    {
        tracing::warn!(
            path = %path.display(),
            kind = %env.kind,
            library = %env.library,
            machine = %env.machine,
            "computeq: cache file from another machine, version or format ignored; rebuilding it"
        );
        return None;
    }
    Some(env.data)
}

/// Writes `data` as the payload of `kind` to `path`, atomically (temporary
/// file in the same directory, then rename). Creates the directory.
pub fn write<T: Serialize>(path: &Path, kind: &str, data: &T) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let env = Envelope {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        kind: kind.into(),
        library: env!("CARGO_PKG_VERSION").into(),
        machine: machine_id().into(),
        data,
    };
    let text = serde_json::to_vec_pretty(&env).map_err(std::io::Error::other)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes the file of `kind`, if any.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "computeq-test-{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejection_of_foreign_or_corrupt_files() {
        let dir = temp_dir("cachefile");
        let p = path(&dir, "history");
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name.contains("-debug-"), cfg!(debug_assertions), "{name}");
        assert_eq!(read::<Vec<u32>>(&p, "history"), None);
        write(&p, "history", &vec![1u32, 2, 3]).unwrap();
        assert_eq!(read::<Vec<u32>>(&p, "history"), Some(vec![1, 2, 3]));
        // Another kind under the same name is foreign.
        assert_eq!(read::<Vec<u32>>(&p, "calibration"), None);
        // Another machine.
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace(machine_id(), "0000000000000000");
        std::fs::write(&p, text).unwrap();
        assert_eq!(read::<Vec<u32>>(&p, "history"), None);
        // Garbage.
        std::fs::write(&p, b"{not json").unwrap();
        assert_eq!(read::<Vec<u32>>(&p, "history"), None);
        // A later write repairs it and leaves no temporary file.
        write(&p, "history", &vec![4u32]).unwrap();
        assert_eq!(read::<Vec<u32>>(&p, "history"), Some(vec![4]));
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(files.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_writers_leave_one_whole_file() {
        let dir = temp_dir("cachefile-race");
        let p = path(&dir, "calibration");
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..20u32 {
                        write(p, "calibration", &vec![t; 1000 + i as usize]).unwrap();
                    }
                });
            }
        });
        let v: Vec<u32> = read(&p, "calibration").expect("a whole file");
        assert!(v.iter().all(|&x| x == v[0]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
