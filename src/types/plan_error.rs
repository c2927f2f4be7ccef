//! Why a traced graph, a physical plan or a run's inputs were rejected.

use super::DType;

/// A traced graph, a physical plan, or the inputs of a run, that break an
/// invariant computeq keeps itself: reaching one is a bug in computeq or in
/// a plan built by hand (`plumbing`), except [`Fault::Escaped`], a query
/// that used an expression outside the closure that made it. The planner
/// and every backend report these, each with the stage it concerns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The plan has no stage, or the graph no node.
    #[error("the plan has no stage")]
    NoStage,
    /// The traced graph is not one chain from the source to the terminal.
    #[error("the graph is not a chain: {reachable} of {nodes} nodes reachable")]
    NotAChain {
        /// Nodes reachable along the chain.
        reachable: usize,
        /// Nodes in the graph.
        nodes: usize,
    },
    /// A graph node was left unfused before lowering.
    #[error("graph node {node} was not fused: {what}")]
    NotFused {
        /// Its position in the chain.
        node: usize,
        /// The node, printed.
        what: String,
    },
    /// A run's input has another type than the plan reads.
    #[error("input {input} holds {found} but the plan reads {expected}")]
    InputType {
        /// The input.
        input: usize,
        /// The type the plan reads.
        expected: DType,
        /// The input's type.
        found: DType,
    },
    /// A compiled artifact belongs to another plan.
    #[error("the compiled program does not match the plan")]
    ProgramMismatch,
    /// An optimizer pass left the graph invalid (checked when
    /// `Config::verify_passes` is on).
    #[error("the graph is invalid after pass `{pass}`: {error}")]
    AfterPass {
        /// The pass.
        pass: &'static str,
        /// What is wrong now.
        error: Box<PlanError>,
    },
    /// Something wrong in the traced graph itself.
    #[error("{0}")]
    Graph(Fault),
    /// Something wrong in one stage.
    #[error("stage {stage}: {fault}")]
    Stage {
        /// The stage's index.
        stage: usize,
        /// What is wrong.
        fault: Fault,
    },
}

/// What is wrong in a graph or a stage ([`PlanError`]). Values are named by
/// their index in the program (`v12`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fault {
    /// An expression program failed its checks (types, operands, order).
    #[error("invalid expressions: {0}")]
    Expressions(String),
    /// A closure used an expression traced by another closure (one that
    /// escaped it, e.g. through a captured variable).
    #[error(
        "it reads v{value} ({node}), which belongs to another stage: an expression escaped \
         the closure that created it"
    )]
    Escaped {
        /// The value read.
        value: u32,
        /// Its node, printed.
        node: String,
    },
    /// A value the stage refers to is not in its program.
    #[error("v{0} is not in the program")]
    MissingValue(u32),
    /// A predicate is not a `bool`.
    #[error("predicate v{value} is a {ty}, not a bool")]
    PredicateNotBool {
        /// The predicate's value.
        value: u32,
        /// Its type.
        ty: DType,
    },
    /// A stage other than the last ends in a reduction.
    #[error("it reduces but is not the last stage")]
    ReduceNotLast,
    /// An aggregate that takes no predicate has one.
    #[error("{0} with a predicate")]
    PredicatedAggregate(&'static str),
    /// An aggregate lacks its column, or a count has one.
    #[error("{0} without its column, or a count with one")]
    AggregateColumn(&'static str),
    /// An aggregate over a column of a type it does not take.
    #[error("{agg} of a {ty} column")]
    AggregateType {
        /// The aggregate.
        agg: &'static str,
        /// The column's type.
        ty: DType,
    },
    /// A scan carries a predicate (a filter before a scan ends its stage).
    #[error("a scan with a predicate")]
    PredicatedScan,
    /// A sum scan over a non-numeric column.
    #[error("a sum scan of a {0} column")]
    ScanType(DType),
    /// A user `reduce`/`scan` combine program is malformed.
    #[error("combine program: {0}")]
    Combine(String),
    /// A stage input, range operation or slot refers to nothing.
    #[error("{0} refers to nothing")]
    Dangling(String),
    /// One input slot is read at two types.
    #[error("input slot {slot} is read both as {first} and as {second}")]
    SlotTypes {
        /// The slot.
        slot: u16,
        /// The first type read.
        first: DType,
        /// The other.
        second: DType,
    },
    /// A backend's compiler met a value it did not prepare (a compiler bug).
    #[error("v{0} was not compiled")]
    NotCompiled(u32),
    /// A run gives fewer parameters than the stage reads.
    #[error("the stage reads {needed} parameters, the run has {given}")]
    Params {
        /// Parameters read.
        needed: usize,
        /// Parameters given.
        given: usize,
    },
    /// A run gives another number of inputs than the stage has slots.
    #[error("the stage has {slots} input slots, the run gives {given}")]
    InputCount {
        /// Slots.
        slots: usize,
        /// Inputs given.
        given: usize,
    },
    /// A run's input has another type than the stage reads.
    #[error("input slot {slot} is read as {expected} but holds {found}")]
    InputType {
        /// The slot.
        slot: usize,
        /// The type read.
        expected: DType,
        /// The input's type.
        found: DType,
    },
    /// A run's input is shorter than the stage's range.
    #[error("input slot {0} is shorter than the stage's range")]
    InputShort(usize),
    /// A stage wrote fewer or more positions than its range has.
    #[error("it wrote {written} of its {len} positions")]
    Rows {
        /// Positions written.
        written: usize,
        /// Positions in the stage's range.
        len: usize,
    },
}

impl Fault {
    /// This fault, in stage `stage`.
    pub fn at(self, stage: usize) -> PlanError {
        PlanError::Stage { stage, fault: self }
    }
}
