//! The target-neutral kernel IR: one compute kernel as typed registers,
//! structured statements and declared resources.
//!
//! Registers ([`Local`], `r3`) are mutable and typed by [`DType`]; operands
//! are registers or constants. Every operation of the element IR keeps its
//! reference semantics here (see `expr::eval`): a writer that maps `div` to
//! a machine division must add the zero and `MIN / -1` guards itself. The
//! text form is described in the [module docs](super).

use crate::expr::{BinaryOp, DType, Scalar, UnaryOp};
use std::fmt;

macro_rules! handle {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The handle of entry `index` of its table.
            pub const fn new(index: usize) -> Self {
                Self(index as u32)
            }

            /// The index of the entry in its table.
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

handle!(
    /// A register of a kernel; prints as `r3`.
    Local,
    "r"
);
handle!(
    /// A storage binding of a kernel; prints as `b1`.
    BindingId,
    "b"
);
handle!(
    /// A workgroup-shared array of a kernel; prints as `sh0`.
    SharedId,
    "sh"
);
handle!(
    /// A field of the kernel's uniform block; prints as `u2`.
    FieldId,
    "u"
);

/// How a kernel uses a storage binding.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Loads only.
    Read,
    /// Loads and stores.
    ReadWrite,
    /// Only atomic operations (elements are `u32` or `i32`).
    Atomic,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read_write",
            Access::Atomic => "atomic",
        }
    }
}

/// A storage buffer seen as an array of `elem`.
///
/// `bool` elements are stored as 32-bit words holding 0 or 1, on every
/// target: loads yield a `bool`, stores take one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Binding {
    /// A readable name (writers may rename it).
    pub name: String,
    /// Element type.
    pub elem: DType,
    /// Use.
    pub access: Access,
}

/// One scalar field of the kernel's uniform block (`bool` as a 32-bit word).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UniformField {
    /// A readable name.
    pub name: String,
    /// Its type.
    pub ty: DType,
}

/// A workgroup-shared array.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedArray {
    /// A readable name.
    pub name: String,
    /// Element type.
    pub elem: DType,
    /// Number of elements.
    pub len: u32,
    /// Updated by [`Op::AtomicShared`] (a `u32` or `i32` array): every
    /// load and store of it is atomic too (WGSL's `atomic<T>`).
    pub atomic: bool,
}

/// Values provided by the launch, all `u32`, first dimension only.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// Index of the invocation in its workgroup.
    LocalId,
    /// Index of the workgroup in the dispatch.
    WorkgroupId,
    /// Number of workgroups in the dispatch.
    NumWorkgroups,
    /// `WorkgroupId * workgroup size + LocalId`.
    GlobalId,
    /// Invocations per subgroup (warp).
    SubgroupSize,
    /// Index of the invocation in its subgroup.
    SubgroupLane,
    /// Index of the subgroup in its workgroup.
    SubgroupId,
    /// Number of subgroups in the workgroup.
    NumSubgroups,
}

impl Builtin {
    /// Text-form name.
    pub const fn name(self) -> &'static str {
        match self {
            Builtin::LocalId => "local_id",
            Builtin::WorkgroupId => "workgroup_id",
            Builtin::NumWorkgroups => "num_workgroups",
            Builtin::GlobalId => "global_id",
            Builtin::SubgroupSize => "subgroup_size",
            Builtin::SubgroupLane => "subgroup_lane",
            Builtin::SubgroupId => "subgroup_id",
            Builtin::NumSubgroups => "num_subgroups",
        }
    }

    /// Whether the builtin needs subgroup support.
    pub const fn is_subgroup(self) -> bool {
        matches!(
            self,
            Builtin::SubgroupSize
                | Builtin::SubgroupLane
                | Builtin::SubgroupId
                | Builtin::NumSubgroups
        )
    }
}

/// Subgroup (warp) collective operations, reducing over the active lanes of
/// a subgroup. Called only in uniform control flow.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SubgroupOp {
    /// Wrapping sum (ints) or sum in hardware order (floats).
    Add,
    /// Minimum of integers.
    Min,
    /// Maximum of integers.
    Max,
    /// Whether every lane's `bool` is true.
    All,
    /// Whether any lane's `bool` is true.
    Any,
    /// Inclusive prefix sum over lanes.
    InclusiveAdd,
    /// The value of lane 0 of the subgroup.
    BroadcastFirst,
}

impl SubgroupOp {
    /// Text-form name.
    pub const fn name(self) -> &'static str {
        match self {
            SubgroupOp::Add => "add",
            SubgroupOp::Min => "min",
            SubgroupOp::Max => "max",
            SubgroupOp::All => "all",
            SubgroupOp::Any => "any",
            SubgroupOp::InclusiveAdd => "inclusive_add",
            SubgroupOp::BroadcastFirst => "broadcast_first",
        }
    }
}

/// Atomic read-modify-write operations on an [`Access::Atomic`] binding;
/// the result is the previous value.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Wrapping add.
    Add,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise or.
    Or,
    /// Replace.
    Exchange,
}

impl AtomicOp {
    /// Text-form name.
    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::Or => "or",
            AtomicOp::Exchange => "exchange",
        }
    }
}

/// An operand: a register or a constant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// The current value of a register.
    Local(Local),
    /// A constant.
    Const(Scalar),
}

impl From<Local> for Operand {
    fn from(l: Local) -> Operand {
        Operand::Local(l)
    }
}

impl From<Scalar> for Operand {
    fn from(s: Scalar) -> Operand {
        Operand::Const(s)
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Local(l) => write!(f, "{l}"),
            Operand::Const(c) => write!(f, "{c}"),
        }
    }
}

/// The right-hand side of an assignment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The operand itself.
    Copy(Operand),
    /// Element-IR unary operation with reference semantics.
    Unary(UnaryOp, Operand),
    /// Element-IR binary operation with reference semantics (wrapping,
    /// guarded integer division, NaN-skipping float min/max).
    Binary(BinaryOp, Operand, Operand),
    /// `if c { a } else { b }`.
    Select(Operand, Operand, Operand),
    /// `a * b + c`, one rounding for floats, wrapping for integers.
    MulAdd(Operand, Operand, Operand),
    /// Rust `as` conversion to the destination register's type.
    Cast(Operand),
    /// The operand's bits as the destination register's type, of the same
    /// size (`f32::to_bits`, `f32::from_bits`, `i32 as u32`; not `bool`).
    Bitcast(Operand),
    /// Whether a float is NaN.
    IsNan(Operand),
    /// A launch value.
    Builtin(Builtin),
    /// A field of the uniform block.
    Uniform(FieldId),
    /// Element `index` (a `u32`) of a storage binding.
    Load(BindingId, Operand),
    /// Element `index` (a `u32`) of a shared array.
    LoadShared(SharedId, Operand),
    /// A subgroup collective.
    Subgroup(SubgroupOp, Operand),
    /// An atomic operation on element `index` of an atomic shared array
    /// (workgroup memory); yields the previous value.
    AtomicShared {
        /// What to do.
        op: AtomicOp,
        /// The atomic shared array.
        shared: SharedId,
        /// Element index (`u32`).
        index: Operand,
        /// The operand.
        value: Operand,
    },
    /// An atomic operation on element `index`; yields the previous value.
    Atomic {
        /// What to do.
        op: AtomicOp,
        /// The atomic binding.
        binding: BindingId,
        /// Element index (`u32`).
        index: Operand,
        /// The operand.
        value: Operand,
    },
}

/// A statement. Loops and branches are structured; there is no goto.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// `dst = op`.
    Assign(Local, Op),
    /// `binding[index] = value`.
    Store(BindingId, Operand, Operand),
    /// `shared[index] = value`.
    StoreShared(SharedId, Operand, Operand),
    /// A two-way branch on a `bool`.
    If {
        /// The condition.
        cond: Operand,
        /// Taken when true.
        then_body: Vec<Stmt>,
        /// Taken when false (often empty).
        else_body: Vec<Stmt>,
    },
    /// `var = start; while var < end { body; var += step }` over `u32`
    /// (callers keep `end + step` below 2^32).
    For {
        /// The counter register (`u32`).
        var: Local,
        /// First value.
        start: Operand,
        /// Exclusive bound.
        end: Operand,
        /// Increment.
        step: Operand,
        /// The body.
        body: Vec<Stmt>,
    },
    /// Workgroup execution and memory barrier (uniform control flow only).
    Barrier,
}

impl Stmt {
    /// What a branch or loop reads to decide its control flow (an `if`'s
    /// condition, a loop's bounds and step); nothing for other statements.
    pub fn control_operands(&self) -> smallvec::SmallVec<[Operand; 3]> {
        match self {
            Stmt::If { cond, .. } => smallvec::smallvec![*cond],
            Stmt::For {
                start, end, step, ..
            } => smallvec::smallvec![*start, *end, *step],
            _ => smallvec::SmallVec::new(),
        }
    }

    /// The statement with each nested body (an `if`'s two, in order, a
    /// loop's one) replaced by `f` of it; any other statement unchanged:
    /// the recursion of a pass that rewrites statements at every depth.
    pub fn map_bodies(mut self, mut f: impl FnMut(Vec<Stmt>) -> Vec<Stmt>) -> Stmt {
        match &mut self {
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                *then_body = f(std::mem::take(then_body));
                *else_body = f(std::mem::take(else_body));
            }
            Stmt::For { body, .. } => *body = f(std::mem::take(body)),
            _ => {}
        }
        self
    }
}

/// A register declaration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocalDecl {
    /// Type.
    pub ty: DType,
}

/// One compute kernel, launched over a one-dimensional grid of workgroups.
///
/// Storage bindings take binding numbers `0..bindings.len()` of group 0 and
/// the uniform block (when `uniforms` is not empty) the next number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// Entry point name.
    pub name: String,
    /// Invocations per workgroup.
    pub workgroup_size: u32,
    /// Storage bindings.
    pub bindings: Vec<Binding>,
    /// Fields of the uniform block, in layout order (see `UniformLayout`).
    pub uniforms: Vec<UniformField>,
    /// Workgroup-shared arrays.
    pub shared: Vec<SharedArray>,
    /// Registers.
    pub locals: Vec<LocalDecl>,
    /// The body, run by every invocation.
    pub body: Vec<Stmt>,
}

/// Why a kernel is ill-formed (the IR's type checker, [`Kernel::verify`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// An operation applied to operand types it does not take.
    #[error("{op} on {operands}")]
    Operands {
        /// The operation.
        op: String,
        /// Its operands' types.
        operands: String,
    },
    /// A handle (local, uniform, binding, shared array) that names nothing.
    #[error("no {what} {name}")]
    Undeclared {
        /// What kind of handle.
        what: &'static str,
        /// The handle.
        name: String,
    },
    /// A value assigned to a local of another type.
    #[error("{local}: {ty} assigned a {got}")]
    Assign {
        /// The local.
        local: String,
        /// Its type.
        ty: DType,
        /// The value's type.
        got: DType,
    },
    /// A store or atomic whose index or value type does not fit its target.
    #[error("{what} to {target} is ill-typed")]
    IllTyped {
        /// `store` or `atomic`.
        what: &'static str,
        /// The binding or shared array.
        target: String,
    },
    /// A store to a binding that is not read-write.
    #[error("store to {binding}, which is {access}")]
    ReadOnly {
        /// The binding.
        binding: String,
        /// Its access mode.
        access: String,
    },
    /// An index, loop bound, loop counter or condition of the wrong type.
    #[error("{what} is a {found}, not a {expected}")]
    Type {
        /// What it is.
        what: &'static str,
        /// The type it must have.
        expected: DType,
        /// The type it has.
        found: DType,
    },
    /// A workgroup size that is not a power of two.
    #[error("workgroup size {0} is not a power of two")]
    WorkgroupSize(u32),
}

/// What a kernel needs from the device.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelNeeds {
    /// Uses `f64`.
    pub f64: bool,
    /// Uses `i64` or `u64`.
    pub int64: bool,
    /// Uses subgroup operations or builtins.
    pub subgroups: bool,
    /// Bytes of workgroup memory.
    pub shared_bytes: u32,
    /// An `exp`, `ln`, `sin` or `cos` on `f64`: WGSL defines these for
    /// `f32` and `f16` only, and the SPIR-V and GL paths have no 64-bit
    /// versions, so a WGSL target must decline the kernel.
    pub f64_transcendental: Option<UnaryOp>,
}

impl Kernel {
    /// The binding number of the uniform block, when there is one.
    pub fn uniform_binding(&self) -> Option<u32> {
        (!self.uniforms.is_empty()).then_some(self.bindings.len() as u32)
    }

    /// The type of a register.
    pub fn ty(&self, l: Local) -> DType {
        self.locals[l.index()].ty
    }

    /// The type of an operand.
    pub fn operand_ty(&self, o: Operand) -> DType {
        match o {
            Operand::Local(l) => self.ty(l),
            Operand::Const(c) => c.dtype(),
        }
    }

    /// Device requirements.
    pub fn needs(&self) -> KernelNeeds {
        let mut n = KernelNeeds::default();
        let mut note = |t: DType| match t {
            DType::F64 => n.f64 = true,
            DType::I64 | DType::U64 => n.int64 = true,
            _ => {}
        };
        self.locals.iter().for_each(|l| note(l.ty));
        self.bindings.iter().for_each(|b| note(b.elem));
        self.uniforms.iter().for_each(|u| note(u.ty));
        self.shared.iter().for_each(|s| note(s.elem));
        let mut subgroups = false;
        let mut f64_transcendental = None;
        visit(&self.body, &mut |s| {
            if let Stmt::Assign(_, op) = s {
                match op {
                    Op::Subgroup(..) => subgroups = true,
                    Op::Builtin(b) if b.is_subgroup() => subgroups = true,
                    Op::Unary(
                        u @ (UnaryOp::Exp | UnaryOp::Ln | UnaryOp::Sin | UnaryOp::Cos),
                        a,
                    ) if self.operand_ty(*a) == DType::F64 => f64_transcendental = Some(*u),
                    _ => {}
                }
            }
        });
        n.subgroups = subgroups;
        n.f64_transcendental = f64_transcendental;
        n.shared_bytes = self
            .shared
            .iter()
            .map(|s| s.len * s.elem.size().max(4) as u32)
            .sum();
        n
    }

    /// The result type of `op`, or an error when its operands are ill-typed.
    pub fn op_ty(&self, op: &Op, dst: DType) -> Result<DType, KernelError> {
        let t = |o: &Operand| self.operand_ty(*o);
        let bad = |op: String, operands: String| Err(KernelError::Operands { op, operands });
        Ok(match op {
            Op::Copy(a) => t(a),
            Op::Unary(u, a) => {
                if !u.accepts(t(a)) {
                    return bad(u.to_string(), t(a).to_string());
                }
                t(a)
            }
            Op::Binary(b, x, y) => {
                if t(x) != t(y) {
                    return bad(b.to_string(), format!("{} and {}", t(x), t(y)));
                }
                b.result_type(t(x)).ok_or_else(|| KernelError::Operands {
                    op: b.to_string(),
                    operands: t(x).to_string(),
                })?
            }
            Op::Select(c, a, b) => {
                if t(c) != DType::Bool || t(a) != t(b) {
                    return bad("select".into(), format!("{} {} {}", t(c), t(a), t(b)));
                }
                t(a)
            }
            Op::MulAdd(a, b, c) => {
                if t(a) != t(b) || t(b) != t(c) {
                    return bad("mul_add".into(), format!("{} {} {}", t(a), t(b), t(c)));
                }
                t(a)
            }
            Op::Cast(_) => dst,
            Op::Bitcast(a) => {
                if t(a) == DType::Bool || dst == DType::Bool || t(a).size() != dst.size() {
                    return bad(format!("bitcast to {dst}"), t(a).to_string());
                }
                dst
            }
            Op::IsNan(a) => {
                if !t(a).is_float() {
                    return bad("is_nan".into(), t(a).to_string());
                }
                DType::Bool
            }
            Op::Builtin(_) => DType::U32,
            Op::Uniform(f) => {
                self.uniforms
                    .get(f.index())
                    .ok_or_else(|| KernelError::Undeclared {
                        what: "uniform",
                        name: f.to_string(),
                    })?
                    .ty
            }
            Op::Load(b, i) => {
                if t(i) != DType::U32 {
                    return Err(KernelError::Type {
                        what: "a load's index",
                        expected: DType::U32,
                        found: t(i),
                    });
                }
                self.bindings
                    .get(b.index())
                    .ok_or_else(|| KernelError::Undeclared {
                        what: "binding",
                        name: b.to_string(),
                    })?
                    .elem
            }
            Op::LoadShared(s, i) => {
                if t(i) != DType::U32 {
                    return Err(KernelError::Type {
                        what: "a shared load's index",
                        expected: DType::U32,
                        found: t(i),
                    });
                }
                self.shared
                    .get(s.index())
                    .ok_or_else(|| KernelError::Undeclared {
                        what: "shared array",
                        name: s.to_string(),
                    })?
                    .elem
            }
            Op::Subgroup(o, a) => match o {
                SubgroupOp::All | SubgroupOp::Any if t(a) != DType::Bool => {
                    return bad(format!("subgroup {}", o.name()), t(a).to_string())
                }
                _ => t(a),
            },
            Op::Atomic {
                binding,
                index,
                value,
                ..
            } => {
                let b =
                    self.bindings
                        .get(binding.index())
                        .ok_or_else(|| KernelError::Undeclared {
                            what: "binding",
                            name: binding.to_string(),
                        })?;
                if b.access != Access::Atomic || t(value) != b.elem || t(index) != DType::U32 {
                    return Err(KernelError::IllTyped {
                        what: "atomic",
                        target: binding.to_string(),
                    });
                }
                b.elem
            }
            Op::AtomicShared {
                shared,
                index,
                value,
                ..
            } => {
                let a = self
                    .shared
                    .get(shared.index())
                    .ok_or_else(|| KernelError::Undeclared {
                        what: "shared array",
                        name: shared.to_string(),
                    })?;
                if !a.atomic
                    || !matches!(a.elem, DType::U32 | DType::I32)
                    || t(value) != a.elem
                    || t(index) != DType::U32
                {
                    return Err(KernelError::IllTyped {
                        what: "shared atomic",
                        target: shared.to_string(),
                    });
                }
                a.elem
            }
        })
    }

    /// Checks types, handles and access modes of every statement.
    pub fn verify(&self) -> Result<(), KernelError> {
        if self.workgroup_size == 0 || !self.workgroup_size.is_power_of_two() {
            return Err(KernelError::WorkgroupSize(self.workgroup_size));
        }
        let mut err = Ok(());
        let check_local = |l: Local| {
            if l.index() >= self.locals.len() {
                Err(KernelError::Undeclared {
                    what: "local",
                    name: l.to_string(),
                })
            } else {
                Ok(())
            }
        };
        let check_operand = |o: &Operand| match o {
            Operand::Local(l) => check_local(*l),
            Operand::Const(_) => Ok(()),
        };
        visit(&self.body, &mut |s| {
            if err.is_err() {
                return;
            }
            err = (|| match s {
                Stmt::Assign(dst, op) => {
                    check_local(*dst)?;
                    op_operands(op).iter().try_for_each(check_operand)?;
                    let got = self.op_ty(op, self.ty(*dst))?;
                    if got != self.ty(*dst) {
                        return Err(KernelError::Assign {
                            local: dst.to_string(),
                            ty: self.ty(*dst),
                            got,
                        });
                    }
                    if let Op::Cast(a) = op {
                        let _ = self.operand_ty(*a);
                    }
                    Ok(())
                }
                Stmt::Store(b, i, v) => {
                    check_operand(i)?;
                    check_operand(v)?;
                    let bd =
                        self.bindings
                            .get(b.index())
                            .ok_or_else(|| KernelError::Undeclared {
                                what: "binding",
                                name: b.to_string(),
                            })?;
                    if bd.access != Access::ReadWrite {
                        return Err(KernelError::ReadOnly {
                            binding: b.to_string(),
                            access: format!("{:?}", bd.access),
                        });
                    }
                    if self.operand_ty(*i) != DType::U32 || self.operand_ty(*v) != bd.elem {
                        return Err(KernelError::IllTyped {
                            what: "store",
                            target: b.to_string(),
                        });
                    }
                    Ok(())
                }
                Stmt::StoreShared(a, i, v) => {
                    check_operand(i)?;
                    check_operand(v)?;
                    let sd = self
                        .shared
                        .get(a.index())
                        .ok_or_else(|| KernelError::Undeclared {
                            what: "shared array",
                            name: a.to_string(),
                        })?;
                    if self.operand_ty(*i) != DType::U32 || self.operand_ty(*v) != sd.elem {
                        return Err(KernelError::IllTyped {
                            what: "store",
                            target: a.to_string(),
                        });
                    }
                    Ok(())
                }
                Stmt::If { cond, .. } => {
                    check_operand(cond)?;
                    if self.operand_ty(*cond) != DType::Bool {
                        return Err(KernelError::Type {
                            what: "an if's condition",
                            expected: DType::Bool,
                            found: self.operand_ty(*cond),
                        });
                    }
                    Ok(())
                }
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    ..
                } => {
                    check_local(*var)?;
                    for o in [start, end, step] {
                        check_operand(o)?;
                        if self.operand_ty(*o) != DType::U32 {
                            return Err(KernelError::Type {
                                what: "a for loop's bound",
                                expected: DType::U32,
                                found: self.operand_ty(*o),
                            });
                        }
                    }
                    if self.ty(*var) != DType::U32 {
                        return Err(KernelError::Type {
                            what: "a for loop's counter",
                            expected: DType::U32,
                            found: self.ty(*var),
                        });
                    }
                    Ok(())
                }
                Stmt::Barrier => Ok(()),
            })();
        });
        err
    }
}

/// The operands read by `op`.
pub fn op_operands(op: &Op) -> Vec<Operand> {
    match *op {
        Op::Copy(a)
        | Op::Unary(_, a)
        | Op::Cast(a)
        | Op::Bitcast(a)
        | Op::IsNan(a)
        | Op::Load(_, a)
        | Op::LoadShared(_, a)
        | Op::Subgroup(_, a) => vec![a],
        Op::Binary(_, a, b) => vec![a, b],
        Op::Select(a, b, c) | Op::MulAdd(a, b, c) => vec![a, b, c],
        Op::Atomic { index, value, .. } | Op::AtomicShared { index, value, .. } => {
            vec![index, value]
        }
        Op::Builtin(_) | Op::Uniform(_) => vec![],
    }
}

/// Calls `f` on every statement, outer before inner, in order.
pub fn visit(body: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in body {
        f(s);
        match s {
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                visit(then_body, f);
                visit(else_body, f);
            }
            Stmt::For { body, .. } => visit(body, f),
            _ => {}
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Copy(a) => write!(f, "{a}"),
            Op::Unary(u, a) => write!(f, "{u} {a}"),
            Op::Binary(b, x, y) => write!(f, "{b} {x}, {y}"),
            Op::Select(c, a, b) => write!(f, "select {c}, {a}, {b}"),
            Op::MulAdd(a, b, c) => write!(f, "mul_add {a}, {b}, {c}"),
            Op::Cast(a) => write!(f, "cast {a}"),
            Op::Bitcast(a) => write!(f, "bitcast {a}"),
            Op::IsNan(a) => write!(f, "is_nan {a}"),
            Op::Builtin(b) => write!(f, "builtin {}", b.name()),
            Op::Uniform(u) => write!(f, "uniform {u}"),
            Op::Load(b, i) => write!(f, "load {b}[{i}]"),
            Op::LoadShared(s, i) => write!(f, "load {s}[{i}]"),
            Op::Subgroup(o, a) => write!(f, "subgroup.{} {a}", o.name()),
            Op::Atomic {
                op,
                binding,
                index,
                value,
            } => write!(f, "atomic.{} {binding}[{index}], {value}", op.name()),
            Op::AtomicShared {
                op,
                shared,
                index,
                value,
            } => write!(f, "atomic.{} {shared}[{index}], {value}", op.name()),
        }
    }
}

impl Kernel {
    fn write_body(&self, f: &mut fmt::Formatter<'_>, body: &[Stmt], depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        for s in body {
            match s {
                Stmt::Assign(l, op) => writeln!(f, "{pad}{l} = {op} : {}", self.ty(*l))?,
                Stmt::Store(b, i, v) => writeln!(f, "{pad}store {b}[{i}] = {v}")?,
                Stmt::StoreShared(a, i, v) => writeln!(f, "{pad}store {a}[{i}] = {v}")?,
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    writeln!(f, "{pad}if {cond} {{")?;
                    self.write_body(f, then_body, depth + 1)?;
                    if !else_body.is_empty() {
                        writeln!(f, "{pad}}} else {{")?;
                        self.write_body(f, else_body, depth + 1)?;
                    }
                    writeln!(f, "{pad}}}")?;
                }
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                } => {
                    writeln!(f, "{pad}for {var} = {start} to {end} step {step} {{")?;
                    self.write_body(f, body, depth + 1)?;
                    writeln!(f, "{pad}}}")?;
                }
                Stmt::Barrier => writeln!(f, "{pad}barrier")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel {} workgroup({})", self.name, self.workgroup_size)?;
        for (i, b) in self.bindings.iter().enumerate() {
            writeln!(
                f,
                "  binding {} {}: [{}] {}",
                BindingId::new(i),
                b.name,
                b.elem,
                b.access.name()
            )?;
        }
        for (i, u) in self.uniforms.iter().enumerate() {
            writeln!(f, "  uniform {} {}: {}", FieldId::new(i), u.name, u.ty)?;
        }
        for (i, s) in self.shared.iter().enumerate() {
            writeln!(
                f,
                "  shared {} {}: [{}; {}]",
                SharedId::new(i),
                s.name,
                s.elem,
                s.len
            )?;
        }
        writeln!(f, "{{")?;
        self.write_body(f, &self.body, 1)?;
        writeln!(f, "}}")
    }
}

/// `op` computed now when every operand is a constant and the operation
/// is one of the element IR's (`expr::eval`, the reference semantics the
/// writers reproduce; a cast by `Scalar::cast`, Rust's `as`): a copy of
/// the result. Lowering makes such operations (`x.powi(0)` is the constant
/// `1`, and a histogram casts it to `f64`), and a device's compiler takes
/// them for constant expressions, which naga evaluates itself and refuses
/// for some (`f64(1li)`, `abs(1.0lf)`).
fn folded(ty: DType, op: Op) -> Op {
    use crate::expr::eval;
    use Operand::Const as K;
    // Only operand types the element IR takes (what `eval` is defined on);
    // anything else is left to the writers as it is.
    let v = match op {
        Op::Unary(u, K(a)) if u.accepts(a.dtype()) => eval::unary(u, a),
        Op::Binary(b, K(x), K(y))
            if x.dtype() == y.dtype() && b.result_type(x.dtype()).is_some() =>
        {
            eval::binary(b, x, y)
        }
        Op::Select(K(c), K(a), K(b)) if c.dtype() == DType::Bool && a.dtype() == b.dtype() => {
            if c.as_bool() {
                a
            } else {
                b
            }
        }
        Op::MulAdd(K(a), K(b), K(c))
            if a.dtype() == b.dtype() && b.dtype() == c.dtype() && a.dtype().is_numeric() =>
        {
            eval::mul_add(a, b, c)
        }
        Op::Cast(K(a)) => a.cast(ty),
        _ => return op,
    };
    // Of the register's type, as the operation gives it (a mistyped
    // operation is left as it was, for the kernel's verifier).
    if v.dtype() != ty {
        return op;
    }
    Op::Copy(K(v))
}

/// Builds a kernel body statement by statement, with nested blocks.
#[derive(Debug)]
pub struct KernelBuilder {
    kernel: Kernel,
    blocks: Vec<Vec<Stmt>>,
}

impl KernelBuilder {
    /// An empty kernel.
    pub fn new(name: impl Into<String>, workgroup_size: u32) -> KernelBuilder {
        KernelBuilder {
            kernel: Kernel {
                name: name.into(),
                workgroup_size,
                bindings: Vec::new(),
                uniforms: Vec::new(),
                shared: Vec::new(),
                locals: Vec::new(),
                body: Vec::new(),
            },
            blocks: vec![Vec::new()],
        }
    }

    /// Declares a storage binding.
    pub fn binding(&mut self, name: impl Into<String>, elem: DType, access: Access) -> BindingId {
        self.kernel.bindings.push(Binding {
            name: name.into(),
            elem,
            access,
        });
        BindingId::new(self.kernel.bindings.len() - 1)
    }

    /// Declares the uniform block's fields (once).
    pub fn uniforms(&mut self, fields: Vec<UniformField>) {
        self.kernel.uniforms = fields;
    }

    /// Declares a shared array.
    pub fn shared(&mut self, name: impl Into<String>, elem: DType, len: u32) -> SharedId {
        self.kernel.shared.push(SharedArray {
            name: name.into(),
            elem,
            len,
            atomic: false,
        });
        SharedId::new(self.kernel.shared.len() - 1)
    }

    /// Declares a shared array of `u32` or `i32` updated by
    /// [`Op::AtomicShared`].
    pub fn shared_atomic(&mut self, name: impl Into<String>, elem: DType, len: u32) -> SharedId {
        let id = self.shared(name, elem, len);
        self.kernel.shared[id.index()].atomic = true;
        id
    }

    /// A new register.
    pub fn local(&mut self, ty: DType) -> Local {
        self.kernel.locals.push(LocalDecl { ty });
        Local::new(self.kernel.locals.len() - 1)
    }

    /// The type of an operand.
    pub fn ty(&self, o: impl Into<Operand>) -> DType {
        self.kernel.operand_ty(o.into())
    }

    /// Appends a statement to the current block.
    pub fn push(&mut self, s: Stmt) {
        self.blocks.last_mut().expect("a block").push(s);
    }

    /// `dst = op` into a new register of type `ty`.
    pub fn assign(&mut self, ty: DType, op: Op) -> Local {
        let l = self.local(ty);
        self.push(Stmt::Assign(l, folded(ty, op)));
        l
    }

    /// `dst = op` for an existing register.
    pub fn set(&mut self, dst: Local, op: Op) {
        let op = folded(self.ty(dst), op);
        self.push(Stmt::Assign(dst, op));
    }

    /// A binary operation whose type is inferred.
    pub fn binary(&mut self, op: BinaryOp, a: impl Into<Operand>, b: impl Into<Operand>) -> Local {
        let (a, b) = (a.into(), b.into());
        let ty = op.result_type(self.ty(a)).expect("binary on a valid type");
        self.assign(ty, Op::Binary(op, a, b))
    }

    /// `select(c, a, b)`.
    pub fn select(
        &mut self,
        c: impl Into<Operand>,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Local {
        let (c, a, b) = (c.into(), a.into(), b.into());
        let ty = self.ty(a);
        self.assign(ty, Op::Select(c, a, b))
    }

    /// A launch value.
    pub fn builtin(&mut self, b: Builtin) -> Local {
        self.assign(DType::U32, Op::Builtin(b))
    }

    /// Runs `then` into the then-block and `otherwise` into the else-block.
    pub fn if_else(
        &mut self,
        cond: impl Into<Operand>,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        self.blocks.push(Vec::new());
        then(self);
        let then_body = self.blocks.pop().expect("then block");
        self.blocks.push(Vec::new());
        otherwise(self);
        let else_body = self.blocks.pop().expect("else block");
        self.push(Stmt::If {
            cond: cond.into(),
            then_body,
            else_body,
        });
    }

    /// An `if` without else.
    pub fn if_(&mut self, cond: impl Into<Operand>, then: impl FnOnce(&mut Self)) {
        self.if_else(cond, then, |_| {});
    }

    /// `for i = start to end step step { body(i) }`.
    pub fn for_(
        &mut self,
        start: impl Into<Operand>,
        end: impl Into<Operand>,
        step: impl Into<Operand>,
        body: impl FnOnce(&mut Self, Local),
    ) {
        let var = self.local(DType::U32);
        self.blocks.push(Vec::new());
        body(self, var);
        let body = self.blocks.pop().expect("loop block");
        self.push(Stmt::For {
            var,
            start: start.into(),
            end: end.into(),
            step: step.into(),
            body,
        });
    }

    /// A workgroup barrier.
    pub fn barrier(&mut self) {
        self.push(Stmt::Barrier);
    }

    /// Finishes the kernel, verifying it.
    pub fn finish(mut self) -> Result<Kernel, KernelError> {
        assert_eq!(self.blocks.len(), 1, "unbalanced blocks");
        self.kernel.body = self.blocks.pop().expect("body");
        self.kernel.verify()?;
        Ok(self.kernel)
    }
}

/// Shorthand for a `u32` constant operand.
pub fn u32c(v: u32) -> Operand {
    Operand::Const(Scalar::U32(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_on_constants_are_folded_by_the_reference_semantics() {
        use crate::expr::{BinaryOp, UnaryOp};
        let k = |s: Scalar| Operand::Const(s);
        let copy = |s: Scalar| Op::Copy(Operand::Const(s));
        assert_eq!(
            folded(DType::F64, Op::Unary(UnaryOp::Abs, k(Scalar::F64(-1.5)))),
            copy(Scalar::F64(1.5))
        );
        assert_eq!(
            folded(DType::F64, Op::Cast(k(Scalar::I64(1)))),
            copy(Scalar::F64(1.0))
        );
        // Integer division by zero is 0, shifts wrap: the engine's rules.
        assert_eq!(
            folded(
                DType::I64,
                Op::Binary(BinaryOp::Div, k(Scalar::I64(7)), k(Scalar::I64(0)))
            ),
            copy(Scalar::I64(0))
        );
        assert_eq!(
            folded(
                DType::U32,
                Op::Binary(BinaryOp::Shl, k(Scalar::U32(1)), k(Scalar::U32(33)))
            ),
            copy(Scalar::U32(2))
        );
        assert_eq!(
            folded(
                DType::Bool,
                Op::Binary(
                    BinaryOp::Ne,
                    k(Scalar::F32(f32::NAN)),
                    k(Scalar::F32(f32::NAN))
                )
            ),
            copy(Scalar::Bool(true))
        );
        // Not all constants, or not the element IR's types: as they were.
        let mixed = Op::Binary(BinaryOp::Add, k(Scalar::I32(1)), k(Scalar::F32(1.0)));
        assert_eq!(folded(DType::F32, mixed.clone()), mixed);
        let wrong_register = Op::Unary(UnaryOp::Neg, k(Scalar::I32(1)));
        assert_eq!(folded(DType::I64, wrong_register.clone()), wrong_register);
        let local = Op::Cast(Operand::Local(Local::new(0)));
        assert_eq!(folded(DType::F64, local.clone()), local);
    }

    fn double_kernel() -> Kernel {
        let mut b = KernelBuilder::new("double", 64);
        let input = b.binding("x", DType::F32, Access::Read);
        let out = b.binding("y", DType::F32, Access::ReadWrite);
        b.uniforms(vec![UniformField {
            name: "len".into(),
            ty: DType::U32,
        }]);
        let gid = b.builtin(Builtin::GlobalId);
        let len = b.assign(DType::U32, Op::Uniform(FieldId::new(0)));
        let inside = b.binary(BinaryOp::Lt, gid, len);
        b.if_(inside, |b| {
            let x = b.assign(DType::F32, Op::Load(input, gid.into()));
            let y = b.binary(BinaryOp::Mul, x, Scalar::F32(2.0));
            b.push(Stmt::Store(out, gid.into(), y.into()));
        });
        b.finish().unwrap()
    }

    #[test]
    fn text_form() {
        assert_eq!(
            double_kernel().to_string(),
            "kernel double workgroup(64)\n  binding b0 x: [f32] read\n  binding b1 y: [f32] read_write\n  \
             uniform u0 len: u32\n{\n  r0 = builtin global_id : u32\n  r1 = uniform u0 : u32\n  \
             r2 = lt r0, r1 : bool\n  if r2 {\n    r3 = load b0[r0] : f32\n    \
             r4 = mul r3, 2.0f32 : f32\n    store b1[r0] = r4\n  }\n}\n"
        );
    }

    #[test]
    fn verify_rejects_ill_typed_statements() {
        let mut k = double_kernel();
        k.body.push(Stmt::Store(
            BindingId::new(0),
            u32c(0),
            Operand::Const(Scalar::F32(1.0)),
        ));
        // b0 is read-only: the store is refused for that before its types.
        assert!(matches!(
            k.verify().unwrap_err(),
            KernelError::ReadOnly { ref binding, .. } if binding == "b0"
        ));
        let mut k = double_kernel();
        k.body.push(Stmt::Store(
            BindingId::new(1),
            u32c(0),
            Operand::Const(Scalar::I32(1)),
        ));
        assert!(matches!(
            k.verify().unwrap_err(),
            KernelError::IllTyped { what: "store", ref target } if target == "b1"
        ));
        let mut k = double_kernel();
        k.locals[4].ty = DType::I32;
        assert!(k.verify().is_err());
    }
}
