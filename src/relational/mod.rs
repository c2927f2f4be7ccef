//! Relational operators on the host: the sorts (and top-k) that end a
//! sort stage, the keyed aggregation that ends a group stage and the
//! equi-joins that end a join stage. Every
//! CPU backend materializes the stage's key and output columns with its
//! own element program (or reads plain input columns as they are), then
//! hands them here with its [`Strategy`]; `cpu-scalar`'s is the obviously
//! right reference the others are tested against.

mod group;
/// The group words wgpu's host merge of chunked groups orders by.
#[cfg(feature = "wgpu")]
pub(crate) use group::{f32_group_word, f64_group_word};
mod join;
mod partition;
mod radix;
mod slots;
mod sort;
/// The wgpu backend's merge of chunked sorts gathers rows as the CPU does.
#[cfg(feature = "wgpu")]
pub(crate) use sort::gather;

use crate::expr::{Node, Value};
pub(crate) use crate::metrics::Algorithm;
use crate::plan::{Stage, Terminal};
use crate::types::{Column, ColumnRef, Fault, Scalar};
use smallvec::SmallVec;

/// How a backend runs the relational operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `cpu-scalar`: the standard library's stable sort with the canonical
    /// comparison, the reference.
    Reference,
    /// `cpu-simd`: radix sorts and hash or direct-index groups on the
    /// calling thread.
    Sequential,
    /// `cpu-parallel`: the same across the thread pool.
    Parallel,
}

/// The row limit of a sort stage, if any.
fn limit(fetch: Option<u16>, params: &[Scalar]) -> Option<usize> {
    fetch.map(|p| match params[p as usize] {
        Scalar::U64(n) => usize::try_from(n).unwrap_or(usize::MAX),
        other => other.cast(crate::types::DType::U64).to_bits() as usize,
    })
}

/// Sorts, groups or joins the columns a sort, group or join stage
/// materialized (`materialized`, in the order of
/// [`Terminal::materialized`]; a join's build side from the query's
/// `sources`) and returns the columns it writes. `None` for the other
/// stages.
pub(crate) fn finish_stage(
    stage: &Stage,
    materialized: &[ColumnRef<'_>],
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
    strategy: Strategy,
) -> Option<Result<(Vec<Column>, Algorithm), Fault>> {
    let order = stage.terminal.materialized();
    let at = |v: Value| materialized[order.iter().position(|&m| m == v).expect("materialized")];
    if let Terminal::Join {
        kind,
        keys,
        columns,
        build,
    } = &stage.terminal
    {
        let side: Option<SmallVec<[ColumnRef<'_>; 4]>> = build
            .iter()
            .map(|&(k, _)| sources.get(k as usize).copied())
            .collect();
        let Some(side) = side else {
            return Some(Err(Fault::Dangling("a join's build input".into())));
        };
        let (bk, bc) = side.split_at(keys.len().min(side.len()));
        let pk: SmallVec<[ColumnRef<'_>; 2]> = keys.iter().map(|&k| at(k)).collect();
        let pc: SmallVec<[ColumnRef<'_>; 4]> = columns.iter().map(|&c| at(c)).collect();
        let added: &[ColumnRef<'_>] = if *kind == crate::plan::JoinKind::Inner {
            bc
        } else {
            &[]
        };
        return Some(join::join(*kind, &pk, &pc, bk, added, strategy));
    }
    if let Terminal::Group {
        keys,
        aggs,
        first_seen,
    } = &stage.terminal
    {
        let ks: SmallVec<[ColumnRef<'_>; 2]> = keys.iter().map(|&k| at(k)).collect();
        let gs: SmallVec<[group::GroupAgg<'_>; 4]> = aggs
            .iter()
            .map(|a| group::GroupAgg {
                kind: a.kind.clone(),
                col: a.column.map(at),
            })
            .collect();
        return Some(group::group(&ks, &gs, *first_seen, strategy));
    }
    let Terminal::Sort {
        keys,
        columns,
        fetch,
    } = &stage.terminal
    else {
        return None;
    };
    let ks: SmallVec<[sort::Key<'_>; 2]> = keys
        .iter()
        .map(|k| sort::Key {
            col: at(k.value),
            descending: k.descending,
        })
        .collect();
    let cols: SmallVec<[ColumnRef<'_>; 4]> = columns.iter().map(|&c| at(c)).collect();
    let column_key: SmallVec<[Option<usize>; 4]> = columns
        .iter()
        .map(|c| keys.iter().position(|k| k.value == *c))
        .collect();
    Some(Ok(sort::sort(
        &ks,
        &cols,
        &column_key,
        limit(*fetch, params),
        strategy,
    )))
}

/// The columns a sort, group or join stage would materialize, read
/// straight from its inputs when each is an input slot (no predicate, no
/// computed key): the copy a collect would make is skipped.
pub(crate) fn direct_columns<'a>(
    stage: &Stage,
    inputs: &[ColumnRef<'a>],
    params: &[Scalar],
) -> Option<SmallVec<[ColumnRef<'a>; 4]>> {
    if !stage.terminal.is_relational() || stage.predicate.is_some() || stage.enumerates > 0 {
        return None;
    }
    let lens: SmallVec<[usize; 4]> = inputs.iter().map(|c| c.len()).collect();
    let range = stage.resolve_range(&lens, params);
    stage
        .terminal
        .materialized()
        .iter()
        .map(|&v| match stage.program.get(v).node {
            Node::Input(s) => {
                let off = range.offsets[s as usize];
                Some(inputs[s as usize].slice(off..off + range.len))
            }
            _ => None,
        })
        .collect()
}
