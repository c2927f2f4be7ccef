//! The element expression IR: a typed arena of nodes addressed by `Value`
//! handles, with a verifier and a text form (`v3 = mul v1, p0 : f32`).
//!
//! Nodes are appended in evaluation order: an operand always has a smaller
//! index than its user, so walking the arena front to back evaluates it.

use super::ops::{BinaryOp, UnaryOp};
use crate::types::{DType, Scalar};
use smallvec::SmallVec;
use std::fmt;

/// A handle to one node of an [`ExprArena`]; prints as `v3`.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Value(u32);

impl Value {
    /// The handle of the node at `index`.
    pub const fn new(index: usize) -> Value {
        Value(index as u32)
    }

    /// The index of the node in its arena.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// One operation of the element program.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Node {
    /// The current element of input stream `slot`.
    Input(u16),
    /// The position counter of `enumerate` number `slot` (a `u64`).
    Index(u16),
    /// Run-time parameter `slot`: a value captured from Rust. Its value is
    /// not part of the plan, so a new value reuses the compiled kernel.
    Param(u16),
    /// A value baked into the plan (`Expr::constant`), folded when possible.
    Const(Scalar),
    /// A one-operand operation.
    Unary(UnaryOp, Value),
    /// A two-operand operation; both operands have the same type.
    Binary(BinaryOp, Value, Value),
    /// `if cond { a } else { b }`, evaluated without branching.
    Select(Value, Value, Value),
    /// `a * b + c`, fused for floats.
    MulAdd(Value, Value, Value),
    /// Rust `as` conversion to the node's type.
    Cast(Value),
    /// `x^n` with a fixed integer exponent.
    Powi(Value, i32),
}

impl Node {
    /// The operands of this node, in order.
    pub fn operands(&self) -> SmallVec<[Value; 3]> {
        match *self {
            Node::Input(_) | Node::Index(_) | Node::Param(_) | Node::Const(_) => SmallVec::new(),
            Node::Unary(_, a) | Node::Cast(a) | Node::Powi(a, _) => smallvec::smallvec![a],
            Node::Binary(_, a, b) => smallvec::smallvec![a, b],
            Node::Select(a, b, c) | Node::MulAdd(a, b, c) => smallvec::smallvec![a, b, c],
        }
    }

    /// The same node with every operand passed through `f`.
    pub fn map_operands(self, mut f: impl FnMut(Value) -> Value) -> Node {
        match self {
            Node::Input(_) | Node::Index(_) | Node::Param(_) | Node::Const(_) => self,
            Node::Unary(op, a) => Node::Unary(op, f(a)),
            Node::Cast(a) => Node::Cast(f(a)),
            Node::Powi(a, n) => Node::Powi(f(a), n),
            Node::Binary(op, a, b) => Node::Binary(op, f(a), f(b)),
            Node::Select(a, b, c) => Node::Select(f(a), f(b), f(c)),
            Node::MulAdd(a, b, c) => Node::MulAdd(f(a), f(b), f(c)),
        }
    }

    /// Leaves that depend on the element position or input data.
    pub fn is_per_element_leaf(&self) -> bool {
        matches!(self, Node::Input(_) | Node::Index(_))
    }
}

/// A node and its result type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct NodeData {
    /// The operation.
    pub node: Node,
    /// The type of its result.
    pub ty: DType,
}

/// An append-only arena of typed nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExprArena {
    nodes: Vec<NodeData>,
}

/// Why a node or arena is ill-formed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// An operand refers to a node at or after the one using it.
    #[error("v{operand} used before it is defined (arena has {len} nodes)")]
    UseBeforeDefinition {
        /// The operand.
        operand: u32,
        /// Nodes defined before the user.
        len: usize,
    },
    /// An input, parameter or cast pushed without its type.
    #[error("{0} needs a declared type")]
    Untyped(&'static str),
    /// An operation applied to operand types it does not take.
    #[error("`{op}` on {operands}")]
    Operands {
        /// The operation.
        op: String,
        /// Its operands' types.
        operands: String,
    },
    /// A node whose stored or declared type is not the one its operation
    /// gives.
    #[error("{node}: declared {declared}, but the node gives {inferred}")]
    Declared {
        /// The node.
        node: String,
        /// The type it was given.
        declared: DType,
        /// The type its operation gives.
        inferred: DType,
    },
}

impl ExprArena {
    /// An empty arena.
    pub fn new() -> ExprArena {
        ExprArena::default()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the arena has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Removes every node (keeping the memory for the next use).
    pub fn clear(&mut self) {
        self.nodes.clear();
    }

    /// Nodes the arena holds room for without growing.
    pub fn capacity(&self) -> usize {
        self.nodes.capacity()
    }

    /// Makes room for `additional` more nodes.
    pub fn reserve(&mut self, additional: usize) {
        self.nodes.reserve(additional);
    }

    /// The node behind `v`.
    pub fn get(&self, v: Value) -> &NodeData {
        &self.nodes[v.index()]
    }

    /// The node behind `v`, writable (passes rewrite in place).
    pub fn get_mut(&mut self, v: Value) -> &mut NodeData {
        &mut self.nodes[v.index()]
    }

    /// The result type of `v`.
    pub fn ty(&self, v: Value) -> DType {
        self.nodes[v.index()].ty
    }

    /// All nodes with their handles, in evaluation order.
    pub fn iter(&self) -> impl Iterator<Item = (Value, &NodeData)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (Value::new(i), n))
    }

    /// Appends a node whose type is inferred from its operands, after
    /// checking it. `Input`, `Index`, `Param` and `Cast` need an explicit type:
    /// use [`ExprArena::push_typed`].
    pub fn push(&mut self, node: Node) -> Result<Value, VerifyError> {
        let ty = self.infer(&node, None)?;
        Ok(self.push_unchecked(NodeData { node, ty }))
    }

    /// Appends a node with an explicit result type, after checking it.
    pub fn push_typed(&mut self, node: Node, ty: DType) -> Result<Value, VerifyError> {
        let inferred = self.infer(&node, Some(ty))?;
        if inferred != ty {
            return Err(VerifyError::Declared {
                node: format!("{node:?}"),
                declared: ty,
                inferred,
            });
        }
        Ok(self.push_unchecked(NodeData { node, ty }))
    }

    /// Appends without checking; for passes that copy verified nodes.
    pub fn push_unchecked(&mut self, data: NodeData) -> Value {
        let v = Value::new(self.nodes.len());
        self.nodes.push(data);
        v
    }

    /// The type `node` gives appended here, when it is well formed: its
    /// operands defined before it and of types its operation takes. `None`
    /// otherwise, and [`ExprArena::infer`] says why. (The tracer appends
    /// every node through this: ~40 instructions a node, where building
    /// the operand list and the `Result` first took ~75.)
    #[inline]
    fn infer_type(&self, node: &Node, declared: Option<DType>) -> Option<DType> {
        let ty = |v: Value| self.nodes.get(v.index()).map(|d| d.ty);
        match *node {
            Node::Input(_) | Node::Param(_) => declared,
            Node::Index(_) => Some(DType::U64),
            Node::Const(s) => Some(s.dtype()),
            Node::Cast(a) => ty(a).and(declared),
            Node::Unary(op, a) => ty(a).filter(|&t| op.accepts(t)),
            Node::Binary(op, a, b) => {
                let (ta, tb) = (ty(a)?, ty(b)?);
                if ta == tb {
                    op.result_type(ta)
                } else {
                    None
                }
            }
            Node::Select(c, a, b) => {
                let (tc, ta, tb) = (ty(c)?, ty(a)?, ty(b)?);
                (tc == DType::Bool && ta == tb).then_some(ta)
            }
            Node::MulAdd(a, b, c) => {
                let (ta, tb, tc) = (ty(a)?, ty(b)?, ty(c)?);
                (ta == tb && tb == tc && ta.is_numeric()).then_some(ta)
            }
            Node::Powi(a, _) => ty(a).filter(|t| t.is_numeric()),
        }
    }

    fn infer(&self, node: &Node, declared: Option<DType>) -> Result<DType, VerifyError> {
        if let Some(t) = self.infer_type(node, declared) {
            return Ok(t);
        }
        self.infer_error(node, declared)
    }

    /// [`ExprArena::infer`] for a node [`ExprArena::infer_type`] refused:
    /// why it is ill formed.
    #[cold]
    #[inline(never)]
    fn infer_error(&self, node: &Node, declared: Option<DType>) -> Result<DType, VerifyError> {
        let bound = self.nodes.len();
        for op in node.operands() {
            if op.index() >= bound {
                return Err(VerifyError::UseBeforeDefinition {
                    operand: op.index() as u32,
                    len: bound,
                });
            }
        }
        let need = VerifyError::Untyped;
        let bad = |op: String, operands: String| Err(VerifyError::Operands { op, operands });
        match *node {
            Node::Input(_) | Node::Param(_) => declared.ok_or_else(|| need("input/param")),
            Node::Index(_) => Ok(DType::U64),
            Node::Const(s) => Ok(s.dtype()),
            Node::Cast(_) => declared.ok_or_else(|| need("cast")),
            Node::Unary(op, a) => {
                let t = self.ty(a);
                if op.accepts(t) {
                    Ok(t)
                } else {
                    bad(op.to_string(), t.to_string())
                }
            }
            Node::Binary(op, a, b) => {
                let (ta, tb) = (self.ty(a), self.ty(b));
                if ta != tb {
                    return bad(op.to_string(), format!("{ta} and {tb}"));
                }
                op.result_type(ta).ok_or_else(|| VerifyError::Operands {
                    op: op.to_string(),
                    operands: ta.to_string(),
                })
            }
            Node::Select(c, a, b) => {
                let (tc, ta, tb) = (self.ty(c), self.ty(a), self.ty(b));
                if tc != DType::Bool || ta != tb {
                    return bad("select".into(), format!("{tc}, {ta}, {tb}"));
                }
                Ok(ta)
            }
            Node::MulAdd(a, b, c) => {
                let (ta, tb, tc) = (self.ty(a), self.ty(b), self.ty(c));
                if ta != tb || tb != tc || !ta.is_numeric() {
                    return bad("mul_add".into(), format!("{ta}, {tb}, {tc}"));
                }
                Ok(ta)
            }
            Node::Powi(a, _) => {
                let t = self.ty(a);
                if t.is_numeric() {
                    Ok(t)
                } else {
                    bad("powi".into(), t.to_string())
                }
            }
        }
    }

    /// Checks every node: operands defined before use and types consistent.
    pub fn verify(&self) -> Result<(), VerifyError> {
        let mut check = ExprArena::new();
        for (v, data) in self.iter() {
            let declared = check.infer(&data.node, Some(data.ty))?;
            if declared != data.ty {
                return Err(VerifyError::Declared {
                    node: v.to_string(),
                    declared: data.ty,
                    inferred: declared,
                });
            }
            check.push_unchecked(*data);
        }
        Ok(())
    }

    /// Writes one node in text form: `v3 = mul v1, p0 : f32`.
    pub fn write_node(&self, f: &mut dyn fmt::Write, v: Value) -> fmt::Result {
        let NodeData { node, ty } = *self.get(v);
        write!(f, "{v} = ")?;
        match node {
            Node::Input(s) => write!(f, "input.{s}")?,
            Node::Index(s) => write!(f, "index.{s}")?,
            Node::Param(s) => write!(f, "param.{s}")?,
            Node::Const(c) => write!(f, "const {c}")?,
            Node::Unary(op, a) => write!(f, "{op} {a}")?,
            Node::Binary(op, a, b) => write!(f, "{op} {a}, {b}")?,
            Node::Select(c, a, b) => write!(f, "select {c}, {a}, {b}")?,
            Node::MulAdd(a, b, c) => write!(f, "mul_add {a}, {b}, {c}")?,
            Node::Cast(a) => write!(f, "cast {a}")?,
            Node::Powi(a, n) => write!(f, "powi {a}, {n}")?,
        }
        write!(f, " : {ty}")
    }
}

impl fmt::Display for ExprArena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (v, _) in self.iter() {
            self.write_node(f, v)?;
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_and_verify() {
        let mut a = ExprArena::new();
        let x = a.push_typed(Node::Input(0), DType::F32).unwrap();
        let k = a.push_typed(Node::Param(0), DType::F32).unwrap();
        let m = a.push(Node::Binary(BinaryOp::Mul, x, k)).unwrap();
        let c = a.push(Node::Binary(BinaryOp::Gt, m, x)).unwrap();
        a.push(Node::Select(c, m, x)).unwrap();
        assert_eq!(
            a.to_string(),
            "v0 = input.0 : f32\nv1 = param.0 : f32\nv2 = mul v0, v1 : f32\n\
             v3 = gt v2, v0 : bool\nv4 = select v3, v2, v0 : f32\n"
        );
        a.verify().unwrap();
    }

    #[test]
    fn rejects_ill_typed_nodes() {
        let mut a = ExprArena::new();
        let x = a.push_typed(Node::Input(0), DType::F32).unwrap();
        let i = a.push_typed(Node::Input(1), DType::I32).unwrap();
        assert!(a.push(Node::Binary(BinaryOp::Add, x, i)).is_err());
        assert!(a.push(Node::Unary(UnaryOp::Sqrt, i)).is_err());
        assert!(a.push(Node::Unary(UnaryOp::Not, x)).is_err());
        assert!(a
            .push(Node::Binary(BinaryOp::Add, x, Value::new(9)))
            .is_err());
    }

    #[test]
    fn the_fast_type_check_agrees_with_the_explained_one() {
        // One input of each type, then every node shape over every pair
        // and triple of them (and one operand past the end), declared as
        // nothing or as each type: `infer_type` gives a type exactly when
        // `infer_error`'s full checks accept the node, and the same type.
        let mut a = ExprArena::new();
        let inputs: Vec<Value> = DType::ALL
            .iter()
            .enumerate()
            .map(|(s, &t)| a.push_typed(Node::Input(s as u16), t).unwrap())
            .collect();
        let mut operands = inputs.clone();
        operands.push(Value::new(99));
        let mut nodes = vec![
            Node::Input(0),
            Node::Index(0),
            Node::Param(0),
            Node::Const(Scalar::F64(-0.0)),
            Node::Const(Scalar::U32(7)),
        ];
        for &x in &operands {
            nodes.extend(UnaryOp::ALL.iter().map(|&op| Node::Unary(op, x)));
            nodes.extend([Node::Cast(x), Node::Powi(x, 3)]);
            for &y in &operands {
                nodes.extend(BinaryOp::ALL.iter().map(|&op| Node::Binary(op, x, y)));
                for &z in &operands {
                    nodes.extend([Node::Select(x, y, z), Node::MulAdd(x, y, z)]);
                }
            }
        }
        let declared: Vec<Option<DType>> = std::iter::once(None)
            .chain(DType::ALL.iter().copied().map(Some))
            .collect();
        let mut accepted = 0;
        for n in &nodes {
            for &d in &declared {
                let full = a.infer_error(n, d).ok();
                assert_eq!(a.infer_type(n, d), full, "{n:?} declared {d:?}");
                accepted += usize::from(full.is_some());
            }
        }
        assert!(accepted > 1000, "{accepted}");
    }

    #[test]
    fn verify_catches_a_corrupted_type() {
        let mut a = ExprArena::new();
        let x = a.push_typed(Node::Input(0), DType::F32).unwrap();
        let y = a.push(Node::Unary(UnaryOp::Neg, x)).unwrap();
        a.get_mut(y).ty = DType::I32;
        assert!(a.verify().is_err());
    }
}
