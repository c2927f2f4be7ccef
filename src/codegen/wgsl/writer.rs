//! Prints a verified [`Kernel`] as WGSL through one `fmt::Write`.
//!
//! Where WGSL's own rule differs from the reference semantics, the writer
//! emits a small helper function (`cq_*`) and calls it:
//!
//! | operation | WGSL rule | helper |
//! | --- | --- | --- |
//! | integer `/` `%` by 0, `MIN / -1` | implementation-defined or `e1` | `cq_div_T`, `cq_rem_T`: 0 and wrapping |
//! | float→int cast | out-of-range values unspecified | `cq_cast_F_I`: saturate, NaN → 0 |
//! | float `min` `max` with NaN | unspecified | `cq_min_T`, `cq_max_T`: the non-NaN operand |
//! | `round` | half to even | `cq_round_T`: half away from zero |
//! | NaN test | `x != x` may be folded | `cq_isnan_T`: on the bits |
//!
//! Float constants that are not finite are written as `bitcast` of their
//! bits; `bool` storage elements and uniform fields are `u32` words.
//! Float `%` is WGSL's `%` (truncated remainder; on GL computed as
//! `a - b * trunc(a / b)`, which can differ from `fmod` in the last bits
//! when the quotient is large).

use super::namer::Namer;
use crate::codegen::kernel::{
    visit, Access, AtomicOp, Builtin, Kernel, Op, Operand, Stmt, SubgroupOp,
};
use crate::expr::{BinaryOp, DType, Scalar, UnaryOp};
use std::collections::BTreeSet;
use std::fmt::{self, Write};

/// Why a kernel cannot be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The underlying writer failed.
    Fmt,
    /// The kernel does not verify.
    Invalid(String),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Fmt => f.write_str("formatting failed"),
            WriteError::Invalid(m) => write!(f, "invalid kernel: {m}"),
        }
    }
}

impl std::error::Error for WriteError {}

impl From<fmt::Error> for WriteError {
    fn from(_: fmt::Error) -> WriteError {
        WriteError::Fmt
    }
}

/// Helper functions a kernel needs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Helper {
    IsNan(DType),
    Min(DType),
    Max(DType),
    Round(DType),
    Div(DType),
    Rem(DType),
    Cast(DType, DType),
}

/// Writes kernels as WGSL.
pub struct WgslWriter<W: Write> {
    out: W,
    namer: Namer,
    bindings: Vec<String>,
    shared: Vec<String>,
    fields: Vec<String>,
    locals: Vec<String>,
    uniform_var: String,
}

/// The WGSL text of `kernel`.
pub fn write_kernel(kernel: &Kernel) -> Result<String, WriteError> {
    Ok(write_kernel_entry(kernel)?.0)
}

/// The WGSL text of `kernel` and the name of its entry point.
pub fn write_kernel_entry(kernel: &Kernel) -> Result<(String, String), WriteError> {
    let mut s = String::new();
    let entry = WgslWriter::new(&mut s).write(kernel)?;
    Ok((s, entry))
}

/// The WGSL spelling of a type.
pub fn type_name(t: DType) -> &'static str {
    t.name()
}

/// The type a value of `t` has in a storage buffer or the uniform block.
fn storage_type(t: DType) -> &'static str {
    if t == DType::Bool {
        "u32"
    } else {
        t.name()
    }
}

/// A WGSL literal for `s`, exact for every value.
pub fn literal(s: Scalar) -> String {
    match s {
        Scalar::Bool(b) => b.to_string(),
        Scalar::U32(v) => format!("{v}u"),
        Scalar::U64(v) => format!("{v}lu"),
        Scalar::I32(i32::MIN) => "i32(-2147483647i - 1i)".into(),
        Scalar::I64(i64::MIN) => "i64(-9223372036854775807li - 1li)".into(),
        Scalar::I32(v) if v < 0 => format!("({v}i)"),
        Scalar::I64(v) if v < 0 => format!("({v}li)"),
        Scalar::I32(v) => format!("{v}i"),
        Scalar::I64(v) => format!("{v}li"),
        Scalar::F32(v) if !v.is_finite() => format!("bitcast<f32>({:#x}u)", v.to_bits()),
        Scalar::F64(v) if !v.is_finite() => format!("bitcast<f64>({}lu)", v.to_bits()),
        Scalar::F32(v) => float_literal(format!("{v:?}"), "f"),
        Scalar::F64(v) => float_literal(format!("{v:?}"), "lf"),
    }
}

fn float_literal(text: String, suffix: &str) -> String {
    if text.starts_with('-') {
        format!("({text}{suffix})")
    } else {
        format!("{text}{suffix}")
    }
}

fn one(t: DType) -> Scalar {
    Scalar::I64(1).cast(t)
}

impl<W: Write> WgslWriter<W> {
    /// A writer printing into `out`.
    pub fn new(out: W) -> Self {
        WgslWriter {
            out,
            namer: Namer::new(),
            bindings: Vec::new(),
            shared: Vec::new(),
            fields: Vec::new(),
            locals: Vec::new(),
            uniform_var: String::new(),
        }
    }

    /// Gives back the underlying writer.
    pub fn finish(self) -> W {
        self.out
    }

    /// Writes one kernel as a complete WGSL module; returns the name of its
    /// entry point.
    pub fn write(&mut self, k: &Kernel) -> Result<String, WriteError> {
        k.verify().map_err(|e| WriteError::Invalid(e.to_string()))?;
        self.namer = Namer::new();
        self.bindings.clear();
        self.shared.clear();
        self.fields.clear();
        self.locals.clear();
        for n in [
            "lid", "wid", "nwg", "gid", "sg_size", "sg_lane", "sg_id", "num_sg",
        ] {
            self.namer.call(n);
        }
        let entry = self.namer.call(&k.name);
        writeln!(self.out, "// computeq kernel `{}`", k.name)?;
        if !k.uniforms.is_empty() {
            let sname = self.namer.call("Uniforms");
            writeln!(self.out, "struct {sname} {{")?;
            for f in &k.uniforms {
                let n = self.namer.call(&f.name);
                writeln!(self.out, "    {n}: {},", storage_type(f.ty))?;
                self.fields.push(n);
            }
            writeln!(self.out, "}}")?;
            self.uniform_var = self.namer.call("u");
            writeln!(
                self.out,
                "@group(0) @binding({}) var<uniform> {}: {sname};",
                k.bindings.len(),
                self.uniform_var
            )?;
        }
        for (i, b) in k.bindings.iter().enumerate() {
            let n = self.namer.call(&b.name);
            let (space, elem) = match b.access {
                Access::Read => ("storage, read", storage_type(b.elem).to_string()),
                Access::ReadWrite => ("storage, read_write", storage_type(b.elem).to_string()),
                Access::Atomic => ("storage, read_write", format!("atomic<{}>", b.elem.name())),
            };
            writeln!(
                self.out,
                "@group(0) @binding({i}) var<{space}> {n}: array<{elem}>;"
            )?;
            self.bindings.push(n);
        }
        // Booleans live in workgroup memory as `u32`, as they do in storage
        // buffers: `bool` has no defined memory representation, and
        // NVIDIA's Vulkan driver mis-stored `array<bool, N>` workgroup
        // arrays (an `all` of nothing read back false, and neighbouring
        // arrays were clobbered), where lavapipe and llvmpipe did not.
        for s in &k.shared {
            let n = self.namer.call(&s.name);
            let elem = if s.atomic {
                format!("atomic<{}>", storage_type(s.elem))
            } else {
                storage_type(s.elem).to_string()
            };
            writeln!(self.out, "var<workgroup> {n}: array<{elem}, {}>;", s.len)?;
            self.shared.push(n);
        }
        for h in helpers(k) {
            self.write_helper(h)?;
        }
        let needs = k.needs();
        writeln!(self.out)?;
        writeln!(self.out, "@compute @workgroup_size({})", k.workgroup_size)?;
        write!(
            self.out,
            "fn {entry}(@builtin(local_invocation_id) lid: vec3<u32>, \
             @builtin(workgroup_id) wid: vec3<u32>, \
             @builtin(num_workgroups) nwg: vec3<u32>, \
             @builtin(global_invocation_id) gid: vec3<u32>"
        )?;
        if needs.subgroups {
            write!(
                self.out,
                ", @builtin(subgroup_size) sg_size: u32, \
                 @builtin(subgroup_invocation_id) sg_lane: u32, \
                 @builtin(subgroup_id) sg_id: u32, \
                 @builtin(num_subgroups) num_sg: u32"
            )?;
        }
        writeln!(self.out, ") {{")?;
        for (i, l) in k.locals.iter().enumerate() {
            let n = self.namer.call(&format!("r{i}"));
            writeln!(self.out, "    var {n}: {};", type_name(l.ty))?;
            self.locals.push(n);
        }
        self.write_block(k, &k.body, 1)?;
        writeln!(self.out, "}}")?;
        Ok(entry)
    }

    fn operand(&self, o: Operand) -> String {
        match o {
            Operand::Local(l) => self.locals[l.index()].clone(),
            Operand::Const(c) => literal(c),
        }
    }

    fn write_block(&mut self, k: &Kernel, body: &[Stmt], depth: usize) -> Result<(), WriteError> {
        let pad = "    ".repeat(depth);
        for s in body {
            match s {
                Stmt::Assign(dst, op) => {
                    let e = self.expr(k, op, k.ty(*dst));
                    writeln!(self.out, "{pad}{} = {e};", self.locals[dst.index()])?;
                }
                Stmt::Store(b, i, v) => {
                    let elem = k.bindings[b.index()].elem;
                    let v = if elem == DType::Bool {
                        format!("select(0u, 1u, {})", self.operand(*v))
                    } else {
                        self.operand(*v)
                    };
                    writeln!(
                        self.out,
                        "{pad}{}[{}] = {v};",
                        self.bindings[b.index()],
                        self.operand(*i)
                    )?;
                }
                Stmt::StoreShared(a, i, v) if k.shared[a.index()].atomic => writeln!(
                    self.out,
                    "{pad}atomicStore(&{}[{}], {});",
                    self.shared[a.index()],
                    self.operand(*i),
                    self.operand(*v)
                )?,
                Stmt::StoreShared(a, i, v) => {
                    let v = if k.shared[a.index()].elem == DType::Bool {
                        format!("select(0u, 1u, {})", self.operand(*v))
                    } else {
                        self.operand(*v)
                    };
                    writeln!(
                        self.out,
                        "{pad}{}[{}] = {v};",
                        self.shared[a.index()],
                        self.operand(*i)
                    )?
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    writeln!(self.out, "{pad}if ({}) {{", self.operand(*cond))?;
                    self.write_block(k, then_body, depth + 1)?;
                    if !else_body.is_empty() {
                        writeln!(self.out, "{pad}}} else {{")?;
                        self.write_block(k, else_body, depth + 1)?;
                    }
                    writeln!(self.out, "{pad}}}")?;
                }
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                } => {
                    let v = self.locals[var.index()].clone();
                    writeln!(
                        self.out,
                        "{pad}for ({v} = {}; {v} < {}; {v} = {v} + {}) {{",
                        self.operand(*start),
                        self.operand(*end),
                        self.operand(*step)
                    )?;
                    self.write_block(k, body, depth + 1)?;
                    writeln!(self.out, "{pad}}}")?;
                }
                Stmt::Barrier => writeln!(self.out, "{pad}workgroupBarrier();")?,
            }
        }
        Ok(())
    }

    fn expr(&self, k: &Kernel, op: &Op, dst: DType) -> String {
        let o = |x: &Operand| self.operand(*x);
        let t = |x: &Operand| k.operand_ty(*x);
        match op {
            Op::Copy(a) => o(a),
            Op::Unary(u, a) => {
                let ty = t(a);
                let a = o(a);
                match u {
                    UnaryOp::Neg if ty.is_signed() => format!("-({a})"),
                    UnaryOp::Neg => format!("({} - {a})", literal(Scalar::zero(ty))),
                    UnaryOp::Not => format!("!({a})"),
                    UnaryOp::Abs if ty.is_signed() => format!("abs({a})"),
                    UnaryOp::Abs => a,
                    UnaryOp::Sqrt => format!("sqrt({a})"),
                    UnaryOp::Exp => format!("exp({a})"),
                    UnaryOp::Ln => format!("log({a})"),
                    UnaryOp::Sin => format!("sin({a})"),
                    UnaryOp::Cos => format!("cos({a})"),
                    UnaryOp::Floor => format!("floor({a})"),
                    UnaryOp::Ceil => format!("ceil({a})"),
                    UnaryOp::Round => format!("cq_round_{ty}({a})"),
                    UnaryOp::BitNot => format!("~({a})"),
                }
            }
            Op::Binary(b, x, y) => {
                let ty = t(x);
                let (x, y) = if ty == DType::Bool && b.is_comparison() {
                    // WGSL orders numbers only: false < true as 0 < 1.
                    (
                        format!("select(0u, 1u, {})", o(x)),
                        format!("select(0u, 1u, {})", o(y)),
                    )
                } else {
                    (o(x), o(y))
                };
                let infix = |s: &str| format!("({x} {s} {y})");
                match b {
                    BinaryOp::Add => infix("+"),
                    BinaryOp::Sub => infix("-"),
                    BinaryOp::Mul => infix("*"),
                    BinaryOp::Div if ty.is_float() => infix("/"),
                    BinaryOp::Rem if ty.is_float() => infix("%"),
                    BinaryOp::Div => format!("cq_div_{ty}({x}, {y})"),
                    BinaryOp::Rem => format!("cq_rem_{ty}({x}, {y})"),
                    BinaryOp::Min if ty.is_float() => format!("cq_min_{ty}({x}, {y})"),
                    BinaryOp::Max if ty.is_float() => format!("cq_max_{ty}({x}, {y})"),
                    BinaryOp::Min => format!("min({x}, {y})"),
                    BinaryOp::Max => format!("max({x}, {y})"),
                    BinaryOp::Eq => infix("=="),
                    // Drivers compile `!=` as an ordered comparison (false
                    // with NaN); IEEE and Rust say true.
                    BinaryOp::Ne if ty.is_float() => format!("!({x} == {y})"),
                    BinaryOp::Ne => infix("!="),
                    BinaryOp::Lt => infix("<"),
                    BinaryOp::Le => infix("<="),
                    BinaryOp::Gt => infix(">"),
                    BinaryOp::Ge => infix(">="),
                    BinaryOp::And | BinaryOp::BitAnd => infix("&"),
                    BinaryOp::Or | BinaryOp::BitOr => infix("|"),
                    BinaryOp::BitXor => infix("^"),
                    // WGSL shifts by a `u32` less than the width: the amount
                    // is taken modulo the width, as Rust's `wrapping_shl`.
                    BinaryOp::Shl | BinaryOp::Shr => {
                        let amount = if ty.size() == 8 {
                            format!("u32({y} & {})", literal(Scalar::I64(63).cast(ty)))
                        } else {
                            format!("(bitcast<u32>({y}) & 31u)")
                        };
                        let s = if *b == BinaryOp::Shl { "<<" } else { ">>" };
                        format!("({x} {s} {amount})")
                    }
                }
            }
            Op::Select(c, a, b) => format!("select({}, {}, {})", o(b), o(a), o(c)),
            Op::MulAdd(a, b, c) if t(a).is_float() => {
                format!("fma({}, {}, {})", o(a), o(b), o(c))
            }
            Op::MulAdd(a, b, c) => format!("({} * {} + {})", o(a), o(b), o(c)),
            Op::Cast(a) => cast(t(a), dst, &o(a)),
            Op::Bitcast(a) => format!("bitcast<{}>({})", dst.name(), o(a)),
            Op::IsNan(a) => format!("cq_isnan_{}({})", t(a), o(a)),
            Op::Builtin(b) => match b {
                Builtin::LocalId => "lid.x".into(),
                Builtin::WorkgroupId => "wid.x".into(),
                Builtin::NumWorkgroups => "nwg.x".into(),
                Builtin::GlobalId => "gid.x".into(),
                Builtin::SubgroupSize => "sg_size".into(),
                Builtin::SubgroupLane => "sg_lane".into(),
                Builtin::SubgroupId => "sg_id".into(),
                Builtin::NumSubgroups => "num_sg".into(),
            },
            Op::Uniform(f) => {
                let v = format!("{}.{}", self.uniform_var, self.fields[f.index()]);
                if k.uniforms[f.index()].ty == DType::Bool {
                    format!("({v} != 0u)")
                } else {
                    v
                }
            }
            Op::Load(b, i) => {
                let v = format!("{}[{}]", self.bindings[b.index()], o(i));
                if k.bindings[b.index()].elem == DType::Bool {
                    format!("({v} != 0u)")
                } else {
                    v
                }
            }
            Op::LoadShared(s, i) if k.shared[s.index()].atomic => {
                format!("atomicLoad(&{}[{}])", self.shared[s.index()], o(i))
            }
            Op::LoadShared(s, i) => {
                let v = format!("{}[{}]", self.shared[s.index()], o(i));
                if k.shared[s.index()].elem == DType::Bool {
                    format!("({v} != 0u)")
                } else {
                    v
                }
            }
            Op::Subgroup(s, a) => {
                let f = match s {
                    SubgroupOp::Add => "subgroupAdd",
                    SubgroupOp::Min => "subgroupMin",
                    SubgroupOp::Max => "subgroupMax",
                    SubgroupOp::All => "subgroupAll",
                    SubgroupOp::Any => "subgroupAny",
                    SubgroupOp::InclusiveAdd => "subgroupInclusiveAdd",
                    SubgroupOp::BroadcastFirst => "subgroupBroadcastFirst",
                };
                format!("{f}({})", o(a))
            }
            Op::Atomic {
                op,
                binding,
                index,
                value,
            } => {
                format!(
                    "{}(&{}[{}], {})",
                    atomic_fn(*op),
                    self.bindings[binding.index()],
                    o(index),
                    o(value)
                )
            }
            Op::AtomicShared {
                op,
                shared,
                index,
                value,
            } => {
                format!(
                    "{}(&{}[{}], {})",
                    atomic_fn(*op),
                    self.shared[shared.index()],
                    o(index),
                    o(value)
                )
            }
        }
    }

    fn write_helper(&mut self, h: Helper) -> Result<(), WriteError> {
        let w = &mut self.out;
        match h {
            Helper::IsNan(t) => {
                let (bits, mask, inf) = if t == DType::F64 {
                    ("u64", "9223372036854775807lu", "9218868437227405312lu")
                } else {
                    ("u32", "0x7fffffffu", "0x7f800000u")
                };
                writeln!(
                    w,
                    "fn cq_isnan_{t}(x: {t}) -> bool {{\n    return (bitcast<{bits}>(x) & {mask}) > {inf};\n}}"
                )?;
            }
            Helper::Min(t) | Helper::Max(t) => {
                let (name, cmp) = if matches!(h, Helper::Min(_)) {
                    ("min", "<")
                } else {
                    ("max", ">")
                };
                writeln!(
                    w,
                    "fn cq_{name}_{t}(a: {t}, b: {t}) -> {t} {{\n    if (cq_isnan_{t}(a)) {{ return b; }}\n    \
                     if (cq_isnan_{t}(b)) {{ return a; }}\n    return select(a, b, b {cmp} a);\n}}"
                )?;
            }
            Helper::Round(t) => writeln!(
                w,
                "fn cq_round_{t}(x: {t}) -> {t} {{\n    let t = trunc(x);\n    \
                 return select(t, t + sign(x), abs(x - t) >= {});\n}}",
                literal(Scalar::F64(0.5).cast(t))
            )?,
            Helper::Div(t) | Helper::Rem(t) => {
                let zero = literal(Scalar::zero(t));
                let is_div = matches!(h, Helper::Div(_));
                let name = if is_div { "div" } else { "rem" };
                let op = if is_div { "/" } else { "%" };
                write!(w, "fn cq_{name}_{t}(a: {t}, b: {t}) -> {t} {{\n    if (b == {zero}) {{ return {zero}; }}\n")?;
                if t.is_signed() {
                    // Divide the magnitudes as unsigned (GLSL leaves `/` and
                    // `%` of negative operands undefined), then apply the
                    // sign of truncating division.
                    let u = if t == DType::I32 { "u32" } else { "u64" };
                    let minus_one = literal(Scalar::I64(-1).cast(t));
                    if is_div {
                        writeln!(
                            w,
                            "    if (b == {minus_one}) {{ return {zero} - a; }}\n    \
                             let q = bitcast<{t}>(bitcast<{u}>(abs(a)) / bitcast<{u}>(abs(b)));\n    \
                             return select(q, {zero} - q, (a < {zero}) != (b < {zero}));\n}}"
                        )?;
                    } else {
                        writeln!(
                            w,
                            "    if (b == {minus_one}) {{ return {zero}; }}\n    \
                             let r = bitcast<{t}>(bitcast<{u}>(abs(a)) % bitcast<{u}>(abs(b)));\n    \
                             return select(r, {zero} - r, a < {zero});\n}}"
                        )?;
                    }
                } else {
                    writeln!(w, "    return a {op} b;\n}}")?;
                }
            }
            Helper::Cast(from, to) => {
                let bits = to.size() as i32 * 8;
                let (lo, hi) = if to.is_signed() {
                    (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1))
                } else {
                    (0.0, 2f64.powi(bits))
                };
                let (min, max) = match to {
                    DType::I32 => (Scalar::I32(i32::MIN), Scalar::I32(i32::MAX)),
                    DType::U32 => (Scalar::U32(0), Scalar::U32(u32::MAX)),
                    DType::I64 => (Scalar::I64(i64::MIN), Scalar::I64(i64::MAX)),
                    _ => (Scalar::U64(0), Scalar::U64(u64::MAX)),
                };
                writeln!(
                    w,
                    "fn cq_cast_{from}_{to}(x: {from}) -> {to} {{\n    if (cq_isnan_{from}(x)) {{ return {zero}; }}\n    \
                     if (x >= {hi}) {{ return {max}; }}\n    if (x <= {lo}) {{ return {min}; }}\n    return {to}(x);\n}}",
                    zero = literal(Scalar::zero(to)),
                    hi = literal(Scalar::F64(hi).cast(from)),
                    lo = literal(Scalar::F64(lo).cast(from)),
                    max = literal(max),
                    min = literal(min),
                )?;
            }
        }
        Ok(())
    }
}

/// A cast with Rust `as` semantics.
fn cast(from: DType, to: DType, a: &str) -> String {
    if from == to {
        return a.to_string();
    }
    if to == DType::Bool {
        return format!("!({a} == {})", literal(Scalar::zero(from)));
    }
    if from == DType::Bool {
        return format!(
            "select({}, {}, {a})",
            literal(Scalar::zero(to)),
            literal(one(to))
        );
    }
    if from.is_float() && to.is_int() {
        return format!("cq_cast_{from}_{to}({a})");
    }
    if from.is_int() && to.is_int() {
        // Change the width keeping the source's signedness (sign or zero
        // extension, truncation), then reinterpret the bits.
        let same_sign = match (to.size(), from.is_signed()) {
            (4, true) => DType::I32,
            (4, false) => DType::U32,
            (_, true) => DType::I64,
            (_, false) => DType::U64,
        };
        let resized = if same_sign == from {
            a.to_string()
        } else if (from, same_sign) == (DType::I32, DType::I64) {
            // Sign extension written as a zero extension and a flip of the
            // sign bit. Mesa 22.3's lavapipe miscompiles a comparison of
            // `i64(x)` with a 64-bit constant (`i64(x) < 0li` is false for
            // every negative `x`), which breaks the signed division helper
            // and any compare of the cast with a literal; this form
            // computes the same value and is not matched by that rewrite.
            format!("(bitcast<i64>(u64(bitcast<u32>({a})) ^ 0x80000000lu) - 0x80000000li)")
        } else {
            format!("{same_sign}({a})")
        };
        return if same_sign == to {
            resized
        } else {
            format!("bitcast<{to}>({resized})")
        };
    }
    format!("{to}({a})")
}

/// The helper functions `k` calls, in a fixed order (dependencies first).
fn helpers(k: &Kernel) -> BTreeSet<Helper> {
    let mut set = BTreeSet::new();
    visit(&k.body, &mut |s| {
        let Stmt::Assign(dst, op) = s else { return };
        let t = |o: &Operand| k.operand_ty(*o);
        match op {
            Op::Unary(UnaryOp::Round, a) => {
                set.insert(Helper::Round(t(a)));
            }
            Op::Binary(BinaryOp::Div, a, _) if t(a).is_int() => {
                set.insert(Helper::Div(t(a)));
            }
            Op::Binary(BinaryOp::Rem, a, _) if t(a).is_int() => {
                set.insert(Helper::Rem(t(a)));
            }
            Op::Binary(BinaryOp::Min, a, _) if t(a).is_float() => {
                set.insert(Helper::IsNan(t(a)));
                set.insert(Helper::Min(t(a)));
            }
            Op::Binary(BinaryOp::Max, a, _) if t(a).is_float() => {
                set.insert(Helper::IsNan(t(a)));
                set.insert(Helper::Max(t(a)));
            }
            Op::IsNan(a) => {
                set.insert(Helper::IsNan(t(a)));
            }
            Op::Cast(a) if t(a).is_float() && k.ty(*dst).is_int() => {
                set.insert(Helper::IsNan(t(a)));
                set.insert(Helper::Cast(t(a), k.ty(*dst)));
            }
            _ => {}
        }
    });
    set
}

/// The WGSL built-in of an atomic operation.
fn atomic_fn(op: AtomicOp) -> &'static str {
    match op {
        AtomicOp::Add => "atomicAdd",
        AtomicOp::Min => "atomicMin",
        AtomicOp::Max => "atomicMax",
        AtomicOp::Or => "atomicOr",
        AtomicOp::Exchange => "atomicExchange",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_exact() {
        assert_eq!(literal(Scalar::F32(2.0)), "2.0f");
        assert_eq!(literal(Scalar::F32(-0.5)), "(-0.5f)");
        assert_eq!(literal(Scalar::F32(f32::NAN)), "bitcast<f32>(0x7fc00000u)");
        assert_eq!(literal(Scalar::I32(i32::MIN)), "i32(-2147483647i - 1i)");
        assert_eq!(literal(Scalar::U64(7)), "7lu");
        assert_eq!(literal(Scalar::F64(1e300)), "1e300lf");
    }

    #[test]
    fn casts_resize_then_reinterpret() {
        // Sign extension avoids `i64(x)` (Mesa 22.3, see `cast`).
        let extended = "(bitcast<i64>(u64(bitcast<u32>(x)) ^ 0x80000000lu) - 0x80000000li)";
        assert_eq!(cast(DType::I32, DType::I64, "x"), extended);
        assert_eq!(
            cast(DType::I32, DType::U64, "x"),
            format!("bitcast<u64>({extended})")
        );
        assert_eq!(cast(DType::U32, DType::I64, "x"), "bitcast<i64>(u64(x))");
        assert_eq!(cast(DType::I64, DType::U32, "x"), "bitcast<u32>(i32(x))");
        assert_eq!(cast(DType::U32, DType::I32, "x"), "bitcast<i32>(x)");
        assert_eq!(cast(DType::F32, DType::I32, "x"), "cq_cast_f32_i32(x)");
        assert_eq!(cast(DType::Bool, DType::F32, "x"), "select(0.0f, 1.0f, x)");
    }
}
