//! Which algorithm a run's relational stage used (shown in its metrics and
//! in `explain_analyze`).

use std::fmt;

/// What a radix sort did: the digit passes it ran and the digits its keys
/// have (a digit equal in every key is skipped).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Passes {
    /// Scatter passes run.
    pub passes: u8,
    /// Digits (bytes) of the keys.
    pub digits: u8,
}

/// The algorithm a run used, shown in its metrics.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// A stable comparison sort of the rows (the reference).
    StableSort,
    /// The standard library's sort of `(key, position)` words (small
    /// inputs).
    SmallSort,
    /// LSD radix sort, 8-bit digits.
    LsdRadix(Passes),
    /// MSD partition on the top digit across threads, then LSD radix in
    /// every bucket.
    MsdLsdRadix(Passes),
    /// LSD radix sort on a device: per 8-bit digit, counts per workgroup,
    /// their scan, and a scatter ranked stably in workgroup memory.
    DeviceRadix(Passes),
    /// Groups on a device: the rows sorted by key with the device radix
    /// sort, the groups' first rows compacted, one invocation per group
    /// folding its rows in order.
    DeviceSortGroups(Passes),
    /// Top-k on a device: a radix select of the `k`-th row (digit counts
    /// of the candidates still tied, most significant digit first, input
    /// position breaking ties), the rows before it compacted in input
    /// order, then the device radix sort of those rows.
    DeviceRadixSelect {
        /// Digit passes of the selection.
        select: u8,
        /// Digit passes of the sort of the selected rows.
        sort: u8,
    },
    /// Groups by a direct index over a dense key range of `span` values.
    DirectIndex {
        /// Values the keys span.
        span: u64,
    },
    /// Groups by hashing the keys, in `tables` tables merged in order.
    HashGroups {
        /// Hash tables built (one per chunk of rows across threads).
        tables: u32,
    },
    /// Groups of many keys: the rows scattered into `partitions` ordered
    /// key ranges, each grouped in a hash table of its own.
    PartitionedGroups {
        /// Key-range partitions.
        partitions: u32,
    },
    /// Groups in an ordered map, row by row (the reference).
    OrderedMap,
    /// A join through an ordered map of the build rows (the reference).
    OrderedMapJoin,
    /// A hash join: the smaller side's keys hashed, the other side
    /// matched against them.
    HashJoin {
        /// Rows of the side hashed.
        built_rows: u64,
        /// Whether that side is the probe side (the stream reaching the
        /// join) rather than the build side.
        probe_side: bool,
    },
    /// A join on a device: the build side's key words sorted with the
    /// device radix sort (carrying its rows), each probe row's matches
    /// found by two binary searches, their counts scanned into output
    /// positions, the pairs written in probe order.
    DeviceSortMergeJoin(Passes),
    /// Selection of the first `rows` rows (top-k) without a full sort.
    Select {
        /// The row limit.
        rows: u64,
    },
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::StableSort => write!(f, "stable comparison sort"),
            Algorithm::SmallSort => write!(f, "std sort (small input)"),
            Algorithm::LsdRadix(p) => {
                write!(f, "lsd-radix {} of {} digit passes", p.passes, p.digits)
            }
            Algorithm::MsdLsdRadix(p) => write!(
                f,
                "msd+lsd-radix over threads {} of {} digit passes",
                p.passes, p.digits
            ),
            Algorithm::DeviceRadix(p) => write!(
                f,
                "device lsd-radix (reduce-then-scan) {} of {} digit passes",
                p.passes, p.digits
            ),
            Algorithm::DeviceSortGroups(p) => write!(
                f,
                "device groups by lsd-radix sort ({} digit passes), a fold per group",
                p.passes
            ),
            Algorithm::DeviceRadixSelect { select, sort } => write!(
                f,
                "device radix select ({select} digit passes), then lsd-radix of the selected rows ({sort} digit passes)"
            ),
            Algorithm::DeviceSortMergeJoin(p) => write!(
                f,
                "device join: build side by lsd-radix sort ({} digit passes), binary-searched per probe row",
                p.passes
            ),
            Algorithm::Select { rows } => write!(f, "top-k selection of {rows} rows"),
            Algorithm::DirectIndex { span } => write!(f, "direct index over {span} key values"),
            Algorithm::HashGroups { tables } => write!(f, "hash groups ({tables} tables)"),
            Algorithm::PartitionedGroups { partitions } => {
                write!(f, "hash groups in {partitions} key-range partitions")
            }
            Algorithm::OrderedMap => write!(f, "ordered map (reference)"),
            Algorithm::OrderedMapJoin => write!(f, "ordered-map join (reference)"),
            Algorithm::HashJoin {
                built_rows,
                probe_side,
            } => write!(
                f,
                "hash join, {} side hashed ({built_rows} rows)",
                if *probe_side { "probe" } else { "build" }
            ),
        }
    }
}
