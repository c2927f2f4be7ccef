//! History on disk: loaded when a selector is made, written by a background
//! thread soon after the first measurements (then at most every few
//! seconds while measurements come in), by [`Selector::flush`]
//! (`Engine::flush`), when the selector drops, and at the process's normal
//! exit — never on the query path.
//!
//! A write takes only the plans changed since the last one from memory
//! (a short hold of the history's lock), then, under the cache file's
//! advisory lock ([`cache_file::FileLock`]), re-reads the file, merges
//! (for a key both sides know, the side with more samples wins) and
//! replaces it atomically. So two processes writing at once lose none of
//! each other's keys. A write that waits past [`cache_file::LOCK_WAIT`]
//! for the lock (another writer's sync on a slow disk) takes nothing and
//! is left to the background writer's next try; only a history's last
//! write (the process's exit, the selector's drop) then goes ahead
//! unlocked. The file is bounded like the history: at most the
//! capacity's most recently measured plans and [`MAX_FILE_ENTRIES`] keys.
//! Everything read is validated; implausible entries are dropped with one
//! warning.
//!
//! Lock order: the file lock, then (briefly, never during I/O) the
//! history's lock; queries never take the file lock.
//!
//! [`Selector::flush`]: super::Selector::flush

use super::history::{Bucket, History, PlanSnapshot, Stat};
use super::learning::Shared;
use crate::cost::cache_file;
use crate::types::BackendKind;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

const KIND: &str = "history";
/// After the first measurement since the last write, the writer waits this
/// long (to take a burst of queries in one write) before writing.
const FIRST_DELAY: Duration = Duration::from_millis(50);
/// Writes come at most this often while measurements keep coming.
const PERIOD: Duration = Duration::from_secs(2);
/// The most (plan, bucket, backend) keys a history file holds: ~200 bytes
/// each, so the file stays well under [`cache_file::MAX_FILE_BYTES`].
pub(crate) const MAX_FILE_ENTRIES: usize = 16_384;
/// The largest `|ln(measured / estimated)|` a stored sample can have
/// (`record` clamps ratios to `[1e-30, 1e30]`).
const MAX_LOG_RATIO: f32 = 70.0;
/// The largest plausible mean run time, seconds.
const MAX_SECONDS: f64 = crate::cost::MAX_ESTIMATE;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct HistoryFile {
    entries: Vec<Entry>,
    selectivity: Vec<SelectivityEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    fingerprint: u64,
    bucket: u8,
    backend: String,
    stat: Stat,
    /// When a process last wrote a measurement of the plan, milliseconds
    /// since the Unix epoch (0: unknown). Bounds the file: the least
    /// recently measured plans leave it first.
    #[serde(default)]
    last_used: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct SelectivityEntry {
    fingerprint: u64,
    selectivity: f64,
    samples: u32,
    #[serde(default)]
    last_used: u64,
}

/// One plan of the file, as merged.
#[derive(Debug, Default)]
struct FilePlan {
    last_used: u64,
    selectivity: Option<(f64, u32)>,
    /// By (bucket, backend index).
    stats: Vec<(u8, usize, Stat)>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A time of last use further ahead than this (a clock set back, a file
/// edited by hand) is taken as now, so that it cannot pin a plan in the
/// file for good.
const FUTURE_SLACK_MS: u64 = 24 * 3600 * 1000;

/// Why a stored stat is implausible, if it is.
fn implausible_stat(s: &Stat) -> Option<&'static str> {
    let ratio_ok = |x: f32| x.is_finite() && x.abs() <= MAX_LOG_RATIO;
    if !s.recent.iter().all(|&x| ratio_ok(x)) || !ratio_ok(s.center) || !ratio_ok(s.last) {
        return Some("log ratio not finite or out of range");
    }
    if !(s.mean_seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&s.mean_seconds)) {
        return Some("mean seconds not finite or out of range");
    }
    None
}

/// The file's plans, validated: an entry of an unknown backend or with
/// implausible figures is dropped; one warning
/// names what was. A time of last use far in the future is taken as now.
fn plans_of(path: &Path, f: HistoryFile) -> FxHashMap<u64, FilePlan> {
    let now = now_ms();
    let when = |t: u64| {
        if t > now.saturating_add(FUTURE_SLACK_MS) {
            now
        } else {
            t
        }
    };
    let mut dropped = Vec::new();
    let mut plans: FxHashMap<u64, FilePlan> = FxHashMap::default();
    for e in f.entries {
        let why = match BackendKind::parse(&e.backend) {
            None => Some("unknown backend"),
            // Every byte is a bucket: ceil(log2(n + 1)) <= 63, plus the
            // residency and output-memory bits.
            Some(_) => implausible_stat(&e.stat),
        };
        if let Some(why) = why {
            dropped.push(format!(
                "{:016x}/{}/{}: {why}",
                e.fingerprint, e.bucket, e.backend
            ));
            continue;
        }
        let k = BackendKind::parse(&e.backend)
            .expect("checked above")
            .index();
        let p = plans.entry(e.fingerprint).or_default();
        p.last_used = p.last_used.max(when(e.last_used));
        merge_stat(p, e.bucket, k, e.stat);
    }
    for s in f.selectivity {
        if !(s.selectivity.is_finite() && (0.0..=1.0).contains(&s.selectivity)) {
            dropped.push(format!(
                "{:016x}: selectivity {}",
                s.fingerprint, s.selectivity
            ));
            continue;
        }
        let p = plans.entry(s.fingerprint).or_default();
        p.last_used = p.last_used.max(when(s.last_used));
        merge_selectivity(p, s.selectivity, s.samples);
    }
    cache_file::warn_dropped(path, &dropped);
    plans
}

/// Keeps the side with more samples (`new` on a tie: it is the fresher).
fn merge_stat(p: &mut FilePlan, bucket: u8, k: usize, new: Stat) {
    match p.stats.iter_mut().find(|(b, i, _)| *b == bucket && *i == k) {
        Some((_, _, old)) => {
            if new.samples >= old.samples {
                *old = new;
            }
        }
        None => p.stats.push((bucket, k, new)),
    }
}

fn merge_selectivity(p: &mut FilePlan, s: f64, samples: u32) {
    let newer = match p.selectivity {
        Some((_, n)) => samples >= n,
        None => true,
    };
    if newer {
        p.selectivity = Some((s, samples));
    }
}

/// Reads and validates the file at `path` (empty when none or unusable).
fn read_plans(path: &Path) -> FxHashMap<u64, FilePlan> {
    cache_file::read::<HistoryFile>(path, KIND)
        .map(|f| plans_of(path, f))
        .unwrap_or_default()
}

/// The most recently used plans of `plans`, at most `capacity` of them
/// and [`MAX_FILE_ENTRIES`] keys in all, least recent first.
fn bounded(plans: FxHashMap<u64, FilePlan>, capacity: usize) -> Vec<(u64, FilePlan)> {
    let mut v: Vec<(u64, FilePlan)> = plans.into_iter().collect();
    // Most recent first; the fingerprint orders ties, so that every
    // process bounds the same file the same way.
    v.sort_by(|a, b| b.1.last_used.cmp(&a.1.last_used).then(a.0.cmp(&b.0)));
    v.truncate(capacity);
    let mut keys = 0;
    let keep = v
        .iter()
        .take_while(|(_, p)| {
            keys += p.stats.len();
            keys <= MAX_FILE_ENTRIES
        })
        .count();
    v.truncate(keep);
    v.reverse();
    v
}

fn to_file(plans: &[(u64, FilePlan)]) -> HistoryFile {
    let mut f = HistoryFile::default();
    let mut sorted: Vec<&(u64, FilePlan)> = plans.iter().collect();
    sorted.sort_by_key(|(fp, _)| *fp);
    for (fp, p) in sorted {
        if let Some((s, n)) = p.selectivity {
            f.selectivity.push(SelectivityEntry {
                fingerprint: *fp,
                selectivity: s,
                samples: n,
                last_used: p.last_used,
            });
        }
        let mut stats = p.stats.clone();
        stats.sort_by_key(|(b, k, _)| (*b, *k));
        for (b, k, stat) in stats {
            f.entries.push(Entry {
                fingerprint: *fp,
                bucket: b,
                backend: BackendKind::ALL[k].name().into(),
                stat,
                last_used: p.last_used,
            });
        }
    }
    f
}

/// The history persisted in `dir`, at most `capacity` plans (the most
/// recently used); empty when none or unusable.
pub(crate) fn load(dir: &Path, capacity: usize) -> History {
    let mut h = History::with_capacity(capacity);
    for (fp, p) in bounded(read_plans(&cache_file::path(dir, KIND)), capacity) {
        let mut buckets: SmallVec<[Bucket; 4]> = SmallVec::new();
        for (b, k, stat) in p.stats {
            let bucket = match buckets.iter().position(|x| x.key == b) {
                Some(i) => &mut buckets[i],
                None => {
                    buckets.push(Bucket {
                        key: b,
                        ..Bucket::default()
                    });
                    buckets.last_mut().expect("just pushed")
                }
            };
            bucket.stats[k] = stat;
        }
        let (selectivity, selectivity_samples) = match p.selectivity {
            Some((s, n)) => (Some(s), n),
            None => (None, 0),
        };
        h.insert_loaded(PlanSnapshot {
            fingerprint: fp,
            selectivity,
            selectivity_samples,
            buckets,
        });
    }
    h
}

/// Writes the plans of `shared`'s history changed since the last write,
/// merged with the file in `dir`. Returns whether anything was written
/// (not when the file's lock stayed held: see [`Last`]).
pub(crate) fn save(dir: &Path, shared: &Shared) -> bool {
    save_as(dir, shared, Last::No)
}

/// Whether a write is the last this history gets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Last {
    /// A later write will come (the background writer's, a flush): past
    /// [`cache_file::LOCK_WAIT`] for the file's lock this one takes
    /// nothing, marks the history dirty and returns.
    No,
    /// The process exits or the selector drops: past the wait it goes
    /// ahead unlocked rather than lose what was learned.
    Yes,
}

/// [`save`], saying whether it is the history's last write.
pub(crate) fn save_as(dir: &Path, shared: &Shared, last: Last) -> bool {
    SAVING.fetch_add(1, Ordering::SeqCst);
    let wrote = save_locked(dir, shared, last);
    SAVING.fetch_sub(1, Ordering::SeqCst);
    wrote
}

/// Writes in progress in this process (the exit hook waits for them).
static SAVING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn save_locked(dir: &Path, shared: &Shared, last: Last) -> bool {
    // Nothing to write touches nothing: a program that learned nothing
    // creates no lock file in the cache directory. (Changes made after
    // this look are another save's to write: whoever makes them marks the
    // history dirty.)
    if !shared.history.lock().has_changes() {
        return false;
    }
    let path = cache_file::path(dir, KIND);
    // First the file lock, then the history's (briefly): another writer of
    // this process takes its changes only after this one wrote its own.
    let lock = cache_file::FileLock::acquire(&path);
    if lock.busy() {
        if last == Last::No {
            // Another writer held the lock past its wait (a slow disk's
            // sync): merging now, unlocked, could replace its update with
            // a file that lacks it. The changes stay in memory, untaken,
            // and the background writer tries again.
            tracing::debug!(path = %path.display(), "computeq: history file stays locked; its write is deferred");
            shared.dirty.store(true, Ordering::Relaxed);
            return false;
        }
        tracing::warn!(path = %path.display(), "computeq: history file stays locked; writing unlocked (its last write)");
    }
    let (changes, capacity) = {
        let mut h = shared.history.lock();
        (h.take_changes(), h.capacity())
    };
    if changes.is_empty() {
        return false;
    }
    let mut plans = read_plans(&path);
    // Later than every plan in the file, so that this write's plans are
    // the most recent even within one millisecond of the last write (the
    // drift is a millisecond per write at most).
    let stamp = plans
        .values()
        .map(|p| p.last_used.saturating_add(1))
        .fold(now_ms(), u64::max);
    for c in &changes {
        let p = plans.entry(c.fingerprint).or_default();
        p.last_used = stamp;
        if let Some(s) = c.selectivity {
            merge_selectivity(p, s, c.selectivity_samples);
        }
        for b in &c.buckets {
            for (k, stat) in b.stats.iter().enumerate() {
                if stat.samples > 0 || stat.failures > 0 {
                    merge_stat(p, b.key, k, *stat);
                }
            }
        }
    }
    let file = to_file(&bounded(plans, capacity));
    match cache_file::write(&path, KIND, &file) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "computeq: cannot persist selector history");
            shared.history.lock().requeue(changes);
            false
        }
    }
}

impl Shared {
    /// Notes that the history changed: wakes the writer on the first
    /// change since its last write (one relaxed load otherwise).
    pub(crate) fn note_change(&self) {
        if !self.dirty.load(Ordering::Relaxed) && !self.dirty.swap(true, Ordering::Relaxed) {
            if let Some(t) = self.writer.get() {
                t.unpark();
            }
        }
    }
}

/// Selectors with a writer, for the exit hook.
static LIVE: parking_lot::Mutex<Vec<(Weak<Shared>, PathBuf)>> = parking_lot::Mutex::new(Vec::new());

/// Writes every live selector's changes (the exit hook). Copies the list
/// first: no lock is held while writing. A write in progress on another
/// thread (which has taken its changes already) is waited for through the
/// file lock, so that the exit does not cut it short.
fn save_all_live() {
    let live: Vec<(Arc<Shared>, PathBuf)> = LIVE
        .lock()
        .iter()
        .filter_map(|(w, d)| Some((w.upgrade()?, d.clone())))
        .collect();
    for (shared, dir) in live {
        if shared.dirty.swap(false, Ordering::Relaxed) || SAVING.load(Ordering::SeqCst) > 0 {
            save_as(&dir, &shared, Last::Yes);
        }
    }
}

/// Registers [`save_all_live`] to run at the process's normal exit (the
/// end of `main`, `std::process::exit`): the process-wide engine is never
/// dropped, and a short program must not lose what it measured.
#[cfg(target_os = "linux")]
fn register_exit_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn at_exit() {
        // A panic must not cross into C; the hook only writes files.
        let _ = std::panic::catch_unwind(save_all_live);
    }
    ONCE.call_once(|| {
        // SAFETY: `at_exit` is a plain `extern "C" fn()` that lives as long
        // as the program; it takes only locks that no thread holds across
        // a call into user code or across `exit`.
        if unsafe { libc::atexit(at_exit) } != 0 {
            tracing::warn!(
                "computeq: no exit hook; call Engine::flush before exiting to keep history"
            );
        }
    });
}

#[cfg(not(target_os = "linux"))]
fn register_exit_hook() {}

/// The background writer of one selector's history.
#[derive(Debug)]
pub(crate) struct Persister {
    dir: PathBuf,
}

impl Persister {
    /// Starts the thread; it ends by itself once the selector is gone.
    pub(crate) fn start(dir: PathBuf, shared: &Arc<Shared>) -> Persister {
        let weak: Weak<Shared> = Arc::downgrade(shared);
        let d = dir.clone();
        let spawned = std::thread::Builder::new()
            .name("computeq-history".into())
            .spawn(move || loop {
                // Until a change (`note_change` unparks) or the selector
                // is gone (checked every period).
                loop {
                    std::thread::park_timeout(PERIOD);
                    let Some(shared) = weak.upgrade() else { return };
                    if shared.dirty.load(Ordering::Relaxed) {
                        break;
                    }
                }
                std::thread::sleep(FIRST_DELAY);
                let Some(shared) = weak.upgrade() else { return };
                if shared.dirty.swap(false, Ordering::Relaxed) {
                    save(&d, &shared);
                }
                drop(shared);
                std::thread::sleep(PERIOD);
            });
        match spawned {
            Ok(h) => {
                let _ = shared.writer.set(h.thread().clone());
            }
            Err(e) => {
                tracing::warn!(error = %e, "computeq: no history writer thread; history persists on flush, drop and exit only");
            }
        }
        {
            let mut live = LIVE.lock();
            live.retain(|(w, _)| w.strong_count() > 0);
            live.push((Arc::downgrade(shared), dir.clone()));
        }
        register_exit_hook();
        Persister { dir }
    }

    /// Writes now (flush; with [`Last::Yes`], the selector's drop).
    pub(crate) fn save_now(&self, shared: &Shared, last: Last) {
        shared.dirty.store(false, Ordering::Relaxed);
        save_as(&self.dir, shared, last);
    }

    /// Forgets the persisted history (reset).
    pub(crate) fn remove_file(&self) {
        let path = cache_file::path(&self.dir, KIND);
        if std::fs::symlink_metadata(&path).is_ok() {
            let _lock = cache_file::FileLock::acquire(&path);
            cache_file::remove(&path);
        }
    }

    /// Lets the writer thread see that the selector is gone.
    pub(crate) fn stop(&self, shared: &Shared) {
        if let Some(t) = shared.writer.get() {
            t.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::history::RECENT;

    /// A writer whose history measured `samples` runs of plan `fp` on
    /// `backend`, not yet written.
    fn shared(fp: u64, backend: BackendKind, samples: u32) -> Shared {
        let s = Shared::default();
        {
            let mut h = s.history.lock();
            let b = h.touch(fp).bucket_mut(10);
            for _ in 0..samples {
                b.stats[backend.index()].record(2e-3, 1e-3);
            }
            h.mark_changed(fp);
        }
        s
    }

    #[test]
    fn save_merges_with_another_writers_keys() {
        let dir = cache_file::temp_dir("history-merge");
        assert!(save(&dir, &shared(1, BackendKind::CpuSimd, 3)));
        // Another process learned another plan.
        assert!(save(&dir, &shared(2, BackendKind::CpuParallel, 2)));
        let h = load(&dir, 64);
        assert_eq!(h.stat(1, 10, BackendKind::CpuSimd).unwrap().samples, 3);
        assert_eq!(h.stat(2, 10, BackendKind::CpuParallel).unwrap().samples, 2);
        // A writer with fewer samples of a key does not erase the richer one.
        save(&dir, &shared(1, BackendKind::CpuSimd, 1));
        let s = load(&dir, 64)
            .stat(1, 10, BackendKind::CpuSimd)
            .copied()
            .unwrap();
        assert_eq!(s.samples, 3);
        assert!((s.log_ratio() - 2f64.ln()).abs() < 1e-3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_that_finds_the_file_locked_is_deferred_not_lost() {
        let dir = cache_file::temp_dir("history-busy");
        let path = cache_file::path(&dir, KIND);
        // Another writer's cycle holds the lock past the wait (a slow
        // disk's sync): this write takes nothing and writes nothing, and
        // leaves its changes for the background writer.
        let held = cache_file::FileLock::acquire(&path);
        assert!(!held.busy());
        let s = shared(5, BackendKind::CpuSimd, 2);
        assert!(!save(&dir, &s));
        assert!(s.dirty.load(Ordering::Relaxed));
        assert!(s.history.lock().has_changes());
        assert!(load(&dir, 64).plans.is_empty());
        // Once the lock is free, the next write has them.
        drop(held);
        assert!(save(&dir, &s));
        assert_eq!(
            load(&dir, 64)
                .stat(5, 10, BackendKind::CpuSimd)
                .unwrap()
                .samples,
            2
        );
        // A history's last write (the exit, the selector's drop) goes
        // ahead unlocked rather than lose what it learned.
        let held = cache_file::FileLock::acquire(&path);
        let t = shared(6, BackendKind::CpuParallel, 1);
        assert!(save_as(&dir, &t, Last::Yes));
        drop(held);
        let h = load(&dir, 64);
        assert_eq!(h.stat(6, 10, BackendKind::CpuParallel).unwrap().samples, 1);
        assert_eq!(h.stat(5, 10, BackendKind::CpuSimd).unwrap().samples, 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_changes_are_taken_and_nothing_unchanged_is_written() {
        let dir = cache_file::temp_dir("history-changes");
        // A program that learned nothing touches nothing, not even the
        // directory or a lock file.
        assert!(!save(&dir, &Shared::default()));
        assert!(!dir.exists(), "{}", dir.display());
        let s = shared(1, BackendKind::CpuSimd, 3);
        assert!(save(&dir, &s));
        // Nothing changed since: no write (the file is not even read).
        assert!(!save(&dir, &s));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_file_is_ignored_and_rebuilt() {
        let dir = cache_file::temp_dir("history-corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(cache_file::path(&dir, KIND), "\u{0}garbage").unwrap();
        assert_eq!(load(&dir, 64).keys(), 0);
        save(&dir, &shared(7, BackendKind::CpuSimd, 1));
        assert_eq!(load(&dir, 64).keys(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn implausible_entries_are_dropped_on_load() {
        let dir = cache_file::temp_dir("history-implausible");
        let good = {
            let mut s = Stat::default();
            s.record(2e-3, 1e-3);
            s
        };
        let entry = |fp: u64, bucket: u8, backend: &str, stat: Stat| Entry {
            fingerprint: fp,
            bucket,
            backend: backend.into(),
            stat,
            last_used: 0,
        };
        let f = HistoryFile {
            entries: vec![
                entry(1, 10, "cpu-simd", good),
                entry(2, 10, "quantum", good),
                // (Every byte is a bucket: 200 is a device input's size
                // 2^8 with its result written into fresh memory.)
                entry(3, 200, "quantum", good),
                entry(
                    4,
                    10,
                    "cpu-simd",
                    Stat {
                        mean_seconds: 1e300,
                        ..good
                    },
                ),
                entry(
                    5,
                    10,
                    "cpu-simd",
                    Stat {
                        mean_seconds: -1.0,
                        ..good
                    },
                ),
                entry(
                    6,
                    10,
                    "cpu-simd",
                    Stat {
                        center: 1e9,
                        ..good
                    },
                ),
                entry(
                    7,
                    10,
                    "cpu-simd",
                    Stat {
                        recent: [1e9; RECENT],
                        ..good
                    },
                ),
                entry(
                    8,
                    10,
                    "cpu-simd",
                    Stat {
                        last: -1e30,
                        ..good
                    },
                ),
            ],
            selectivity: vec![
                SelectivityEntry {
                    fingerprint: 1,
                    selectivity: 0.25,
                    samples: 4,
                    last_used: 0,
                },
                SelectivityEntry {
                    fingerprint: 9,
                    selectivity: 2.0,
                    samples: 4,
                    last_used: 0,
                },
                SelectivityEntry {
                    fingerprint: 10,
                    selectivity: -0.5,
                    samples: 4,
                    last_used: 0,
                },
            ],
        };
        // JSON has no NaN or infinity (serde writes `null`, which fails the
        // whole file as corrupt): finite but implausible values only.
        cache_file::write(&cache_file::path(&dir, KIND), KIND, &f).unwrap();
        let h = load(&dir, 64);
        let fps: Vec<u64> = h.plans.keys().copied().collect();
        assert_eq!(fps, [1], "only the plausible plan is kept");
        assert_eq!(h.plans[&1].selectivity, Some(0.25));
        assert_eq!(h.keys(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_file_keeps_the_most_recent_plans_within_bounds() {
        let plan = |last_used: u64, keys: usize| FilePlan {
            last_used,
            selectivity: None,
            stats: (0..keys).map(|i| (i as u8, 0, Stat::default())).collect(),
        };
        let mut plans = FxHashMap::default();
        for fp in 0..100u64 {
            plans.insert(fp, plan(1000 + fp, 1));
        }
        let kept: Vec<u64> = bounded(plans, 10).into_iter().map(|(fp, _)| fp).collect();
        assert_eq!(kept, (90..100).collect::<Vec<_>>(), "least recent first");
        // The key bound: plans of 60 keys each.
        let mut plans = FxHashMap::default();
        for fp in 0..1000u64 {
            plans.insert(fp, plan(fp, 60));
        }
        let kept = bounded(plans, 1000);
        let keys: usize = kept.iter().map(|(_, p)| p.stats.len()).sum();
        assert!(
            keys <= MAX_FILE_ENTRIES && keys > MAX_FILE_ENTRIES - 60,
            "{keys}"
        );
        assert_eq!(kept.last().unwrap().0, 999);
    }

    #[test]
    fn saving_bounds_the_file_to_the_capacity() {
        let dir = cache_file::temp_dir("history-bound");
        let s = Shared {
            history: parking_lot::Mutex::new(History::with_capacity(4)),
            ..Shared::default()
        };
        for fp in 0..10u64 {
            let mut h = s.history.lock();
            h.touch(fp).bucket_mut(10).stats[0].record(1e-3, 1e-3);
            h.mark_changed(fp);
            drop(h);
            save(&dir, &s);
        }
        let h = load(&dir, 100);
        assert!(h.plans.len() <= 4, "{}", h.plans.len());
        assert!(h.plans.contains_key(&9), "the latest stays");
        // A file of more plans than this process keeps loads its most
        // recent ones only.
        assert_eq!(load(&dir, 2).plans.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
