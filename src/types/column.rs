//! Typed columns: borrowed inputs (`ColumnRef`) and owned outputs (`Column`).
//!
//! A column is one stream of one dtype. Backends read `ColumnRef`s and return
//! `Column`s; the query layer turns them back into `Vec<T>` without copying.

use super::{DType, Scalar};

/// A borrowed, typed input column.
#[derive(Copy, Clone, Debug)]
pub enum ColumnRef<'a> {
    /// `bool` values.
    Bool(&'a [bool]),
    /// `i32` values.
    I32(&'a [i32]),
    /// `u32` values.
    U32(&'a [u32]),
    /// `i64` values.
    I64(&'a [i64]),
    /// `u64` values.
    U64(&'a [u64]),
    /// `f32` values.
    F32(&'a [f32]),
    /// `f64` values.
    F64(&'a [f64]),
}

/// An owned, typed column.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// `bool` values.
    Bool(Vec<bool>),
    /// `i32` values.
    I32(Vec<i32>),
    /// `u32` values.
    U32(Vec<u32>),
    /// `i64` values.
    I64(Vec<i64>),
    /// `u64` values.
    U64(Vec<u64>),
    /// `f32` values.
    F32(Vec<f32>),
    /// `f64` values.
    F64(Vec<f64>),
}

macro_rules! each_column {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            Self::Bool($v) => $e,
            Self::I32($v) => $e,
            Self::U32($v) => $e,
            Self::I64($v) => $e,
            Self::U64($v) => $e,
            Self::F32($v) => $e,
            Self::F64($v) => $e,
        }
    };
}

impl<'a> ColumnRef<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        each_column!(self, v => v.len())
    }

    /// Whether the column has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            ColumnRef::Bool(_) => DType::Bool,
            ColumnRef::I32(_) => DType::I32,
            ColumnRef::U32(_) => DType::U32,
            ColumnRef::I64(_) => DType::I64,
            ColumnRef::U64(_) => DType::U64,
            ColumnRef::F32(_) => DType::F32,
            ColumnRef::F64(_) => DType::F64,
        }
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len() * self.dtype().size()
    }

    /// Element `i` as a scalar (the slow path of the reference interpreter).
    pub fn get(&self, i: usize) -> Scalar {
        each_column!(self, v => Scalar::from(v[i]))
    }

    /// The columns's bytes, as stored in memory.
    pub fn as_bytes(&self) -> &'a [u8] {
        // SAFETY: every element type is plain old data without padding, and
        // `bool` is one byte that is 0 or 1.
        each_column!(*self, v => unsafe {
            std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v))
        })
    }

    /// The elements in `range`.
    pub(crate) fn slice(&self, range: std::ops::Range<usize>) -> ColumnRef<'a> {
        match *self {
            ColumnRef::Bool(v) => ColumnRef::Bool(&v[range]),
            ColumnRef::I32(v) => ColumnRef::I32(&v[range]),
            ColumnRef::U32(v) => ColumnRef::U32(&v[range]),
            ColumnRef::I64(v) => ColumnRef::I64(&v[range]),
            ColumnRef::U64(v) => ColumnRef::U64(&v[range]),
            ColumnRef::F32(v) => ColumnRef::F32(&v[range]),
            ColumnRef::F64(v) => ColumnRef::F64(&v[range]),
        }
    }

    /// The bytes a device stores for the column: its own bytes (borrowed),
    /// except `bool`, which devices hold as 32-bit words, 0 or 1 (WGSL and
    /// PTX have no one-byte storage type).
    pub(crate) fn device_bytes(&self) -> std::borrow::Cow<'a, [u8]> {
        match self {
            ColumnRef::Bool(v) => v
                .iter()
                .flat_map(|&b| (b as u32).to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
            other => other.as_bytes().into(),
        }
    }
}

impl Column {
    /// An empty column of `dtype` with room for `capacity` elements.
    pub fn with_capacity(dtype: DType, capacity: usize) -> Column {
        match dtype {
            DType::Bool => Column::Bool(Vec::with_capacity(capacity)),
            DType::I32 => Column::I32(Vec::with_capacity(capacity)),
            DType::U32 => Column::U32(Vec::with_capacity(capacity)),
            DType::I64 => Column::I64(Vec::with_capacity(capacity)),
            DType::U64 => Column::U64(Vec::with_capacity(capacity)),
            DType::F32 => Column::F32(Vec::with_capacity(capacity)),
            DType::F64 => Column::F64(Vec::with_capacity(capacity)),
        }
    }

    /// An empty column with room for an output of `len` elements, to be
    /// appended in order: no zeroing (at 1,000 `f32` that is ~35 ns of a
    /// sub-microsecond query), and its pages readied as in
    /// [`Column::zeroed`].
    pub(crate) fn for_output(dtype: DType, len: usize) -> Column {
        let c = Column::with_capacity(dtype, len);
        // SAFETY: the range is this column's own (unused) allocation.
        each_column!(&c, v => unsafe { prepare_output(v.as_ptr().cast(), len * dtype.size()) });
        c
    }

    /// Sets the length of a column filled through its spare capacity.
    ///
    /// # Safety
    /// As [`Vec::set_len`]: `len` at most the capacity, and the elements
    /// up to `len` initialized.
    pub(crate) unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller's promise.
        each_column!(self, v => unsafe { v.set_len(len) })
    }

    /// A column of `len` zeros (or `false`).
    ///
    /// A large column is fresh, untouched memory from the system (the
    /// allocator knows it is already zero), and writing it the first time
    /// costs one page fault per 4 KiB page: for a 40 MB output that is
    /// about as long as computing it. On Linux such columns (8 MiB to 256
    /// MiB, `HUGE_PAGE_MAX_OUTPUT_BYTES`) are advised to use transparent huge
    /// pages, so the first writes fault 2 MiB at a time
    /// (`madvise(MADV_HUGEPAGE)`); a fresh one from 256 KiB to 8 MiB has
    /// its pages faulted in by one call before it is written (`prefault`).
    pub fn zeroed(dtype: DType, len: usize) -> Column {
        let c = match dtype {
            DType::Bool => Column::Bool(vec![false; len]),
            DType::I32 => Column::I32(vec![0; len]),
            DType::U32 => Column::U32(vec![0; len]),
            DType::I64 => Column::I64(vec![0; len]),
            DType::U64 => Column::U64(vec![0; len]),
            DType::F32 => Column::F32(vec![0.0; len]),
            DType::F64 => Column::F64(vec![0.0; len]),
        };
        // SAFETY: the range is this column's own allocation.
        each_column!(&c, v => unsafe { prepare_output(v.as_ptr().cast(), len * dtype.size()) });
        c
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.as_ref().dtype()
    }

    /// Keeps the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        each_column!(self, v => v.truncate(len))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each_column!(self, v => v.len())
    }

    /// Whether the column has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Borrows the column.
    pub fn as_ref(&self) -> ColumnRef<'_> {
        match self {
            Column::Bool(v) => ColumnRef::Bool(v),
            Column::I32(v) => ColumnRef::I32(v),
            Column::U32(v) => ColumnRef::U32(v),
            Column::I64(v) => ColumnRef::I64(v),
            Column::U64(v) => ColumnRef::U64(v),
            Column::F32(v) => ColumnRef::F32(v),
            Column::F64(v) => ColumnRef::F64(v),
        }
    }

    /// Appends the elements of a column of the same type.
    pub(crate) fn append(&mut self, other: &Column) {
        match (self, other) {
            (Column::Bool(a), Column::Bool(b)) => a.extend_from_slice(b),
            (Column::I32(a), Column::I32(b)) => a.extend_from_slice(b),
            (Column::U32(a), Column::U32(b)) => a.extend_from_slice(b),
            (Column::I64(a), Column::I64(b)) => a.extend_from_slice(b),
            (Column::U64(a), Column::U64(b)) => a.extend_from_slice(b),
            (Column::F32(a), Column::F32(b)) => a.extend_from_slice(b),
            (Column::F64(a), Column::F64(b)) => a.extend_from_slice(b),
            (a, b) => panic!(
                "internal error: appending a {} column to a {} column",
                b.dtype(),
                a.dtype()
            ),
        }
    }

    /// Appends a scalar of the column's type.
    pub fn push(&mut self, s: Scalar) {
        match (self, s) {
            (Column::Bool(v), Scalar::Bool(x)) => v.push(x),
            (Column::I32(v), Scalar::I32(x)) => v.push(x),
            (Column::U32(v), Scalar::U32(x)) => v.push(x),
            (Column::I64(v), Scalar::I64(x)) => v.push(x),
            (Column::U64(v), Scalar::U64(x)) => v.push(x),
            (Column::F32(v), Scalar::F32(x)) => v.push(x),
            (Column::F64(v), Scalar::F64(x)) => v.push(x),
            (c, s) => panic!(
                "internal error: pushing a {} into a {} column",
                s.dtype(),
                c.dtype()
            ),
        }
    }

    /// Size in bytes of the elements.
    pub fn byte_len(&self) -> usize {
        self.len() * self.dtype().size()
    }

    /// A column from the bytes a device stores ([`ColumnRef::device_bytes`]):
    /// copied whole for every type but `bool`, which is read from 32-bit
    /// words. A trailing partial element is ignored.
    pub(crate) fn from_device_bytes(dtype: DType, bytes: &[u8]) -> Column {
        if dtype == DType::Bool {
            return Column::Bool(
                bytes
                    .chunks_exact(4)
                    .map(|w| u32::from_le_bytes(w.try_into().expect("a word")) != 0)
                    .collect(),
            );
        }
        let n = bytes.len() / dtype.size();
        let mut c = Column::zeroed(dtype, n);
        let dst = c.as_bytes_mut().expect("not bool");
        let len = dst.len();
        dst.copy_from_slice(&bytes[..len]);
        c
    }

    /// The elements' bytes, writable: `None` for `bool`, whose bytes must
    /// stay 0 or 1. Every other element type is plain old data, so any
    /// bytes written are some value of it.
    pub(crate) fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Column::Bool(_) => None,
            // SAFETY: integers and floats have no padding and no invalid
            // bit patterns; the slice covers exactly the initialised elements.
            other => Some(each_column!(other, v => unsafe {
                std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(&v[..]))
            })),
        }
    }

    /// Grows (with zeros, or `false`) or shortens the column to `len`.
    pub(crate) fn resize(&mut self, len: usize) {
        each_column!(self, v => v.resize(len, Default::default()))
    }
}

/// An empty vector with room for an output of `len` elements, its pages
/// readied as [`Column::for_output`]'s.
pub(crate) fn vec_for_output<T>(len: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(len);
    // SAFETY: the range is this vector's own (unused) allocation.
    unsafe { prepare_output(v.as_ptr().cast(), len * std::mem::size_of::<T>()) };
    v
}

/// Columns from this size on are advised to use huge pages: four huge
/// pages, so that the unaligned ends (kept on small pages) are a small part.
pub(crate) const HUGE_PAGE_MIN_BYTES: usize = 8 << 20;

/// Outputs larger than this are left on 4 KiB pages. On the project's
/// cloud VMs (free page reporting on: freed 2 MiB blocks go back to the
/// host) a fresh 381 MiB output advised onto huge pages was written in
/// 60-360 ms by `cpu-parallel`, run to run, and in 93-110 ms steadily
/// on small pages; P3 and P4 at 10^8 in the bench took 151-162 and
/// 104-115 ms without the advice against 172-259 and 73-181 ms with it
/// (docs/performance.md, "Why P4 at 10^8 ran on `cpu-simd`"). At
/// 10^7 (40 MB) the advice made no measurable difference there, and
/// the relational operators' buffers (up to ~160 MB at 10^7) gain from
/// it, so only the largest outputs go without.
pub(crate) const HUGE_PAGE_MAX_OUTPUT_BYTES: usize = 256 << 20;

/// Whether an output of `bytes` is advised onto huge pages.
fn output_on_huge_pages(bytes: usize) -> bool {
    (HUGE_PAGE_MIN_BYTES..=HUGE_PAGE_MAX_OUTPUT_BYTES).contains(&bytes)
}

/// Outputs from this size on are looked at ([`is_fresh`]: what their
/// memory is, for the selector) and, up to [`HUGE_PAGE_MIN_BYTES`],
/// prefaulted in one call when fresh ([`prefault`]). Below it a query is a
/// few microseconds, and the check (a system call) would be a visible part
/// of it.
pub(crate) const PREFAULT_MIN_BYTES: usize = 256 << 10;

/// Readies the allocation at `ptr` for an output of `bytes`, every byte of
/// which the caller is about to write: huge pages for a large one, the
/// page tables filled at once for a mid-sized one that is fresh; what its
/// memory was is noted for [`take_output_memory`].
///
/// # Safety
///
/// `ptr..ptr + bytes` must lie within one live allocation.
unsafe fn prepare_output(ptr: *const u8, bytes: usize) {
    if bytes < PREFAULT_MIN_BYTES {
        return;
    }
    // SAFETY: the caller's promise.
    let fresh = unsafe { is_fresh(ptr, bytes) };
    if let Some(fresh) = fresh {
        note_output_memory(fresh);
    }
    if output_on_huge_pages(bytes) {
        // SAFETY: the caller's promise.
        unsafe { advise_huge_pages(ptr, bytes) };
    } else if bytes < HUGE_PAGE_MIN_BYTES && fresh == Some(true) {
        // SAFETY: the caller's promise.
        unsafe { prefault(ptr, bytes) };
    }
}

/// The memory a run's result columns are written into, as the allocator
/// gives it: fresh from the system (each page faults on its first write)
/// or recycled from freed blocks (already resident). Which one an output
/// gets depends on the allocator and the size (glibc maps blocks above its
/// threshold fresh each time; jemalloc and mimalloc recycle them) and is
/// steady for a program's loop of queries, but is not visible before the
/// output is allocated: the engine looks at each result of 256 KiB or more
/// (one `mincore` of its middle page) and expects a plan's next run at the
/// same size to get what its last run got. Runs on fresh and on resident
/// memory are learned apart, as different size buckets.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutputMemory {
    /// Not looked at: a small or no column result, a run not seen yet, a
    /// system without `mincore`.
    #[default]
    Unknown,
    /// Recycled: the pages are already resident.
    Resident,
    /// Fresh from the system: the first writes fault the pages in.
    Fresh,
}

impl OutputMemory {
    /// The word the metrics line and explain print for it
    /// (`output_memory=fresh`); none when it was not looked at.
    pub fn label(self) -> Option<&'static str> {
        match self {
            OutputMemory::Fresh => Some("fresh"),
            OutputMemory::Resident => Some("recycled"),
            OutputMemory::Unknown => None,
        }
    }
}

thread_local! {
    /// What the outputs readied on this thread since the last
    /// [`take_output_memory`] were written into.
    static OUTPUT_MEMORY: std::cell::Cell<OutputMemory> =
        const { std::cell::Cell::new(OutputMemory::Unknown) };
}

/// Records an output of fresh (or resident) memory: fresh wins, as its
/// faults dominate a run.
fn note_output_memory(fresh: bool) {
    let _ = OUTPUT_MEMORY.try_with(|m| {
        if fresh {
            m.set(OutputMemory::Fresh);
        } else if m.get() == OutputMemory::Unknown {
            m.set(OutputMemory::Resident);
        }
    });
}

/// What the outputs of 256 KiB or more readied on this thread since the
/// last call were written into: [`OutputMemory::Fresh`] if any was fresh.
/// Resets it. (A backend allocates its result columns on the thread that
/// called it; the executor calls this around each run.)
pub(crate) fn take_output_memory() -> OutputMemory {
    OUTPUT_MEMORY
        .try_with(|m| m.replace(OutputMemory::Unknown))
        .unwrap_or_default()
}

/// Whether the page at the middle of `ptr..ptr + bytes` is not resident
/// yet (`mincore`, one system call): memory the allocator took fresh from the
/// system, which the first writes fault in a page at a time. `None` where
/// it cannot be told.
///
/// # Safety
///
/// `ptr..ptr + bytes` must lie within one live allocation.
unsafe fn is_fresh(ptr: *const u8, bytes: usize) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        let (start, end) = whole_pages(ptr, bytes)?;
        let middle = (start + (end - start) / 2) & !(PAGE - 1);
        let mut resident = 0u8;
        // SAFETY: one whole page inside the caller's allocation, and one
        // byte to write its residency into.
        let checked = unsafe { libc::mincore(middle as *mut libc::c_void, PAGE, &mut resident) };
        (checked == 0).then_some(resident & 1 == 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ptr, bytes);
        None
    }
}

/// Fills in the page tables of the whole 4 KiB pages of `ptr..ptr + bytes`
/// in one call (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14), for fresh
/// memory ([`is_fresh`]) that the first writes would otherwise fault in a
/// page at a time, each fault a trap: P4 at 10^5 into fresh memory went
/// from 0.73-0.88x std's `map().collect()` to 1.33-1.37x with it
/// (`bench -- --collect`, docs/performance.md). On resident memory it
/// would walk every page again for nothing, hence the check first. Memory
/// contents are unchanged; any failure leaves the pages to fault as
/// before, and a kernel without the advice is not asked again.
///
/// # Safety
///
/// `ptr..ptr + bytes` must lie within one live allocation.
unsafe fn prefault(ptr: *const u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        static UNSUPPORTED: AtomicBool = AtomicBool::new(false);
        if UNSUPPORTED.load(Relaxed) {
            return;
        }
        let Some((start, end)) = whole_pages(ptr, bytes) else {
            return;
        };
        // SAFETY: a page-aligned range inside the caller's allocation;
        // MADV_POPULATE_WRITE faults its pages in writable and changes no
        // contents and no mapping.
        let done = unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if done != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            UNSUPPORTED.store(true, Relaxed);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

/// The page size the advice and the checks here work in.
#[cfg(target_os = "linux")]
const PAGE: usize = 4096;

/// The whole pages of `ptr..ptr + bytes` as an address range, or `None`
/// when it holds none (the system calls here take page-aligned ranges).
#[cfg(target_os = "linux")]
fn whole_pages(ptr: *const u8, bytes: usize) -> Option<(usize, usize)> {
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + bytes) & !(PAGE - 1);
    (end > start).then_some((start, end))
}

/// Asks the kernel to back the whole 4 KiB pages of `ptr..ptr + bytes` with
/// transparent huge pages. Only advice: with THP disabled, or on other
/// systems, nothing changes, and the result is ignored either way.
///
/// # Safety
///
/// `ptr..ptr + bytes` must lie within one live allocation.
pub(crate) unsafe fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    if let Some((start, end)) = whole_pages(ptr, bytes) {
        // SAFETY: a page-aligned range inside the caller's allocation;
        // MADV_HUGEPAGE changes no contents and no mapping.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

/// `values` with their nulls: `None` where `valid` is false (`valid`
/// `None`: no value is null).
pub(crate) fn with_nulls<T>(values: Vec<T>, valid: Option<Vec<bool>>) -> Vec<Option<T>> {
    match valid {
        Some(valid) => values
            .into_iter()
            .zip(valid)
            .map(|(x, ok)| ok.then_some(x))
            .collect(),
        None => values.into_iter().map(Some).collect(),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A fresh private mapping of `pages` pages.
    fn map(pages: usize) -> *mut libc::c_void {
        // SAFETY: a new private anonymous mapping (unmapped by `unmap`).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p
    }

    fn unmap(p: *mut libc::c_void, pages: usize) {
        // SAFETY: a mapping made by `map` with this many pages.
        unsafe { libc::munmap(p, pages * 4096) };
    }

    /// Which of the `pages` pages from `p` are resident.
    fn resident(p: *mut libc::c_void, pages: usize) -> Vec<bool> {
        let mut v = vec![0u8; pages];
        // SAFETY: `pages` whole pages of a live mapping, one byte each.
        assert_eq!(unsafe { libc::mincore(p, pages * 4096, v.as_mut_ptr()) }, 0);
        v.iter().map(|b| b & 1 != 0).collect()
    }

    /// Whether this kernel has `MADV_POPULATE_WRITE` (Linux 5.14).
    fn populate_supported() -> bool {
        let p = map(1);
        // SAFETY: the page just mapped.
        let ok = unsafe { libc::madvise(p, 4096, libc::MADV_POPULATE_WRITE) } == 0;
        unmap(p, 1);
        ok
    }

    #[test]
    fn a_fresh_output_is_faulted_in_at_once_and_keeps_its_bytes() {
        if !populate_supported() {
            println!("skipped: madvise(MADV_POPULATE_WRITE) unsupported by this kernel");
            return;
        }
        const PAGES: usize = 128;
        let len = PAGES * 4096;
        let p = map(PAGES);
        // The first page written, as an allocator writes a block's header.
        // SAFETY: inside the mapping.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0xA5, 64) };
        assert!(!resident(p, PAGES)[PAGES / 2]);
        take_output_memory();
        // The output starts past the "header", as an allocator's would.
        // SAFETY: the range lies inside the mapping.
        unsafe { prepare_output(p.cast::<u8>().add(16), len - 16) };
        assert_eq!(take_output_memory(), OutputMemory::Fresh);
        assert_eq!(take_output_memory(), OutputMemory::Unknown, "reset");
        let after = resident(p, PAGES);
        assert!(after.iter().all(|&r| r), "{after:?}");
        // SAFETY: inside the mapping.
        let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
        assert!(bytes[..64].iter().all(|&b| b == 0xA5));
        assert!(bytes[64..].iter().all(|&b| b == 0));
        unmap(p, PAGES);
    }

    #[test]
    fn small_and_resident_outputs_are_left_as_they_are() {
        // Below the prefault size: the pages fault as they are written.
        let pages = PREFAULT_MIN_BYTES / 4096 - 1;
        let p = map(pages);
        take_output_memory();
        // SAFETY: the range is the mapping.
        unsafe { prepare_output(p.cast(), pages * 4096) };
        assert!(resident(p, pages).iter().all(|&r| !r));
        assert_eq!(take_output_memory(), OutputMemory::Unknown, "not looked at");
        unmap(p, pages);
        // Resident memory (its middle page written): the same bytes after.
        let mut v: Vec<u32> = (0..(PREFAULT_MIN_BYTES / 4 + 1000) as u32).collect();
        // SAFETY: the vector's own allocation.
        unsafe { prepare_output(v.as_mut_ptr().cast(), v.len() * 4) };
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        assert_eq!(take_output_memory(), OutputMemory::Resident);
        // A huge-page output is looked at too (advised, not prefaulted),
        // and one fresh output among resident ones makes the run's fresh.
        let pages = HUGE_PAGE_MIN_BYTES / 4096;
        let p = map(pages);
        // SAFETY: the vector's own allocation, then the mapping.
        unsafe {
            prepare_output(v.as_mut_ptr().cast(), v.len() * 4);
            prepare_output(p.cast(), pages * 4096);
        }
        assert_eq!(take_output_memory(), OutputMemory::Fresh);
        assert!(!resident(p, pages)[pages / 2], "advised, not prefaulted");
        unmap(p, pages);
    }
}
