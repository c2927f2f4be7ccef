//! Files in the cache directory: one JSON document per kind (calibration,
//! history), named by library version and machine, wrapped in an envelope
//! that says what it is and where it was made.
//!
//! Writes are atomic (a new temporary file of an unpredictable name in the
//! same directory, created exclusively with mode `0600` and never through
//! a symbolic link, then `rename`), so a reader sees a whole old file or a
//! whole new one. Callers that must keep the updates of concurrent
//! writers (in this process or another) merge with the file under a
//! file lock before writing. The directory is created `0700`, and one
//! this user does not own is not used. Reads are bounded
//! ([`MAX_FILE_BYTES`]); a file that is too large, corrupt, of another
//! format, library version or machine is ignored with a `tracing::warn!`
//! and rebuilt by the next write, and callers validate every value they
//! load, dropping what is implausible with one warning per file.

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

/// The largest cache file read, bytes (8 MiB). A history at its default
/// bound takes well under half of it; a larger file is not one this
/// library wrote, and is ignored (with a warning) rather than read into
/// memory.
pub const MAX_FILE_BYTES: u64 = 8 << 20;

/// Whether `dir` may be trusted with cache files: a real directory (not a
/// symbolic link) owned by this process's user. A directory anyone else
/// owns (`/tmp` itself, another user's cache) could hold files planted to
/// steer or stall the process. The reason when not.
fn check_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("not a directory (or a symbolic link)".into());
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: `geteuid` has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!("owned by uid {}, not this user ({me})", meta.uid()));
        }
    }
    Ok(())
}

/// Creates `dir` (and its parents) when missing, as `0700` on Unix, and
/// checks it ([`check_dir`]).
fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir)?;
    }
    check_dir(dir).map_err(|why| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{}: {why}", dir.display()),
        )
    })
}

/// Options that create a new file exclusively: never an existing file or
/// a symbolic link (`O_CREAT | O_EXCL`, and `O_NOFOLLOW`), readable by its
/// owner only.
fn exclusive() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    #[cfg(target_os = "linux")]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
    o
}

/// 64 unpredictable bits for temporary names: the standard library seeds
/// `RandomState` from the operating system, mixed with the time, the
/// process and a counter.
fn unpredictable() -> u64 {
    use std::hash::BuildHasher;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((
        nanos,
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
    ))
}

/// Reads the payload of `kind` from `path`. `None` when the file does not
/// exist (silently) or is unusable (with a warning): not a regular file,
/// larger than [`MAX_FILE_BYTES`], in a directory this user does not own,
/// corrupt, or of another format, kind, library version or machine. The
/// payload's values are the caller's to validate.
pub fn read<T: DeserializeOwned>(path: &Path, kind: &str) -> Option<T> {
    let text = match read_bounded(path) {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "computeq: cannot read cache file; ignoring it");
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

/// The text of `path`, at most [`MAX_FILE_BYTES`]; `None` when it does
/// not exist.
fn read_bounded(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // Checked before opening: opening a FIFO would block.
    if !meta.is_file() {
        return Err(invalid("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(invalid(format!(
            "{} bytes, more than the {MAX_FILE_BYTES} a cache file may have",
            meta.len()
        )));
    }
    if let Some(dir) = path.parent() {
        check_dir(dir).map_err(invalid)?;
    }
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    // Swapped for a link or a FIFO since the check: fail, never block.
    #[cfg(target_os = "linux")]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let f = o.open(path)?;
    let mut text = String::new();
    // Bounded again: the file may have grown since the check.
    f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(invalid("grew past the size limit while read".into()));
    }
    Ok(Some(text))
}

/// Writes `data` as the payload of `kind` to `path`, atomically: into a
/// new temporary file of an unpredictable name in the same directory,
/// created exclusively (never through a link, never over an existing
/// file) and readable by this user only, then renamed over `path`.
/// Creates the directory (`0700`) when missing; refuses one this user does
/// not own.
pub fn write<T: Serialize>(path: &Path, kind: &str, data: &T) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    ensure_dir(dir)?;
    let env = Envelope {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        kind: kind.into(),
        library: env!("CARGO_PKG_VERSION").into(),
        machine: machine_id().into(),
        data,
    };
    let text = serde_json::to_vec(&env).map_err(std::io::Error::other)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
    let (tmp, mut f) = {
        let mut tries = 0;
        loop {
            let tmp = dir.join(format!(
                ".{name}.{}.{:016x}.tmp",
                std::process::id(),
                unpredictable()
            ));
            match exclusive().open(&tmp) {
                Ok(f) => break (tmp, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    };
    let result = (|| {
        f.write_all(&text)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes the file at `path`, if any.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// An advisory lock on the cache file of `path` (a `flock` on a sibling
/// `.<name>.lock` file on Linux; elsewhere a lock inside this process
/// only), held until dropped. Serializes the read-merge-write cycles of
/// writers in this process and in others, so that none loses another's
/// update. Never waits forever: past [`LOCK_WAIT`] it gives up and says
/// so ([`FileLock::busy`]); the caller then defers its cycle or goes
/// ahead unlocked. Where no lock file can be made (a read-only
/// directory), the cycle goes ahead unlocked and `busy` is false.
pub(crate) struct FileLock {
    #[cfg(target_os = "linux")]
    _file: Option<std::fs::File>,
    #[cfg(not(target_os = "linux"))]
    _guard: Option<parking_lot::MutexGuard<'static, ()>>,
    busy: bool,
}

/// The longest wait for a [`FileLock`]: another writer's cycle holds it
/// for a read, a merge and a synced write of a small file, milliseconds
/// unless the disk is slow (an `fsync` under a build's writes can take
/// seconds).
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl FileLock {
    /// Takes the lock of `path`'s file (creating the directory if needed).
    pub(crate) fn acquire(path: &Path) -> FileLock {
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let dir = path.parent().unwrap_or(Path::new("."));
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
            let file = ensure_dir(dir).and_then(|()| {
                let mut o = std::fs::OpenOptions::new();
                o.read(true).write(true).create(true).truncate(false);
                std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
                std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
                o.open(dir.join(format!(".{name}.lock")))
            });
            let file = match file {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "computeq: no lock file; writing unlocked");
                    return FileLock {
                        _file: None,
                        busy: false,
                    };
                }
            };
            loop {
                // SAFETY: a valid open descriptor; `flock` only reads it.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                    return FileLock {
                        _file: Some(file),
                        busy: false,
                    };
                }
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    tracing::warn!(path = %path.display(), error = %e, "computeq: cache file cannot be locked; writing unlocked");
                    return FileLock {
                        _file: None,
                        busy: false,
                    };
                }
                if std::time::Instant::now() > deadline {
                    return FileLock {
                        _file: None,
                        busy: true,
                    };
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            static LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
            let _ = path;
            let guard = LOCK.try_lock_until(deadline);
            FileLock {
                busy: guard.is_none(),
                _guard: guard,
            }
        }
    }

    /// Whether another writer held the lock past [`LOCK_WAIT`]: this one
    /// does not hold it, and a read-merge-write now could replace that
    /// writer's update with a file that lacks it.
    pub(crate) fn busy(&self) -> bool {
        self.busy
    }
}

/// Logs, once per file, what its validation dropped (nothing when
/// `dropped` is empty).
pub(crate) fn warn_dropped(path: &Path, dropped: &[String]) {
    if !dropped.is_empty() {
        tracing::warn!(
            path = %path.display(),
            count = dropped.len(),
            dropped = %dropped.join("; "),
            "computeq: implausible values in cache file ignored"
        );
    }
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

    #[cfg(unix)]
    #[test]
    fn writes_never_follow_a_planted_link_and_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("cachefile-links");
        let p = path(&dir, "history");
        write(&p, "history", &vec![1u32]).unwrap();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Links at every temporary name the old scheme (pid + counter)
        // could pick, to a victim file outside.
        let victim = dir.with_extension("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        for seq in 0..512 {
            let link = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&victim, link).unwrap();
        }
        write(&p, "history", &vec![2u32]).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(read::<Vec<u32>>(&p, "history"), Some(vec![2]));
        // The exclusive open itself refuses links and existing files.
        let link = dir.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(exclusive().open(&link).is_err());
        assert!(exclusive().open(&victim).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A cache file that is a link is not read either (Linux).
        #[cfg(target_os = "linux")]
        {
            std::fs::remove_file(&p).unwrap();
            std::os::unix::fs::symlink(&victim, &p).unwrap();
            assert_eq!(read::<Vec<u32>>(&p, "history"), None);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&victim);
    }

    #[test]
    fn oversized_files_are_not_read() {
        let dir = temp_dir("cachefile-large");
        let p = path(&dir, "history");
        write(&p, "history", &vec![1u32]).unwrap();
        // A whole, valid envelope, padded past the limit with a field the
        // reader ignores.
        let text = std::fs::read_to_string(&p).unwrap();
        let padding = "x".repeat(MAX_FILE_BYTES as usize);
        let big = text.replacen('{', &format!("{{\"padding\":\"{padding}\","), 1);
        std::fs::write(&p, big).unwrap();
        assert_eq!(read::<Vec<u32>>(&p, "history"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_in_place_of_a_file_does_not_block() {
        let dir = temp_dir("cachefile-fifo");
        std::fs::create_dir_all(&dir).unwrap();
        let p = path(&dir, "history");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read::<Vec<u32>>(&p, "history"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_of_another_user_is_not_used() {
        // `/` belongs to root; when the tests run as root there is no
        // other user's directory to try.
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return;
        }
        assert!(check_dir(Path::new("/")).is_err());
        assert!(write(
            &Path::new("/").join("computeq-never.json"),
            "history",
            &1u32
        )
        .is_err());
    }
}
