//! Operation kinds of the element expression IR and their typing rules.
//!
//! Each kind is an enum with methods (`is_comparison`, `result_type`); no
//! code anywhere matches operation names as strings.

use crate::types::DType;
use std::fmt;

/// One-operand operations.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum UnaryOp {
    /// `-x`; wraps for integers.
    Neg,
    /// `!b` on booleans.
    Not,
    /// `|x|`; `wrapping_abs` for integers.
    Abs,
    /// Square root (floats).
    Sqrt,
    /// `e^x` (floats).
    Exp,
    /// Natural logarithm (floats).
    Ln,
    /// Sine (floats).
    Sin,
    /// Cosine (floats).
    Cos,
    /// Round toward −∞ (floats).
    Floor,
    /// Round toward +∞ (floats).
    Ceil,
    /// Round half away from zero, as Rust's `round` (floats).
    Round,
    /// `!x` on integers: every bit flipped.
    BitNot,
}

impl UnaryOp {
    /// Every unary operation.
    pub const ALL: [UnaryOp; 12] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::Exp,
        UnaryOp::Ln,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::BitNot,
    ];

    /// The text-form mnemonic.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Abs => "abs",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Exp => "exp",
            UnaryOp::Ln => "ln",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::BitNot => "bnot",
        }
    }

    /// Operations defined only on floats.
    pub const fn is_float_only(self) -> bool {
        !matches!(
            self,
            UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs | UnaryOp::BitNot
        )
    }

    /// Transcendental functions: several cycles per element on any device.
    pub const fn is_transcendental(self) -> bool {
        matches!(
            self,
            UnaryOp::Exp | UnaryOp::Ln | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Sqrt
        )
    }

    /// Whether `ty` is a valid operand type.
    pub fn accepts(self, ty: DType) -> bool {
        match self {
            UnaryOp::Not => ty == DType::Bool,
            UnaryOp::BitNot => ty.is_int(),
            UnaryOp::Neg | UnaryOp::Abs => ty.is_numeric(),
            _ => ty.is_float(),
        }
    }
}

/// Two-operand operations.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum BinaryOp {
    /// `a + b`; wraps for integers.
    Add,
    /// `a - b`; wraps for integers.
    Sub,
    /// `a * b`; wraps for integers.
    Mul,
    /// `a / b`; integer division by zero is 0, `MIN / -1` wraps.
    Div,
    /// `a % b`; integer remainder by zero is 0; float remainder truncates (`fmod`).
    Rem,
    /// Minimum; for floats a NaN operand yields the other operand.
    Min,
    /// Maximum; for floats a NaN operand yields the other operand.
    Max,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// Boolean and.
    And,
    /// Boolean or.
    Or,
    /// `a & b` on integers.
    BitAnd,
    /// `a | b` on integers.
    BitOr,
    /// `a ^ b` on integers.
    BitXor,
    /// `a << b` on integers, the amount taken modulo the bit width (Rust's
    /// `wrapping_shl(b as u32)`).
    Shl,
    /// `a >> b` on integers, arithmetic for signed types, the amount taken
    /// modulo the bit width (Rust's `wrapping_shr(b as u32)`).
    Shr,
}

impl BinaryOp {
    /// Every binary operation.
    pub const ALL: [BinaryOp; 20] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];

    /// The text-form mnemonic.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::BitAnd => "band",
            BinaryOp::BitOr => "bor",
            BinaryOp::BitXor => "bxor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
        }
    }

    /// `eq ne lt le gt ge`: numeric operands, boolean result.
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// `and or`: boolean operands.
    pub const fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }

    /// `band bor bxor shl shr`: integer operands.
    pub const fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::Shl | BinaryOp::Shr
        )
    }

    /// `a op b == b op a` for every value (used by CSE to canonicalise).
    pub const fn is_commutative(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Min
                | BinaryOp::Max
                | BinaryOp::Eq
                | BinaryOp::Ne
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor
        )
    }

    /// The result type for operands of type `ty`, or `None` when the
    /// operation does not apply to `ty`.
    pub fn result_type(self, ty: DType) -> Option<DType> {
        if self.is_logical() {
            return (ty == DType::Bool).then_some(DType::Bool);
        }
        if self.is_comparison() {
            return Some(DType::Bool);
        }
        if self.is_bitwise() {
            return ty.is_int().then_some(ty);
        }
        ty.is_numeric().then_some(ty)
    }
}

impl fmt::Display for UnaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
