//! Large blocks as fresh private mappings of their own, recorded so that a
//! global allocator recognizes them when they are freed (whatever its mode
//! is by then): the fresh-memory regime of `examples/bench.rs` and of
//! `tests/selector.rs`. Every first write of such a block faults its pages
//! in, whatever the system allocator would have reused.

use std::alloc::Layout;
use std::sync::Mutex;

/// Live mappings: (address, mapped length); an empty slot has address 0.
pub struct FreshMappings(Mutex<[(usize, usize); 16]>);

impl FreshMappings {
    pub const fn new() -> FreshMappings {
        FreshMappings(Mutex::new([(0, 0); 16]))
    }

    /// A new mapping for `l` (at most a page's alignment, a free slot to
    /// record it, Linux), or null.
    pub fn map(&self, l: Layout) -> *mut u8 {
        #[cfg(target_os = "linux")]
        {
            if l.align() > 4096 {
                return std::ptr::null_mut();
            }
            let mut mapped = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let Some(slot) = mapped.iter_mut().find(|s| s.0 == 0) else {
                return std::ptr::null_mut();
            };
            let len = l.size().next_multiple_of(4096);
            // SAFETY: a new private anonymous mapping; nothing else is touched.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            *slot = (p as usize, len);
            p.cast()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = l;
            std::ptr::null_mut()
        }
    }

    /// Whether `p` is one of these mappings.
    pub fn contains(&self, p: *mut u8) -> bool {
        let mapped = self.0.lock().unwrap_or_else(|e| e.into_inner());
        mapped.iter().any(|s| s.0 == p as usize)
    }

    /// Unmaps `p` if it is one of these mappings; whether it was.
    pub fn unmap(&self, p: *mut u8) -> bool {
        let mut mapped = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = mapped.iter_mut().find(|s| s.0 == p as usize) else {
            return false;
        };
        let (addr, len) = std::mem::take(slot);
        #[cfg(target_os = "linux")]
        // SAFETY: a mapping made by `map`, unmapped once (its slot is
        // emptied above).
        unsafe {
            libc::munmap(addr as *mut libc::c_void, len)
        };
        let _ = (addr, len);
        true
    }
}
