//! Element programs: every node of a stage's arena as kernel IR.

use super::*;

/// What a leaf of an element program lowers to.
pub(super) enum Leaf {
    Value(Operand),
    /// A 32-bit stand-in for a 64-bit enumerate index.
    Narrow(Local),
}

/// Emits every node of `arena`; `leaf` lowers `Input`, `Index`, `Param` and
/// `Const`. Returns one operand per node (`None` for a narrow index).
pub(super) fn emit_arena(
    b: &mut KernelBuilder,
    arena: &ExprArena,
    leaf: &mut dyn FnMut(&mut KernelBuilder, Node, DType) -> R<Leaf>,
) -> R<Vec<Option<Operand>>> {
    let mut vals: Vec<Option<Operand>> = Vec::with_capacity(arena.len());
    let mut narrow: BTreeMap<usize, Local> = BTreeMap::new();
    let need = |v: crate::expr::Value, vals: &[Option<Operand>]| -> R<Operand> {
        // An index (a `u64`) wider than 32 bits.
        vals[v.index()].ok_or(LowerError(Decline::MissingType {
            dtype: DType::U64,
            feature: "SHADER_INT64",
        }))
    };
    for (v, n) in arena.iter() {
        let ty = n.ty;
        let out: Option<Operand> = match n.node {
            Node::Input(_) | Node::Index(_) | Node::Param(_) | Node::Const(_) => {
                match leaf(b, n.node, ty)? {
                    Leaf::Value(o) => Some(o),
                    Leaf::Narrow(l) => {
                        narrow.insert(v.index(), l);
                        None
                    }
                }
            }
            Node::Unary(op, a) => Some(b.assign(ty, Op::Unary(op, need(a, &vals)?)).into()),
            Node::Binary(op, x, y) => Some(
                b.assign(ty, Op::Binary(op, need(x, &vals)?, need(y, &vals)?))
                    .into(),
            ),
            Node::Select(c, x, y) => Some(
                b.assign(
                    ty,
                    Op::Select(need(c, &vals)?, need(x, &vals)?, need(y, &vals)?),
                )
                .into(),
            ),
            Node::MulAdd(x, y, z) => Some(
                b.assign(
                    ty,
                    Op::MulAdd(need(x, &vals)?, need(y, &vals)?, need(z, &vals)?),
                )
                .into(),
            ),
            Node::Cast(a) => match narrow.get(&a.index()) {
                Some(&l) if !ty.is_wide() => Some(b.assign(ty, Op::Cast(l.into())).into()),
                Some(_) => {
                    return Err(LowerError(Decline::MissingType {
                        dtype: DType::U64,
                        feature: "SHADER_INT64",
                    }))
                }
                None => {
                    let a = need(a, &vals)?;
                    if b.ty(a) == ty {
                        Some(a)
                    } else {
                        Some(b.assign(ty, Op::Cast(a)).into())
                    }
                }
            },
            Node::Powi(a, k) => Some(powi(b, need(a, &vals)?, k, ty)),
        };
        vals.push(out);
    }
    Ok(vals)
}

/// `x^k` by the multiply sequence of `expr::eval::pow_unsigned`.
fn powi(b: &mut KernelBuilder, x: Operand, k: i32, ty: DType) -> Operand {
    let one = Operand::Const(Scalar::I64(1).cast(ty));
    let mut e = k.unsigned_abs();
    let mut result: Option<Operand> = None;
    let mut base = x;
    while e > 0 {
        if e & 1 == 1 {
            result = Some(match result {
                None => base,
                Some(r) => b.binary(BinaryOp::Mul, r, base).into(),
            });
        }
        e >>= 1;
        if e > 0 {
            base = b.binary(BinaryOp::Mul, base, base).into();
        }
    }
    let r = result.unwrap_or(one);
    if k < 0 {
        b.binary(BinaryOp::Div, one, r).into()
    } else {
        r
    }
}
