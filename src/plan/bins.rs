//! The shape of a histogram's key, recognized in a stage's program by the
//! backends that compute it with one kernel and by the cost model.

use crate::expr::{BinaryOp, DType, ExprArena, Node, UnaryOp, Value};

/// Per value, whether it depends on no position (parameters, constants
/// and what is computed only from them): evaluated once per run.
pub(crate) fn uniform_values(prog: &ExprArena) -> Vec<bool> {
    let mut uniform = vec![false; prog.len()];
    for (v, d) in prog.iter() {
        uniform[v.index()] = match d.node {
            Node::Param(_) | Node::Const(_) => true,
            Node::Input(_) | Node::Index(_) => false,
            ref node => node.operands().iter().all(|o| uniform[o.index()]),
        };
    }
    uniform
}

/// A histogram's key over a float column `v` ([`crate::Query::histogram`]):
/// `select(v != v, nan, select(v < lo_cmp, below, select(v >= hi, above,
/// min(floor((v - lo) * scale) as i32, last)))) as u32`, every operand but
/// `v` uniform. `cpu-simd` computes it with one kernel, and the cost model
/// prices it so.
/// The key's operations past its column, each a node of the program: the
/// subtract, multiply, floor, cast and min, three compares, three selects
/// and the cast to `u32`.
pub(crate) const KEY_OPS: f64 = 12.0;

#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct BinValues {
    /// The float column.
    pub(crate) v: Value,
    pub(crate) uniforms: BinUniforms<Value>,
}

/// The uniform operands of a histogram's key ([`BinValues`]), as values of
/// the program or as whatever a backend reads them from.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct BinUniforms<U> {
    pub(crate) lo: U,
    pub(crate) scale: U,
    pub(crate) last: U,
    pub(crate) hi: U,
    pub(crate) lo_cmp: U,
    pub(crate) below: U,
    pub(crate) above: U,
    pub(crate) nan: U,
}

impl<U: Copy> BinUniforms<U> {
    /// Every operand.
    pub(crate) fn all(&self) -> [U; 8] {
        [
            self.lo,
            self.scale,
            self.last,
            self.hi,
            self.lo_cmp,
            self.below,
            self.above,
            self.nan,
        ]
    }

    /// Each operand through `f`, the first error if any.
    pub(crate) fn try_map<W, E>(&self, f: impl Fn(U) -> Result<W, E>) -> Result<BinUniforms<W>, E> {
        Ok(BinUniforms {
            lo: f(self.lo)?,
            scale: f(self.scale)?,
            last: f(self.last)?,
            hi: f(self.hi)?,
            lo_cmp: f(self.lo_cmp)?,
            below: f(self.below)?,
            above: f(self.above)?,
            nan: f(self.nan)?,
        })
    }
}

/// The histogram key shape at `key`, if `key` has it (`uniform`: per
/// value, from [`uniform_values`]).
pub(crate) fn bin_values(prog: &ExprArena, key: Value, uniform: &[bool]) -> Option<BinValues> {
    // Never a panic on a plan not yet checked (the cost model sees plans
    // before a backend compiles them): every value below is then in range.
    if key.index() >= prog.len() || uniform.len() != prog.len() || prog.verify().is_err() {
        return None;
    }
    let node = |v: Value| prog.get(v).node;
    let is_i32 = |v: Value| prog.ty(v) == DType::I32;
    let u = |v: Value| uniform[v.index()];
    // One `select(v op k, a, rest)` of the chain: `(k, a, rest)`.
    let select = |s: Value, op: BinaryOp, v: Value| -> Option<(Value, Value, Value)> {
        let Node::Select(c, a, rest) = node(s) else {
            return None;
        };
        let Node::Binary(o, x, k) = node(c) else {
            return None;
        };
        (o == op && x == v && is_i32(s) && u(a)).then_some((k, a, rest))
    };
    let Node::Cast(s) = node(key) else {
        return None;
    };
    if prog.ty(key) != DType::U32 || !is_i32(s) {
        return None;
    }
    let Node::Select(c, nan, s) = node(s) else {
        return None;
    };
    let Node::Binary(BinaryOp::Ne, v, v2) = node(c) else {
        return None;
    };
    if v != v2 || !prog.ty(v).is_float() || u(v) || !u(nan) {
        return None;
    }
    let (lo_cmp, below, s) = select(s, BinaryOp::Lt, v)?;
    let (hi, above, m) = select(s, BinaryOp::Ge, v)?;
    let Node::Binary(BinaryOp::Min, f, last) = node(m) else {
        return None;
    };
    let Node::Cast(fl) = node(f) else {
        return None;
    };
    let Node::Unary(UnaryOp::Floor, p) = node(fl) else {
        return None;
    };
    let Node::Binary(BinaryOp::Mul, d, scale) = node(p) else {
        return None;
    };
    let Node::Binary(BinaryOp::Sub, v3, lo) = node(d) else {
        return None;
    };
    let uniforms = BinUniforms {
        lo,
        scale,
        last,
        hi,
        lo_cmp,
        below,
        above,
        nan,
    };
    (v3 == v && is_i32(m) && is_i32(f) && uniforms.all().iter().all(|&x| u(x)))
        .then_some(BinValues { v, uniforms })
}
