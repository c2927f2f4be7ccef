//! History on disk: loaded when a selector is made, written by a background
//! thread every few seconds when something changed, and when the selector
//! drops — never on the query path.
//!
//! A write merges with the file first (keys another process learned and we
//! did not are kept; for keys both know, the side with more samples wins),
//! then replaces it atomically ([`crate::cost::cache_file`]). Two processes
//! writing at once can each lose the other's latest few seconds for keys
//! both touched, never a whole file or another key.

use super::history::{History, Stat};
use super::learning::Shared;
use crate::backend::BackendKind;
use crate::cost::cache_file;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

const KIND: &str = "history";
/// How often the background thread looks for changes.
const PERIOD: Duration = Duration::from_secs(2);

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
}

#[derive(Debug, Serialize, Deserialize)]
struct SelectivityEntry {
    fingerprint: u64,
    selectivity: f64,
    samples: u32,
}

fn to_file(h: &History) -> HistoryFile {
    let mut f = HistoryFile::default();
    let mut plans: Vec<_> = h.plans.iter().collect();
    plans.sort_by_key(|(fp, _)| **fp);
    for (&fp, p) in plans {
        if let Some(s) = p.selectivity {
            f.selectivity.push(SelectivityEntry {
                fingerprint: fp,
                selectivity: s,
                samples: p.selectivity_samples,
            });
        }
        for b in &p.buckets {
            for k in BackendKind::ALL {
                let stat = b.stats[k.index()];
                if stat.samples > 0 || stat.failures > 0 {
                    f.entries.push(Entry {
                        fingerprint: fp,
                        bucket: b.key,
                        backend: k.name().into(),
                        stat,
                    });
                }
            }
        }
    }
    f
}

/// Adds the file's keys to `h`: a key `h` lacks is taken, a key both have
/// keeps the side with more samples.
fn merge_into(h: &mut History, f: HistoryFile) {
    for e in f.entries {
        let Some(k) = BackendKind::parse(&e.backend) else {
            continue;
        };
        let b = h
            .plans
            .entry(e.fingerprint)
            .or_default()
            .bucket_mut(e.bucket);
        let mine = &mut b.stats[k.index()];
        if e.stat.samples > mine.samples || (mine.samples == 0 && mine.failures == 0) {
            *mine = e.stat;
        }
    }
    for s in f.selectivity {
        let p = h.plans.entry(s.fingerprint).or_default();
        if s.samples > p.selectivity_samples {
            p.selectivity = Some(s.selectivity);
            p.selectivity_samples = s.samples;
        }
    }
}

/// The history persisted in `dir` (empty when none or unusable).
pub(crate) fn load(dir: &Path) -> History {
    let mut h = History::default();
    if let Some(f) = cache_file::read::<HistoryFile>(&cache_file::path(dir, KIND), KIND) {
        merge_into(&mut h, f);
    }
    h
}

/// Merges `h` with the file in `dir` and writes the result.
pub(crate) fn save(dir: &Path, h: &History) {
    let path = cache_file::path(dir, KIND);
    let mut merged = h.clone();
    if let Some(f) = cache_file::read::<HistoryFile>(&path, KIND) {
        merge_into(&mut merged, f);
    }
    if let Err(e) = cache_file::write(&path, KIND, &to_file(&merged)) {
        tracing::warn!(path = %path.display(), error = %e, "computeq: cannot persist selector history");
    }
}

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
                std::thread::sleep(PERIOD);
                let Some(shared) = weak.upgrade() else { return };
                if shared.dirty.swap(false, Ordering::Relaxed) {
                    // Copy under the lock, write without it.
                    let snapshot = shared.history.lock().clone();
                    drop(shared);
                    save(&d, &snapshot);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "computeq: no history writer thread; history persists on drop only");
        }
        Persister { dir }
    }

    /// Writes now (flush, drop).
    pub(crate) fn save_now(&self, shared: &Shared) {
        shared.dirty.store(false, Ordering::Relaxed);
        let snapshot = shared.history.lock().clone();
        save(&self.dir, &snapshot);
    }

    /// Forgets the persisted history (reset).
    pub(crate) fn remove_file(&self) {
        cache_file::remove(&cache_file::path(&self.dir, KIND));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(fp: u64, backend: BackendKind, samples: u32) -> History {
        let mut h = History::default();
        let b = h.plans.entry(fp).or_default().bucket_mut(10);
        for _ in 0..samples {
            b.stats[backend.index()].record(2e-3, 1e-3);
        }
        h
    }

    #[test]
    fn save_merges_with_another_writers_keys() {
        let dir = cache_file::temp_dir("history-merge");
        save(&dir, &hist(1, BackendKind::CpuSimd, 3));
        // Another process learned another plan.
        save(&dir, &hist(2, BackendKind::CpuParallel, 2));
        let h = load(&dir);
        assert_eq!(h.stat(1, 10, BackendKind::CpuSimd).unwrap().samples, 3);
        assert_eq!(h.stat(2, 10, BackendKind::CpuParallel).unwrap().samples, 2);
        // A writer with fewer samples of a key does not erase the richer one.
        save(&dir, &hist(1, BackendKind::CpuSimd, 1));
        assert_eq!(
            load(&dir)
                .stat(1, 10, BackendKind::CpuSimd)
                .unwrap()
                .samples,
            3
        );
        let s = load(&dir)
            .stat(1, 10, BackendKind::CpuSimd)
            .copied()
            .unwrap();
        assert!((s.log_ratio() - 2f64.ln()).abs() < 1e-3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_file_is_ignored_and_rebuilt() {
        let dir = cache_file::temp_dir("history-corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(cache_file::path(&dir, KIND), "\u{0}garbage").unwrap();
        assert_eq!(load(&dir).keys(), 0);
        save(&dir, &hist(7, BackendKind::CpuSimd, 1));
        assert_eq!(load(&dir).keys(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
