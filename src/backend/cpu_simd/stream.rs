//! Streaming (non-temporal) stores for outputs larger than the last-level
//! cache.
//!
//! A plain store to a line that is not in the cache first reads the line
//! (read for ownership), so writing an output the size of memory moves
//! its bytes over the memory bus twice. A collect of 10^7 `f32` from an
//! input of 10^7 reads 40 MB, reads the output's 40 MB for ownership and
//! writes them back: 120 MB where 80 MB would do. A streaming store
//! writes whole lines through write-combining buffers without reading
//! them, which is what a memory-bound collect wants once its output
//! cannot stay in the cache anyway: a later read of it goes to memory
//! either way. Below the last-level cache's size the output is stored as
//! before (a consumer that reads it next finds it in the cache).
//!
//! Values are copied, never changed: a streamed output has the same bits.
//! Streaming stores are weakly ordered, so a run that streamed ends with
//! a store fence ([`fence`]) before its output is handed to anyone.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The last-level cache's size in bytes, the output size from which a
/// collect streams: 0 while not probed yet.
static LLC_BYTES: AtomicU64 = AtomicU64::new(0);

/// Streaming stores turned off (`Config::stream_stores`).
static OFF: AtomicBool = AtomicBool::new(false);

/// Used when the last-level cache's size cannot be read.
const DEFAULT_LLC: u64 = 32 << 20;

/// Turns streaming stores on or off for this process
/// (`Config::stream_stores`; the engine built last decides).
pub(crate) fn set_enabled(on: bool) {
    OFF.store(!on, Ordering::Relaxed);
}

/// The output size in bytes from which a collect streams its stores
/// (`u64::MAX` when streaming is off).
#[inline]
pub(crate) fn min_bytes() -> u64 {
    if OFF.load(Ordering::Relaxed) {
        return u64::MAX;
    }
    match LLC_BYTES.load(Ordering::Relaxed) {
        0 => {
            let v = probe();
            LLC_BYTES.store(v, Ordering::Relaxed);
            v
        }
        v => v,
    }
}

/// Sets the threshold (tests: small outputs stream too; the values are
/// the same either way, so tests running meanwhile are not disturbed).
#[cfg(test)]
pub(crate) fn set_min_bytes(bytes: u64) {
    LLC_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// Whether this target has streaming stores (x86-64: SSE2's, always).
pub(crate) const AVAILABLE: bool = cfg!(target_arch = "x86_64");

/// The last-level cache's size, from Linux's sysfs (the largest level of
/// cpu0's caches that holds data), else [`DEFAULT_LLC`].
#[cold]
fn probe() -> u64 {
    llc_bytes().filter(|&b| b >= 1 << 20).unwrap_or(DEFAULT_LLC)
}

fn llc_bytes() -> Option<u64> {
    let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best: Option<(u32, u64)> = None;
    for entry in std::fs::read_dir(base).ok()?.flatten() {
        let dir = entry.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        if kind.trim() == "Instruction" {
            continue;
        }
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(size.trim())) else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, s)| s)
}

/// `"32768K"`, `"1M"` or `"512"` (bytes) as bytes.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// Copies a block into its place in the output with streaming stores
/// (the bytes before the first 16-byte boundary, and after the last,
/// with plain ones). Call [`fence`] before the output is read elsewhere.
#[inline]
pub(crate) fn store<T: Copy>(out: &mut [MaybeUninit<T>], x: &[T]) {
    let n = out.len().min(x.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let bytes = std::mem::size_of_val(&x[..n]);
        let src = x.as_ptr().cast::<u8>();
        let dst = out.as_mut_ptr().cast::<u8>();
        let head = dst.align_offset(16).min(bytes);
        // SAFETY: `src` and `dst` hold `bytes` bytes each and do not
        // overlap (a window of the output never overlaps a block
        // register); every access below is within them, and each
        // streaming store's address is 16-byte aligned (`head` moves
        // `dst` to the boundary). SSE2 is part of the x86-64 baseline.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let mut i = head;
            while i + 64 <= bytes {
                let a = _mm_loadu_si128(src.add(i).cast::<__m128i>());
                let b = _mm_loadu_si128(src.add(i + 16).cast::<__m128i>());
                let c = _mm_loadu_si128(src.add(i + 32).cast::<__m128i>());
                let d = _mm_loadu_si128(src.add(i + 48).cast::<__m128i>());
                _mm_stream_si128(dst.add(i).cast::<__m128i>(), a);
                _mm_stream_si128(dst.add(i + 16).cast::<__m128i>(), b);
                _mm_stream_si128(dst.add(i + 32).cast::<__m128i>(), c);
                _mm_stream_si128(dst.add(i + 48).cast::<__m128i>(), d);
                i += 64;
            }
            while i + 16 <= bytes {
                let a = _mm_loadu_si128(src.add(i).cast::<__m128i>());
                _mm_stream_si128(dst.add(i).cast::<__m128i>(), a);
                i += 16;
            }
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), bytes - i);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    super::kernels::store(&mut out[..n], &x[..n]);
}

/// Orders this thread's streaming stores before its later stores (the
/// task's completion, the result's hand-over).
#[inline]
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("x1K"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }

    /// Every alignment of the destination and every length around the
    /// 16- and 64-byte steps: the bytes of the source, no more.
    #[test]
    fn streamed_copies_are_exact() {
        let src: Vec<u32> = (0..300u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        for off in 0..8 {
            for n in [0, 1, 3, 4, 5, 15, 16, 17, 31, 64, 65, 100, 257] {
                let mut buf = vec![MaybeUninit::new(7u32); off + n + 8];
                store(&mut buf[off..off + n], &src[..n]);
                fence();
                let got: Vec<u32> = buf.iter().map(|v| unsafe { v.assume_init() }).collect();
                assert!(got[..off].iter().all(|&v| v == 7), "before {off}/{n}");
                assert_eq!(&got[off..off + n], &src[..n], "{off}/{n}");
                assert!(got[off + n..].iter().all(|&v| v == 7), "after {off}/{n}");
            }
        }
        // Bytes of odd alignment: f64 lanes behind a u8 offset are not
        // possible in a column, but the copy is bytewise anyway.
        let src: Vec<u8> = (0..200u8).collect();
        for off in 0..17 {
            let mut buf = vec![MaybeUninit::new(0u8); off + 200];
            store(&mut buf[off..], &src);
            let got: Vec<u8> = buf[off..]
                .iter()
                .map(|v| unsafe { v.assume_init() })
                .collect();
            assert_eq!(got, src);
        }
    }

    #[test]
    fn the_threshold_is_a_cache_size() {
        let b = probe();
        assert!(b >= 1 << 20, "{b}");
    }
}
