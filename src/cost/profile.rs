//! Device profiles: the measured (or prior) speeds the cost model prices
//! with. Every figure is a documented field with its default and origin.
//! The defaults are priors only: [`super::calibrate`] replaces them with
//! measurements of this machine and persists them.

use serde::{Deserialize, Serialize};

/// Speeds of the host CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuProfile {
    /// Read bandwidth of one thread from DRAM, bytes/s. Prior: 25 GB/s
    /// (docs/architecture.md: 23–33 GB/s with 8 SIMD accumulators).
    pub bandwidth_one: f64,
    /// Read bandwidth of all threads from DRAM, bytes/s. Prior: 45 GB/s
    /// (44–57 GB/s).
    pub bandwidth_all: f64,
    /// Working sets up to this many bytes (per thread) are read at the
    /// near-cache bandwidths below. Prior: 256 KiB (measured: the size of
    /// one core's level-2 cache).
    pub near_bytes: f64,
    /// Read bandwidth of one thread from its own level-2 cache, bytes/s.
    /// Prior: 100 GB/s.
    pub near_bandwidth_one: f64,
    /// Read bandwidth of all threads from their level-2 caches, bytes/s.
    /// Prior: 180 GB/s.
    pub near_bandwidth_all: f64,
    /// Working sets up to this many bytes (and over `near_bytes`) are read
    /// at the cache bandwidths below. Prior: 2 MiB (measured: the
    /// last-level cache size).
    pub cache_bytes: f64,
    /// Read bandwidth of one thread from cache, bytes/s. Prior: 60 GB/s.
    pub cache_bandwidth_one: f64,
    /// Read bandwidth of all threads from cache, bytes/s. Prior: 100 GB/s.
    pub cache_bandwidth_all: f64,
    /// Threads in the pool.
    pub threads: u32,
    /// Seconds per element per simple operation in the block program
    /// (one thread, data in L1). Prior: 0.15 ns.
    pub simd_op: f64,
    /// Seconds per element per transcendental operation (one thread).
    /// Prior: 2 ns.
    pub simd_transcendental: f64,
    /// Fixed cost of one `cpu-simd` stage run (compiled program lookup,
    /// block setup), seconds; each task of a `cpu-parallel` stage pays it
    /// too. Prior: 100 ns (measured: the backend's run of a 64-element
    /// sum, by the runtime's backend probe).
    pub simd_fixed: f64,
    /// Fixed cost of one `cpu-parallel` stage besides its tasks' (the
    /// split into tasks, their slots, the combination), seconds. Prior:
    /// 100 ns (measured with `simd_fixed`).
    pub parallel_fixed: f64,
    /// Cost of waking the pool and joining it, seconds. Prior: 30 µs
    /// (docs/architecture.md: 14–40 µs from the main thread).
    pub pool_wakeup: f64,
    /// Seconds per element per operation of the reference interpreter.
    /// Prior: 6 ns.
    pub scalar_op: f64,
    /// Seconds per element of interpreter overhead. Prior: 15 ns.
    pub scalar_element: f64,
    /// Seconds per element per transcendental operation of the
    /// interpreter. Prior: 8 ns.
    pub scalar_transcendental: f64,
    /// Fixed cost of one `cpu-scalar` run, seconds. Prior: 300 ns
    /// (measured with `simd_fixed`; the backend probe also scales the
    /// interpreter's three per-element figures by its measured speed).
    pub scalar_fixed: f64,
    /// Seconds per element of the dependent carry of a scan (one thread,
    /// 32-bit lanes; twice that for 64-bit ones). Prior: 0.25 ns (at 0.5,
    /// `f32` scans of 10^4 ran at 0.4x their estimates).
    pub scan_element: f64,
    /// Bytes/s at which freshly allocated output pages are first written
    /// (page faults and zeroing; large outputs pay it). Prior: 8 GB/s.
    pub fresh_write_bandwidth: f64,
    /// Building the block program of a plan, seconds. Prior: 5 µs.
    pub simd_compile: f64,
    /// Whether these figures were measured on this machine (false: priors).
    pub measured: bool,
    /// Whether the backends' fixed costs (and the interpreter's speed)
    /// came from runs of the backends (the calibration's last step, which
    /// a quick calibration on a slow machine may not reach): false, they
    /// are the priors, which a later probe replaces whatever it measures.
    pub probed: bool,
}

impl Default for CpuProfile {
    fn default() -> Self {
        CpuProfile {
            bandwidth_one: 25e9,
            bandwidth_all: 45e9,
            near_bytes: 256.0 * 1024.0,
            near_bandwidth_one: 100e9,
            near_bandwidth_all: 180e9,
            cache_bytes: 2.0 * 1024.0 * 1024.0,
            cache_bandwidth_one: 60e9,
            cache_bandwidth_all: 100e9,
            threads: rayon::current_num_threads() as u32,
            simd_op: 0.15e-9,
            simd_transcendental: 2e-9,
            simd_fixed: 100e-9,
            parallel_fixed: 100e-9,
            pool_wakeup: 30e-6,
            scalar_op: 6e-9,
            scalar_element: 15e-9,
            scalar_transcendental: 8e-9,
            scalar_fixed: 300e-9,
            scan_element: 0.25e-9,
            fresh_write_bandwidth: 8e9,
            simd_compile: 5e-6,
            measured: false,
            probed: false,
        }
    }
}

/// Speeds of an accelerator and the path to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceProfile {
    /// Host → device bytes/s. Prior: 12 GB/s (PCIe 3 x16 in practice).
    pub upload_bandwidth: f64,
    /// Device → host bytes/s. Prior: 12 GB/s.
    pub download_bandwidth: f64,
    /// Device → host bytes/s of a download past what the host allocator
    /// recycles (`RECYCLED_OUTPUT_MAX`, 32 MiB): the host pages it writes
    /// are fresh mappings, and a driver's staging memory may be too. On
    /// lavapipe a query's 40 MB download ran at ~1.5 GB/s (the
    /// calibration's at 0.7-1.0 GB/s) where downloads of up to 4 MiB run
    /// at ~10 GB/s. 0: not measured (a profile from before it was), priced
    /// as `download_bandwidth`. Prior: 0.
    pub large_download_bandwidth: f64,
    /// Fixed latency of one transfer, seconds. Prior: 10 µs.
    pub transfer_latency: f64,
    /// Cost of one kernel launch or dispatch, seconds. Prior: 50 µs.
    pub launch: f64,
    /// Fixed cost of one run beyond its launches and its transfers'
    /// latencies, seconds: the wait for the result after the kernels
    /// (the readback's fence and mapping, the run's buffers and bind
    /// groups). On lavapipe a run of the smallest sum waited 70-230 µs
    /// for its readback where a download on an idle queue took ~10 µs.
    /// Fitted by the calibration from whole runs of that sum; 0 when not
    /// measured (a profile from before it was). Prior: 0.
    pub run_fixed: f64,
    /// Device memory read bandwidth, bytes/s. Prior: 300 GB/s.
    pub bandwidth: f64,
    /// Seconds per element per simple operation. Prior: 0.005 ns.
    pub op: f64,
    /// Seconds per element per transcendental operation. Prior: 0.02 ns.
    pub transcendental: f64,
    /// Time to compile one kernel set, seconds. Prior: 20 ms.
    pub compile: f64,
    /// A software rasterizer or emulator rather than real hardware.
    pub software: bool,
    /// Whether these figures were measured (false: priors).
    pub measured: bool,
}

impl Default for DeviceProfile {
    fn default() -> Self {
        DeviceProfile {
            upload_bandwidth: 12e9,
            download_bandwidth: 12e9,
            large_download_bandwidth: 0.0,
            transfer_latency: 10e-6,
            launch: 50e-6,
            run_fixed: 0.0,
            bandwidth: 300e9,
            op: 0.005e-9,
            transcendental: 0.02e-9,
            compile: 20e-3,
            software: false,
            measured: false,
        }
    }
}

impl DeviceProfile {
    /// Seconds to download `bytes` to the host: the latency, then the
    /// bytes at [`DeviceProfile::large_download_bandwidth`] past what the
    /// allocator recycles, else at `download_bandwidth`. A large download
    /// not measured (the calibration's budget had no room for it, or a
    /// profile from before it was) writes fresh host pages as it copies:
    /// priced as the copy at `download_bandwidth` and the first touch of
    /// those pages at the host's `fresh_write_bandwidth`
    /// ([`CpuProfile::fresh_write_bandwidth`]; 0 leaves the copy alone).
    /// Priced at `download_bandwidth` alone, lavapipe's 40 MB downloads
    /// (0.8 GB/s) were estimated at 2.9 GB/s.
    pub fn download_seconds(&self, bytes: f64, fresh_write_bandwidth: f64) -> f64 {
        let large = bytes > super::model::RECYCLED_OUTPUT_MAX;
        let seconds = if large && self.large_download_bandwidth > 0.0 {
            bytes / self.large_download_bandwidth
        } else if large && fresh_write_bandwidth > 0.0 {
            bytes / self.download_bandwidth + bytes / fresh_write_bandwidth
        } else {
            bytes / self.download_bandwidth
        };
        self.transfer_latency + seconds
    }

    /// A prior for a software device (lavapipe, llvmpipe): CPU-class speeds
    /// behind a driver, so it never looks like a real GPU before it is
    /// measured.
    pub fn software_prior() -> DeviceProfile {
        DeviceProfile {
            upload_bandwidth: 5e9,
            download_bandwidth: 5e9,
            large_download_bandwidth: 0.0,
            transfer_latency: 50e-6,
            launch: 100e-6,
            run_fixed: 0.0,
            bandwidth: 10e9,
            op: 0.5e-9,
            transcendental: 2e-9,
            compile: 50e-3,
            software: true,
            measured: false,
        }
    }
}

/// Plausible range of each kind of figure. A profile read from disk or
/// handed in by the caller with a figure outside its range (or not
/// finite) is not priced with: a zero bandwidth alone would make every
/// estimate infinite.
mod plausible {
    /// Bytes per second: 1 MB/s to 100 TB/s.
    pub const BANDWIDTH: (f64, f64) = (1e6, 1e14);
    /// Seconds per element and operation: 1 fs to 1 ms (never zero: a
    /// measurement that rounded to zero is not a speed).
    pub const PER_ELEMENT: (f64, f64) = (1e-15, 1e-3);
    /// Fixed costs and latencies, seconds: zero to 1 s.
    pub const FIXED: (f64, f64) = (0.0, 1.0);
    /// Building a kernel or program, seconds: zero to 10 minutes.
    pub const COMPILE: (f64, f64) = (0.0, 600.0);
    /// Cache sizes, bytes: 1 KiB to 1 TiB.
    pub const CACHE_BYTES: (f64, f64) = (1024.0, 1099511627776.0);
}

/// Replaces `*v` by `prior` when it is not finite or outside `range`,
/// recording `name`.
fn check(
    name: &'static str,
    v: &mut f64,
    range: (f64, f64),
    prior: f64,
    bad: &mut Vec<&'static str>,
) {
    if !(v.is_finite() && *v >= range.0 && *v <= range.1) {
        *v = prior;
        bad.push(name);
    }
}

/// The least share of the one-thread bandwidth a parallel bandwidth may
/// have ([`CpuProfile::sanitized`]): below it the measurement was
/// disturbed.
const MIN_PARALLEL_SHARE: f64 = 0.8;

/// The most a parallel bandwidth may have per thread against the
/// one-thread figure ([`CpuProfile::sanitized`]), with room for the two
/// measurements' noise.
const MAX_PARALLEL_GAIN: f64 = 1.25;

impl CpuProfile {
    /// Takes `other`'s backend figures (those the runtime's backend probe
    /// measures: the CPU backends' fixed costs, the pool's wake-up, the
    /// interpreter's speed) when `other`'s were probed and either this
    /// profile's were not (`probed`: the calibration ran out of time
    /// before its probe) or its `cpu-simd` fixed cost is lower than
    /// this profile's by more than the fraction `by`: a later probe of the
    /// same machine, for a calibration whose probe met a slow stretch of
    /// it. The figures of one probe go together (a fit of one of them at
    /// zero, which noise can give, is not mixed with another probe's).
    /// Returns whether it took them.
    pub(crate) fn take_faster_probe(&mut self, other: &CpuProfile, by: f64) -> bool {
        // Figures no probe measured (the priors: 100 ns for `cpu-simd`,
        // below what runs here take) are taken over by any probe's.
        let faster = other.probed
            && other.simd_fixed > 0.0
            && (!self.probed || other.simd_fixed < self.simd_fixed * (1.0 - by));
        if faster {
            self.probed = true;
            self.simd_fixed = other.simd_fixed;
            self.parallel_fixed = other.parallel_fixed;
            self.pool_wakeup = other.pool_wakeup;
            self.scalar_fixed = other.scalar_fixed;
            self.scalar_element = other.scalar_element;
            self.scalar_op = other.scalar_op;
            self.scalar_transcendental = other.scalar_transcendental;
        }
        faster
    }

    /// This profile with every implausible figure (not finite, or outside
    /// its range) replaced by its prior, and the names of those figures
    /// (empty when the profile was plausible).
    pub(crate) fn sanitized(mut self) -> (CpuProfile, Vec<&'static str>) {
        use plausible::*;
        let d = CpuProfile::default();
        let mut bad = Vec::new();
        let p = &mut self;
        check(
            "bandwidth_one",
            &mut p.bandwidth_one,
            BANDWIDTH,
            d.bandwidth_one,
            &mut bad,
        );
        check(
            "bandwidth_all",
            &mut p.bandwidth_all,
            BANDWIDTH,
            d.bandwidth_all,
            &mut bad,
        );
        check(
            "near_bytes",
            &mut p.near_bytes,
            CACHE_BYTES,
            d.near_bytes,
            &mut bad,
        );
        check(
            "near_bandwidth_one",
            &mut p.near_bandwidth_one,
            BANDWIDTH,
            d.near_bandwidth_one,
            &mut bad,
        );
        check(
            "near_bandwidth_all",
            &mut p.near_bandwidth_all,
            BANDWIDTH,
            d.near_bandwidth_all,
            &mut bad,
        );
        check(
            "cache_bytes",
            &mut p.cache_bytes,
            CACHE_BYTES,
            d.cache_bytes,
            &mut bad,
        );
        check(
            "cache_bandwidth_one",
            &mut p.cache_bandwidth_one,
            BANDWIDTH,
            d.cache_bandwidth_one,
            &mut bad,
        );
        check(
            "cache_bandwidth_all",
            &mut p.cache_bandwidth_all,
            BANDWIDTH,
            d.cache_bandwidth_all,
            &mut bad,
        );
        if p.threads == 0 || p.threads > 1 << 16 {
            p.threads = d.threads;
            bad.push("threads");
        }
        // All the threads read at least about as fast as one of them: a
        // parallel figure well below the one-thread figure was measured
        // while something else held the cores (a device probe, another
        // process). Kept, it prices `cpu-parallel` several times too high
        // for good, out of exploration's reach (one selector evaluation
        // saw 2.4 GB/s against 11.4: `cpu-simd` ran the large reductions
        // at twice `cpu-parallel`'s time).
        if p.bandwidth_all < p.bandwidth_one * MIN_PARALLEL_SHARE {
            p.bandwidth_all = p.bandwidth_one;
            bad.push("bandwidth_all (below bandwidth_one)");
        }
        if p.cache_bandwidth_all < p.cache_bandwidth_one * MIN_PARALLEL_SHARE {
            p.cache_bandwidth_all = p.cache_bandwidth_one;
            bad.push("cache_bandwidth_all (below cache_bandwidth_one)");
        }
        // The tiers are nested: a near cache larger than the cache, or
        // slower than it (a disturbed measurement), would price a working
        // set higher for fitting in it. (Before the parallel share below,
        // so that a sanitized profile passes again unchanged.)
        if p.near_bytes > p.cache_bytes {
            p.near_bytes = p.cache_bytes;
            bad.push("near_bytes (above cache_bytes)");
        }
        if p.near_bandwidth_one < p.cache_bandwidth_one {
            p.near_bandwidth_one = p.cache_bandwidth_one;
            bad.push("near_bandwidth_one (below cache_bandwidth_one)");
        }
        if p.near_bandwidth_all < p.cache_bandwidth_all {
            p.near_bandwidth_all = p.cache_bandwidth_all;
            bad.push("near_bandwidth_all (below cache_bandwidth_all)");
        }
        if p.near_bandwidth_all < p.near_bandwidth_one * MIN_PARALLEL_SHARE {
            p.near_bandwidth_all = p.near_bandwidth_one;
            bad.push("near_bandwidth_all (below near_bandwidth_one)");
        }
        // Nor faster than every thread at one thread's speed: each reads
        // its own data no faster than one thread alone does. A measured
        // figure past that came from a pass whose subtracted wake-up was
        // most of its time (the near-cache pass over two copies of 256
        // KiB takes ~10 µs; one `selector_eval` run fitted 161 GB/s
        // against one thread's 56 GB/s on two cores), and kept it priced
        // `cpu-parallel`'s mid-size stages as if the machine had more
        // cores. (Last, so that a sanitized profile passes again
        // unchanged; the priors are left alone.)
        if p.measured {
            let threads = f64::from(p.threads.max(1)) * MAX_PARALLEL_GAIN;
            for (name, all, one) in [
                (
                    "bandwidth_all (above threads x bandwidth_one)",
                    &mut p.bandwidth_all,
                    p.bandwidth_one,
                ),
                (
                    "cache_bandwidth_all (above threads x cache_bandwidth_one)",
                    &mut p.cache_bandwidth_all,
                    p.cache_bandwidth_one,
                ),
                (
                    "near_bandwidth_all (above threads x near_bandwidth_one)",
                    &mut p.near_bandwidth_all,
                    p.near_bandwidth_one,
                ),
            ] {
                if *all > one * threads {
                    *all = one * threads;
                    bad.push(name);
                }
            }
        }
        check("simd_op", &mut p.simd_op, PER_ELEMENT, d.simd_op, &mut bad);
        check(
            "simd_transcendental",
            &mut p.simd_transcendental,
            PER_ELEMENT,
            d.simd_transcendental,
            &mut bad,
        );
        check(
            "simd_fixed",
            &mut p.simd_fixed,
            FIXED,
            d.simd_fixed,
            &mut bad,
        );
        check(
            "parallel_fixed",
            &mut p.parallel_fixed,
            FIXED,
            d.parallel_fixed,
            &mut bad,
        );
        check(
            "pool_wakeup",
            &mut p.pool_wakeup,
            FIXED,
            d.pool_wakeup,
            &mut bad,
        );
        check(
            "scalar_op",
            &mut p.scalar_op,
            PER_ELEMENT,
            d.scalar_op,
            &mut bad,
        );
        check(
            "scalar_element",
            &mut p.scalar_element,
            PER_ELEMENT,
            d.scalar_element,
            &mut bad,
        );
        check(
            "scalar_transcendental",
            &mut p.scalar_transcendental,
            PER_ELEMENT,
            d.scalar_transcendental,
            &mut bad,
        );
        check(
            "scalar_fixed",
            &mut p.scalar_fixed,
            FIXED,
            d.scalar_fixed,
            &mut bad,
        );
        check(
            "scan_element",
            &mut p.scan_element,
            PER_ELEMENT,
            d.scan_element,
            &mut bad,
        );
        check(
            "fresh_write_bandwidth",
            &mut p.fresh_write_bandwidth,
            BANDWIDTH,
            d.fresh_write_bandwidth,
            &mut bad,
        );
        check(
            "simd_compile",
            &mut p.simd_compile,
            COMPILE,
            d.simd_compile,
            &mut bad,
        );
        (self, bad)
    }
}

impl DeviceProfile {
    /// As [`CpuProfile::sanitized`]: implausible figures replaced by the
    /// prior (the software prior for a software device), with their names.
    pub(crate) fn sanitized(mut self) -> (DeviceProfile, Vec<&'static str>) {
        use plausible::*;
        let d = if self.software {
            DeviceProfile::software_prior()
        } else {
            DeviceProfile::default()
        };
        let mut bad = Vec::new();
        let p = &mut self;
        check(
            "upload_bandwidth",
            &mut p.upload_bandwidth,
            BANDWIDTH,
            d.upload_bandwidth,
            &mut bad,
        );
        check(
            "download_bandwidth",
            &mut p.download_bandwidth,
            BANDWIDTH,
            d.download_bandwidth,
            &mut bad,
        );
        // 0 is "not measured"; anything else must be a plausible rate.
        if p.large_download_bandwidth != 0.0 {
            check(
                "large_download_bandwidth",
                &mut p.large_download_bandwidth,
                BANDWIDTH,
                0.0,
                &mut bad,
            );
        }
        check(
            "transfer_latency",
            &mut p.transfer_latency,
            FIXED,
            d.transfer_latency,
            &mut bad,
        );
        check("launch", &mut p.launch, FIXED, d.launch, &mut bad);
        check("run_fixed", &mut p.run_fixed, FIXED, d.run_fixed, &mut bad);
        check(
            "bandwidth",
            &mut p.bandwidth,
            BANDWIDTH,
            d.bandwidth,
            &mut bad,
        );
        check("op", &mut p.op, PER_ELEMENT, d.op, &mut bad);
        check(
            "transcendental",
            &mut p.transcendental,
            PER_ELEMENT,
            d.transcendental,
            &mut bad,
        );
        check("compile", &mut p.compile, COMPILE, d.compile, &mut bad);
        (self, bad)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_probe_is_taken_whole_and_only_when_faster_by_the_margin() {
        let base = CpuProfile {
            simd_fixed: 400e-9,
            scalar_fixed: 300e-9,
            probed: true,
            ..CpuProfile::default()
        };
        let probe = |simd_fixed, scalar_fixed| CpuProfile {
            simd_fixed,
            scalar_fixed,
            parallel_fixed: 7e-9,
            bandwidth_one: 1e9,
            probed: true,
            ..CpuProfile::default()
        };
        // 10% faster, under a 15% margin: kept as it was.
        let mut p = base.clone();
        assert!(!p.take_faster_probe(&probe(360e-9, 0.0), 0.15));
        assert_eq!(p, base);
        // A zero fit is noise, never the fastest.
        assert!(!p.take_faster_probe(&probe(0.0, 100e-9), 0.15));
        // 25% faster: every probe figure, its zero-fitted one included
        // (the probe's figures go together); no other figure.
        assert!(p.take_faster_probe(&probe(300e-9, 0.0), 0.15));
        assert_eq!(
            (p.simd_fixed, p.scalar_fixed, p.parallel_fixed),
            (300e-9, 0.0, 7e-9)
        );
        assert_eq!(p.bandwidth_one, base.bandwidth_one);
        // Figures that are not a probe's are never taken.
        let unprobed = CpuProfile {
            probed: false,
            ..probe(1e-9, 0.0)
        };
        assert!(!p.take_faster_probe(&unprobed, 0.15));
    }

    /// A quick calibration that ran out of time before its probe keeps the
    /// priors' fixed costs (`cpu-simd` at 100 ns, faster than any run on
    /// the machines here): a later probe's figures replace them, slower or
    /// not. Before, a process whose quick calibration met a slow stretch
    /// priced every CPU backend's small runs at the priors for its life
    /// (`selector_eval`: `cpu-scalar` at 0.63x its time, model error 31%).
    #[test]
    fn a_probe_replaces_figures_no_probe_measured() {
        let quick = CpuProfile {
            measured: true,
            ..CpuProfile::default()
        };
        assert!(!quick.probed);
        let probe = CpuProfile {
            simd_fixed: 250e-9,
            scalar_fixed: 230e-9,
            probed: true,
            ..CpuProfile::default()
        };
        let mut p = quick.clone();
        assert!(p.take_faster_probe(&probe, 0.15));
        assert_eq!(
            (p.simd_fixed, p.scalar_fixed, p.probed),
            (250e-9, 230e-9, true)
        );
        // From then on only a faster probe by the margin.
        assert!(!p.take_faster_probe(&probe, 0.15));
    }
    use super::*;

    #[test]
    fn the_priors_are_plausible() {
        assert!(CpuProfile::default().sanitized().1.is_empty());
        assert!(DeviceProfile::default().sanitized().1.is_empty());
        assert!(DeviceProfile::software_prior().sanitized().1.is_empty());
    }

    #[test]
    fn a_parallel_bandwidth_below_one_threads_is_not_kept() {
        let cpu = CpuProfile {
            bandwidth_one: 11.4e9,
            bandwidth_all: 2.4e9,
            cache_bandwidth_one: 40e9,
            cache_bandwidth_all: 60e9,
            measured: true,
            ..CpuProfile::default()
        };
        let (p, bad) = cpu.clone().sanitized();
        assert_eq!(bad, ["bandwidth_all (below bandwidth_one)"]);
        assert_eq!(p.bandwidth_all, 11.4e9);
        assert_eq!(p.cache_bandwidth_all, 60e9);
        // Within the measurement's noise: kept.
        let close = CpuProfile {
            bandwidth_all: 10e9,
            ..cpu
        };
        assert!(close.sanitized().1.is_empty());
    }

    #[test]
    fn a_parallel_bandwidth_past_every_thread_at_one_threads_speed_is_capped() {
        let cpu = CpuProfile {
            threads: 2,
            near_bandwidth_one: 56e9,
            near_bandwidth_all: 161e9,
            cache_bandwidth_one: 40e9,
            cache_bandwidth_all: 60e9,
            bandwidth_one: 18e9,
            bandwidth_all: 28e9,
            measured: true,
            ..CpuProfile::default()
        };
        let (p, bad) = cpu.clone().sanitized();
        assert_eq!(
            bad,
            ["near_bandwidth_all (above threads x near_bandwidth_one)"]
        );
        assert_eq!(p.near_bandwidth_all, 2.0 * 56e9 * MAX_PARALLEL_GAIN);
        assert_eq!(p.cache_bandwidth_all, 60e9);
        assert_eq!(p.bandwidth_all, 28e9);
        // Sanitized once, it passes again unchanged.
        assert!(p.clone().sanitized().1.is_empty(), "{p:?}");
        // One thread: the parallel figures can be no more than its own.
        let one = CpuProfile {
            threads: 1,
            ..cpu.clone()
        };
        let (p, bad) = one.sanitized();
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert_eq!(p.bandwidth_all, 18e9 * MAX_PARALLEL_GAIN);
        assert!(p.clone().sanitized().1.is_empty(), "{p:?}");
        // The priors are what they are (on any thread count).
        let prior = CpuProfile {
            threads: 1,
            ..CpuProfile::default()
        };
        assert!(prior.sanitized().1.is_empty());
    }

    #[test]
    fn the_cache_tiers_stay_nested() {
        let cpu = CpuProfile {
            near_bytes: 8.0 * 1024.0 * 1024.0,
            cache_bytes: 2.0 * 1024.0 * 1024.0,
            near_bandwidth_one: 20e9,
            cache_bandwidth_one: 40e9,
            near_bandwidth_all: 50e9,
            cache_bandwidth_all: 60e9,
            measured: true,
            ..CpuProfile::default()
        };
        let (p, bad) = cpu.sanitized();
        assert_eq!(
            bad,
            [
                "near_bytes (above cache_bytes)",
                "near_bandwidth_one (below cache_bandwidth_one)",
                "near_bandwidth_all (below cache_bandwidth_all)"
            ]
        );
        assert_eq!(p.near_bytes, p.cache_bytes);
        assert_eq!(p.near_bandwidth_one, 40e9);
        assert_eq!(p.near_bandwidth_all, 60e9);
        // Sanitized once, it passes again unchanged (a persisted profile
        // is sanitized again when it is read).
        let again = p.clone().sanitized();
        assert!(again.1.is_empty(), "{:?}", again.1);
        assert_eq!(again.0, p);
        let raised = CpuProfile {
            near_bandwidth_one: 30e9,
            cache_bandwidth_one: 40e9,
            near_bandwidth_all: 33e9,
            cache_bandwidth_all: 30e9,
            ..CpuProfile::default()
        }
        .sanitized()
        .0;
        assert!(raised.clone().sanitized().1.is_empty(), "{raised:?}");
    }

    #[test]
    fn a_download_past_what_the_allocator_recycles_is_priced_at_its_own_rate() {
        let big = 2.0 * crate::cost::model::RECYCLED_OUTPUT_MAX;
        let small = 4.0 * 1024.0 * 1024.0;
        let unmeasured = DeviceProfile::software_prior();
        let d = DeviceProfile {
            large_download_bandwidth: 1.5e9,
            ..unmeasured.clone()
        };
        let fresh = 2.0e9;
        let at = |p: &DeviceProfile, bytes: f64, bw: f64| {
            (p.download_seconds(bytes, fresh) - (p.transfer_latency + bytes / bw)).abs() < 1e-12
        };
        assert!(at(&d, big, 1.5e9));
        assert!(at(&d, small, d.download_bandwidth));
        assert!(at(&unmeasured, small, unmeasured.download_bandwidth));
        // Not measured (0, a profile from before the field): the copy,
        // then the fresh pages' first touch at the host's rate.
        let both = 1.0 / (1.0 / unmeasured.download_bandwidth + 1.0 / fresh);
        let t = unmeasured.download_seconds(big, fresh);
        assert!(
            (t - (unmeasured.transfer_latency + big / both)).abs() < 1e-9,
            "{t}"
        );
        // Without the host's figure, the copy alone.
        let copy = unmeasured.transfer_latency + big / unmeasured.download_bandwidth;
        assert!((unmeasured.download_seconds(big, 0.0) - copy).abs() < 1e-12);
        // 0 is kept as "not measured"; an implausible rate is not.
        assert!(unmeasured.clone().sanitized().1.is_empty());
        let (p, bad) = DeviceProfile {
            large_download_bandwidth: -3.0,
            ..unmeasured
        }
        .sanitized();
        assert_eq!(bad, ["large_download_bandwidth"]);
        assert_eq!(p.large_download_bandwidth, 0.0);
    }

    #[test]
    fn implausible_figures_are_replaced_by_priors() {
        let cpu = CpuProfile {
            bandwidth_one: 0.0,
            bandwidth_all: f64::NAN,
            simd_op: -1.0,
            pool_wakeup: f64::INFINITY,
            threads: 0,
            measured: true,
            ..CpuProfile::default()
        };
        let (p, bad) = cpu.sanitized();
        assert_eq!(
            bad,
            [
                "bandwidth_one",
                "bandwidth_all",
                "threads",
                "simd_op",
                "pool_wakeup"
            ]
        );
        let d = CpuProfile::default();
        assert_eq!(p.bandwidth_one, d.bandwidth_one);
        assert_eq!(p.bandwidth_all, d.bandwidth_all);
        assert_eq!(p.simd_op, d.simd_op);
        assert!(p.measured);
        let dev = DeviceProfile {
            upload_bandwidth: 0.0,
            download_bandwidth: 0.0,
            bandwidth: 1e300,
            run_fixed: -1e-6,
            software: true,
            ..DeviceProfile::default()
        };
        let (p, bad) = dev.sanitized();
        assert_eq!(
            bad,
            [
                "upload_bandwidth",
                "download_bandwidth",
                "run_fixed",
                "bandwidth"
            ]
        );
        assert_eq!(p.bandwidth, DeviceProfile::software_prior().bandwidth);
        assert_eq!(p.run_fixed, 0.0);
    }
}
