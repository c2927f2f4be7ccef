//! Prints verified [`Kernel`]s as one PTX module through one `fmt::Write`.
//!
//! Registers: every IR register gets one PTX register of its class (`%p`
//! for `bool`, `%r` for 32-bit integers, `%rd` for 64-bit integers and
//! addresses, `%f` for `f32`, `%fd` for `f64`); temporaries continue the
//! same numbering, and each class is declared once as `%r<N>`. Constants
//! are moved into a temporary before use, so every instruction sees only
//! registers (ptxas folds them back).
//!
//! Where PTX's rule differs from the reference semantics the writer emits
//! the guard inline, or calls a helper of `super::math`:
//!
//! | operation | PTX rule | what is emitted |
//! | --- | --- | --- |
//! | integer `/` `%` by 0, `MIN / -1` | unspecified | divisor replaced by 1 under the guard, result selected: 0, or wrapping `-a` |
//! | float→int `cvt.rzi` | NaN gives 0 or `MIN` by type | explicit `setp.nan` → 0 and range clamps, then `cvt.rzi` |
//! | float `min` `max` | `min.f32` returns the non-NaN operand | used as is |
//! | float `+ - *` | may be contracted into `fma` | always `.rn`, which forbids contraction |
//! | `round` | `cvt.rni` is half to even | `trunc`, then `± 1` when `|x - trunc x| >= 0.5` |
//! | integer `abs` | `abs.s32` of `MIN` unspecified | `selp(x < 0, -x, x)` |
//! | `exp ln sin cos`, float `%` | approximate or missing | `cq_*_f64` helpers |
//! | float `!=` | `setp.ne` is ordered | `setp.neu` (true for NaN) |

use super::math::{write_data, write_helper, MathFn};
use super::namer::Namer;
use crate::codegen::kernel::{AtomicOp, Builtin, Kernel, Op, Operand, Stmt, SubgroupOp};
use crate::expr::{BinaryOp, DType, Scalar, UnaryOp};
use std::collections::BTreeSet;
use std::fmt::{self, Write};

/// Warp width on every NVIDIA GPU.
pub const WARP_SIZE: u32 = 32;

/// Name of the kernel parameter holding the uniform block.
pub const UNIFORM_PARAM: &str = "cq_uniforms";

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

/// The PTX ISA version and target of a module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PtxOptions {
    /// `.version major.minor`; 7.0 (CUDA 11.0) by default: every driver
    /// since 2020 loads it.
    pub version: (u32, u32),
    /// `.target`; `sm_70` (Volta) by default: the oldest architecture with
    /// independent thread scheduling and `shfl.sync`, and a PTX the driver
    /// JIT-compiles for every newer GPU.
    pub target: String,
}

impl Default for PtxOptions {
    fn default() -> PtxOptions {
        PtxOptions {
            version: (7, 0),
            target: "sm_70".into(),
        }
    }
}

impl PtxOptions {
    /// The same version, another target (`sm_80`).
    pub fn with_target(mut self, target: impl Into<String>) -> PtxOptions {
        self.target = target.into();
        self
    }
}

/// A PTX module: its text and the entry name of each kernel, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// The module text, ready for `cuModuleLoadData` or `ptxas`.
    pub text: String,
    /// `.entry` names, one per kernel given to the writer.
    pub entries: Vec<String>,
}

/// The PTX text of `kernel` alone, with the default options.
pub fn write_kernel(kernel: &Kernel) -> Result<String, WriteError> {
    Ok(write_module(std::slice::from_ref(kernel), &PtxOptions::default())?.text)
}

/// One module holding every kernel of `kernels` (one `.entry` each).
pub fn write_module(kernels: &[Kernel], options: &PtxOptions) -> Result<PtxModule, WriteError> {
    let mut text = String::new();
    let entries = PtxWriter::new(&mut text, options.clone()).write_module(kernels)?;
    Ok(PtxModule { text, entries })
}

/// Byte offset of every uniform field and the block's size: each field
/// aligned to its size (4 or 8 bytes), the block rounded up to 16 bytes,
/// as `UniformLayout::offsets` lays it out.
pub fn uniform_offsets(k: &Kernel) -> (Vec<usize>, usize) {
    let mut at = 0usize;
    let offs = k
        .uniforms
        .iter()
        .map(|f| {
            let size = f.ty.size().max(4);
            at = at.next_multiple_of(size);
            let o = at;
            at += size;
            o
        })
        .collect();
    (offs, at.next_multiple_of(16).max(16))
}

/// Bytes of one element of a binding or shared array (`bool` is a word).
pub fn element_size(t: DType) -> usize {
    t.size().max(4)
}

/// Writes kernels as PTX.
pub struct PtxWriter<W: Write> {
    out: W,
    options: PtxOptions,
}

impl<W: Write> PtxWriter<W> {
    /// A writer printing into `out`.
    pub fn new(out: W, options: PtxOptions) -> Self {
        PtxWriter { out, options }
    }

    /// Gives back the underlying writer.
    pub fn finish(self) -> W {
        self.out
    }

    /// Writes a complete module with one entry per kernel; returns the
    /// entry names.
    pub fn write_module(&mut self, kernels: &[Kernel]) -> Result<Vec<String>, WriteError> {
        let mut namer = Namer::new();
        let mut helpers = BTreeSet::new();
        let mut bodies = Vec::new();
        let mut entries = Vec::new();
        for k in kernels {
            k.verify().map_err(|e| WriteError::Invalid(e.to_string()))?;
            let entry = namer.call(&k.name);
            let mut kw = KernelWriter::new(k, &mut helpers);
            bodies.push(kw.write(&entry)?);
            entries.push(entry);
        }
        let (major, minor) = self.options.version;
        writeln!(self.out, "//")?;
        writeln!(self.out, "// computeq PTX module: {}", entries.join(", "))?;
        writeln!(self.out, "//")?;
        writeln!(self.out, ".version {major}.{minor}")?;
        writeln!(self.out, ".target {}", self.options.target)?;
        writeln!(self.out, ".address_size 64")?;
        writeln!(self.out)?;
        let mut text = String::new();
        for h in &helpers {
            write_data(*h, &mut text);
        }
        for h in &helpers {
            write_helper(*h, &mut text);
        }
        self.out.write_str(&text)?;
        for b in bodies {
            self.out.write_str(&b)?;
        }
        Ok(entries)
    }
}

/// Register classes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Class {
    P,
    R,
    Rd,
    F,
    Fd,
}

impl Class {
    const ALL: [Class; 5] = [Class::P, Class::R, Class::Rd, Class::F, Class::Fd];

    fn of(t: DType) -> Class {
        match t {
            DType::Bool => Class::P,
            DType::I32 | DType::U32 => Class::R,
            DType::I64 | DType::U64 => Class::Rd,
            DType::F32 => Class::F,
            DType::F64 => Class::Fd,
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Class::P => "%p",
            Class::R => "%r",
            Class::Rd => "%rd",
            Class::F => "%f",
            Class::Fd => "%fd",
        }
    }

    fn decl(self) -> &'static str {
        match self {
            Class::P => ".pred",
            Class::R => ".b32",
            Class::Rd => ".b64",
            Class::F => ".f32",
            Class::Fd => ".f64",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The instruction type of an arithmetic operation on `t`.
fn ity(t: DType) -> &'static str {
    match t {
        DType::I32 => "s32",
        DType::U32 => "u32",
        DType::I64 => "s64",
        DType::U64 => "u64",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::Bool => "pred",
    }
}

/// The type of a move, load or store of a register of `t`.
fn mty(t: DType) -> &'static str {
    match t {
        DType::Bool => "pred",
        DType::I32 | DType::U32 => "b32",
        DType::I64 | DType::U64 => "b64",
        DType::F32 => "f32",
        DType::F64 => "f64",
    }
}

/// A PTX immediate for `s`, exact for every value.
pub fn immediate(s: Scalar) -> String {
    match s {
        Scalar::Bool(b) => (b as u32).to_string(),
        Scalar::I32(v) => v.to_string(),
        Scalar::I64(v) => v.to_string(),
        Scalar::U32(v) if v <= i32::MAX as u32 => v.to_string(),
        Scalar::U32(v) => format!("0x{v:08x}"),
        Scalar::U64(v) if v <= i64::MAX as u64 => v.to_string(),
        Scalar::U64(v) => format!("0x{v:016x}"),
        Scalar::F32(v) => format!("0f{:08X}", v.to_bits()),
        Scalar::F64(v) => format!("0d{:016X}", v.to_bits()),
    }
}

fn one(t: DType) -> Scalar {
    Scalar::I64(1).cast(t)
}

/// Writes one kernel's `.entry`.
struct KernelWriter<'k, 'h> {
    k: &'k Kernel,
    helpers: &'h mut BTreeSet<MathFn>,
    body: String,
    counts: [u32; 5],
    locals: Vec<String>,
    bases: Vec<String>,
    shared: Vec<String>,
    shared_bases: Vec<String>,
    uniform_offsets: Vec<usize>,
    labels: u32,
    depth: usize,
}

impl<'k, 'h> KernelWriter<'k, 'h> {
    fn new(k: &'k Kernel, helpers: &'h mut BTreeSet<MathFn>) -> Self {
        let mut w = KernelWriter {
            k,
            helpers,
            body: String::new(),
            counts: [0; 5],
            locals: Vec::new(),
            bases: Vec::new(),
            shared: Vec::new(),
            shared_bases: Vec::new(),
            uniform_offsets: uniform_offsets(k).0,
            labels: 0,
            depth: 1,
        };
        w.locals = k.locals.iter().map(|l| w.reg(Class::of(l.ty))).collect();
        w
    }

    fn reg(&mut self, c: Class) -> String {
        let n = self.counts[c.index()];
        self.counts[c.index()] += 1;
        format!("{}{n}", c.prefix())
    }

    fn temp(&mut self, t: DType) -> String {
        self.reg(Class::of(t))
    }

    fn label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("$L{}_{what}", self.labels)
    }

    /// One instruction line.
    fn ins(&mut self, text: impl AsRef<str>) {
        for _ in 0..self.depth {
            self.body.push('\t');
        }
        self.body.push_str(text.as_ref());
        self.body.push_str(";\n");
    }

    fn comment(&mut self, text: impl fmt::Display) {
        for _ in 0..self.depth {
            self.body.push('\t');
        }
        let _ = writeln!(self.body, "// {text}");
    }

    fn place_label(&mut self, l: &str) {
        let _ = writeln!(self.body, "{l}:");
    }

    /// The register holding `o`; a constant is moved into a temporary.
    fn src(&mut self, o: Operand) -> String {
        match o {
            Operand::Local(l) => self.locals[l.index()].clone(),
            Operand::Const(c) => {
                let t = self.temp(c.dtype());
                self.ins(format!("mov.{} {t}, {}", mty(c.dtype()), immediate(c)));
                t
            }
        }
    }

    fn ty(&self, o: Operand) -> DType {
        self.k.operand_ty(o)
    }

    fn write(&mut self, entry: &str) -> Result<String, WriteError> {
        let k = self.k;
        let mut namer = Namer::new();
        let mut params = Vec::new();
        let mut param_names = Vec::new();
        for b in &k.bindings {
            let n = format!("cq_b_{}", namer.call(&b.name));
            params.push(format!("\t.param .u64 {n}"));
            param_names.push(n);
        }
        let (_, uniform_size) = uniform_offsets(k);
        if !k.uniforms.is_empty() {
            params.push(format!(
                "\t.param .align 16 .b8 {UNIFORM_PARAM}[{uniform_size}]"
            ));
        }
        // Prologue: global base pointers and shared bases.
        for n in &param_names {
            let r = self.reg(Class::Rd);
            self.ins(format!("ld.param.u64 {r}, [{n}]"));
            self.ins(format!("cvta.to.global.u64 {r}, {r}"));
            self.bases.push(r);
        }
        for s in &k.shared {
            let n = format!("cq_sh_{}", namer.call(&s.name));
            let r = self.reg(Class::R);
            self.ins(format!("mov.u32 {r}, {n}"));
            self.shared.push(n);
            self.shared_bases.push(r);
        }
        self.block(&k.body)?;
        self.ins("ret");

        let mut s = String::new();
        writeln!(s, "// kernel `{}`: workgroup {}", k.name, k.workgroup_size)?;
        writeln!(s, ".visible .entry {entry}(")?;
        writeln!(s, "{}", params.join(",\n"))?;
        writeln!(s, ")")?;
        writeln!(s, ".reqntid {}, 1, 1", k.workgroup_size)?;
        writeln!(s, "{{")?;
        for c in Class::ALL {
            let n = self.counts[c.index()];
            if n > 0 {
                writeln!(s, "\t.reg {} {}<{n}>;", c.decl(), c.prefix())?;
            }
        }
        for (a, n) in k.shared.iter().zip(&self.shared) {
            writeln!(
                s,
                "\t.shared .align 8 .b8 {n}[{}];",
                a.len as usize * element_size(a.elem)
            )?;
        }
        s.push_str(&self.body);
        writeln!(s, "}}")?;
        writeln!(s)?;
        Ok(s)
    }

    fn block(&mut self, body: &[Stmt]) -> Result<(), WriteError> {
        for s in body {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), WriteError> {
        match s {
            Stmt::Assign(dst, op) => {
                self.comment(format_args!("{dst} = {op} : {}", self.k.ty(*dst)));
                let d = self.locals[dst.index()].clone();
                self.op(&d, self.k.ty(*dst), op);
            }
            Stmt::Store(b, i, v) => {
                self.comment(format_args!("store {b}[{i}] = {v}"));
                let elem = self.k.bindings[b.index()].elem;
                let addr = self.global_addr(b.index(), *i);
                let v = self.src(*v);
                self.store("global", elem, &addr, &v);
            }
            Stmt::StoreShared(a, i, v) => {
                self.comment(format_args!("store {a}[{i}] = {v}"));
                let elem = self.k.shared[a.index()].elem;
                let addr = self.shared_addr(a.index(), *i);
                let v = self.src(*v);
                self.store("shared", elem, &addr, &v);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.comment(format_args!("if {cond}"));
                let c = self.src(*cond);
                let end = self.label("endif");
                if else_body.is_empty() {
                    self.ins(format!("@!{c} bra {end}"));
                    self.nested(then_body)?;
                } else {
                    let other = self.label("else");
                    self.ins(format!("@!{c} bra {other}"));
                    self.nested(then_body)?;
                    self.ins(format!("bra {end}"));
                    self.place_label(&other);
                    self.nested(else_body)?;
                }
                self.place_label(&end);
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                self.comment(format_args!("for {var} = {start} to {end} step {step}"));
                let v = self.locals[var.index()].clone();
                let s = self.src(*start);
                self.ins(format!("mov.b32 {v}, {s}"));
                let head = self.label("loop");
                let exit = self.label("endloop");
                self.place_label(&head);
                let e = self.src(*end);
                let p = self.reg(Class::P);
                self.ins(format!("setp.lt.u32 {p}, {v}, {e}"));
                self.ins(format!("@!{p} bra {exit}"));
                self.nested(body)?;
                let st = self.src(*step);
                self.ins(format!("add.u32 {v}, {v}, {st}"));
                self.ins(format!("bra {head}"));
                self.place_label(&exit);
            }
            Stmt::Barrier => self.ins("bar.sync 0"),
        }
        Ok(())
    }

    fn nested(&mut self, body: &[Stmt]) -> Result<(), WriteError> {
        self.depth += 1;
        let r = self.block(body);
        self.depth -= 1;
        r
    }

    /// `base + index * size` of a global binding, in a 64-bit register.
    fn global_addr(&mut self, binding: usize, index: Operand) -> String {
        let size = element_size(self.k.bindings[binding].elem);
        let i = self.src(index);
        let off = self.reg(Class::Rd);
        self.ins(format!("mul.wide.u32 {off}, {i}, {size}"));
        let a = self.reg(Class::Rd);
        let base = self.bases[binding].clone();
        self.ins(format!("add.s64 {a}, {base}, {off}"));
        a
    }

    /// `base + index * size` of a shared array, in a 32-bit register.
    fn shared_addr(&mut self, array: usize, index: Operand) -> String {
        let size = element_size(self.k.shared[array].elem);
        let i = self.src(index);
        let a = self.reg(Class::R);
        let base = self.shared_bases[array].clone();
        self.ins(format!("mad.lo.u32 {a}, {i}, {size}, {base}"));
        a
    }

    fn load(&mut self, space: &str, elem: DType, d: &str, addr: &str) {
        if elem == DType::Bool {
            let w = self.reg(Class::R);
            self.ins(format!("ld.{space}.u32 {w}, [{addr}]"));
            self.ins(format!("setp.ne.u32 {d}, {w}, 0"));
        } else {
            self.ins(format!("ld.{space}.{} {d}, [{addr}]", mty(elem)));
        }
    }

    fn store(&mut self, space: &str, elem: DType, addr: &str, v: &str) {
        if elem == DType::Bool {
            let w = self.reg(Class::R);
            self.ins(format!("selp.u32 {w}, 1, 0, {v}"));
            self.ins(format!("st.{space}.u32 [{addr}], {w}"));
        } else {
            self.ins(format!("st.{space}.{} [{addr}], {v}", mty(elem)));
        }
    }

    fn op(&mut self, d: &str, ty: DType, op: &Op) {
        match op {
            Op::Copy(Operand::Const(c)) => {
                self.ins(format!("mov.{} {d}, {}", mty(ty), immediate(*c)))
            }
            Op::Copy(a) => {
                let a = self.src(*a);
                self.ins(format!("mov.{} {d}, {a}", mty(ty)));
            }
            Op::Unary(u, a) => self.unary(d, *u, *a),
            Op::Binary(b, x, y) => self.binary(d, *b, *x, *y),
            Op::Select(c, a, b) => {
                let (c, a, b) = (self.src(*c), self.src(*a), self.src(*b));
                if ty == DType::Bool {
                    let (t1, t2) = (self.reg(Class::P), self.reg(Class::P));
                    self.ins(format!("and.pred {t1}, {c}, {a}"));
                    self.ins(format!("not.pred {t2}, {c}"));
                    self.ins(format!("and.pred {t2}, {t2}, {b}"));
                    self.ins(format!("or.pred {d}, {t1}, {t2}"));
                } else {
                    self.ins(format!("selp.{} {d}, {a}, {b}, {c}", mty(ty)));
                }
            }
            Op::MulAdd(a, b, c) => {
                let (a, b, c) = (self.src(*a), self.src(*b), self.src(*c));
                if ty.is_float() {
                    self.ins(format!("fma.rn.{} {d}, {a}, {b}, {c}", ity(ty)));
                } else {
                    self.ins(format!("mad.lo.{} {d}, {a}, {b}, {c}", ity(ty)));
                }
            }
            Op::Bitcast(a) => {
                let a = self.src(*a);
                let bits = if ty.size() == 8 { "b64" } else { "b32" };
                self.ins(format!("mov.{bits} {d}, {a}"));
            }
            Op::Cast(a) => {
                let from = self.ty(*a);
                let a = self.src(*a);
                self.cast(d, from, ty, &a);
            }
            Op::IsNan(a) => {
                let t = self.ty(*a);
                let a = self.src(*a);
                self.ins(format!("setp.nan.{} {d}, {a}, {a}", ity(t)));
            }
            Op::Builtin(b) => self.builtin(d, *b),
            Op::Uniform(f) => {
                let off = self.uniform_offsets[f.index()];
                let fty = self.k.uniforms[f.index()].ty;
                let at = format!("{UNIFORM_PARAM}+{off}");
                if fty == DType::Bool {
                    let w = self.reg(Class::R);
                    self.ins(format!("ld.param.u32 {w}, [{at}]"));
                    self.ins(format!("setp.ne.u32 {d}, {w}, 0"));
                } else {
                    self.ins(format!("ld.param.{} {d}, [{at}]", mty(fty)));
                }
            }
            Op::Load(b, i) => {
                let elem = self.k.bindings[b.index()].elem;
                let addr = self.global_addr(b.index(), *i);
                self.load("global", elem, d, &addr);
            }
            Op::LoadShared(s, i) => {
                let elem = self.k.shared[s.index()].elem;
                let addr = self.shared_addr(s.index(), *i);
                self.load("shared", elem, d, &addr);
            }
            Op::Subgroup(s, a) => {
                let t = self.ty(*a);
                let a = self.src(*a);
                self.subgroup(d, *s, t, &a);
            }
            Op::Atomic {
                op,
                binding,
                index,
                value,
            } => {
                let elem = self.k.bindings[binding.index()].elem;
                let addr = self.global_addr(binding.index(), *index);
                let v = self.src(*value);
                let (name, t) = atom_op(*op, elem);
                self.ins(format!("atom.global.{name}.{t} {d}, [{addr}], {v}"));
            }
            Op::AtomicShared {
                op,
                shared,
                index,
                value,
            } => {
                let elem = self.k.shared[shared.index()].elem;
                let addr = self.shared_addr(shared.index(), *index);
                let v = self.src(*value);
                let (name, t) = atom_op(*op, elem);
                self.ins(format!("atom.shared.{name}.{t} {d}, [{addr}], {v}"));
            }
        }
    }

    fn call(&mut self, f: MathFn, d: &str, ty: DType, args: &[String], which: Option<u32>) {
        self.helpers.insert(f);
        // f32 arguments are widened: the helpers work in f64.
        let wide: Vec<String> = args
            .iter()
            .map(|a| {
                if ty == DType::F32 {
                    let w = self.reg(Class::Fd);
                    self.ins(format!("cvt.f64.f32 {w}, {a}"));
                    w
                } else {
                    a.clone()
                }
            })
            .collect();
        let out = if ty == DType::F32 {
            self.reg(Class::Fd)
        } else {
            d.to_string()
        };
        let pad = "\t".repeat(self.depth);
        let _ = writeln!(self.body, "{pad}{{");
        self.depth += 1;
        let mut names = Vec::new();
        for (i, _) in wide.iter().enumerate() {
            self.ins(format!(".param .f64 cq_a{i}"));
            names.push(format!("cq_a{i}"));
        }
        if which.is_some() {
            self.ins(".param .b32 cq_w");
            names.push("cq_w".into());
        }
        self.ins(".param .f64 cq_r");
        for (i, a) in wide.iter().enumerate() {
            self.ins(format!("st.param.f64 [cq_a{i}], {a}"));
        }
        if let Some(w) = which {
            self.ins(format!("st.param.b32 [cq_w], {w}"));
        }
        self.ins(format!("call (cq_r), {}, ({})", f.name(), names.join(", ")));
        self.ins(format!("ld.param.f64 {out}, [cq_r]"));
        self.depth -= 1;
        let _ = writeln!(self.body, "{pad}}}");
        if ty == DType::F32 {
            self.ins(format!("cvt.rn.f32.f64 {d}, {out}"));
        }
    }

    fn unary(&mut self, d: &str, u: UnaryOp, a: Operand) {
        let t = self.ty(a);
        let a = self.src(a);
        let f = ity(t);
        match u {
            UnaryOp::Not => self.ins(format!("not.pred {d}, {a}")),
            UnaryOp::Neg if t.is_float() => self.ins(format!("neg.{f} {d}, {a}")),
            UnaryOp::Neg => {
                let s = if t.size() == 8 { "s64" } else { "s32" };
                self.ins(format!("neg.{s} {d}, {a}"));
            }
            UnaryOp::Abs if t.is_float() => self.ins(format!("abs.{f} {d}, {a}")),
            UnaryOp::Abs if t.is_signed() => {
                let n = self.temp(t);
                let p = self.reg(Class::P);
                self.ins(format!("neg.{f} {n}, {a}"));
                self.ins(format!("setp.lt.{f} {p}, {a}, 0"));
                self.ins(format!("selp.{} {d}, {n}, {a}, {p}", mty(t)));
            }
            UnaryOp::Abs => self.ins(format!("mov.{} {d}, {a}", mty(t))),
            UnaryOp::Sqrt => self.ins(format!("sqrt.rn.{f} {d}, {a}")),
            UnaryOp::Floor => self.ins(format!("cvt.rmi.{f}.{f} {d}, {a}")),
            UnaryOp::Ceil => self.ins(format!("cvt.rpi.{f}.{f} {d}, {a}")),
            UnaryOp::Round => {
                let (tr, diff, s, up) = (self.temp(t), self.temp(t), self.temp(t), self.temp(t));
                let p = self.reg(Class::P);
                let half = immediate(Scalar::F64(0.5).cast(t));
                let one = immediate(one(t));
                self.ins(format!("cvt.rzi.{f}.{f} {tr}, {a}"));
                self.ins(format!("sub.rn.{f} {diff}, {a}, {tr}"));
                self.ins(format!("abs.{f} {diff}, {diff}"));
                self.ins(format!("setp.ge.{f} {p}, {diff}, {half}"));
                self.ins(format!("copysign.{f} {s}, {a}, {one}"));
                self.ins(format!("add.rn.{f} {up}, {tr}, {s}"));
                self.ins(format!("selp.{f} {d}, {up}, {tr}, {p}"));
            }
            UnaryOp::Exp => self.call(MathFn::Exp, d, t, &[a], None),
            UnaryOp::Ln => self.call(MathFn::Ln, d, t, &[a], None),
            UnaryOp::Sin => self.call(MathFn::SinCos, d, t, &[a], Some(0)),
            UnaryOp::Cos => self.call(MathFn::SinCos, d, t, &[a], Some(1)),
            UnaryOp::BitNot => self.ins(format!("not.{} {d}, {a}", mty(t))),
        }
    }

    fn binary(&mut self, d: &str, b: BinaryOp, x: Operand, y: Operand) {
        let t = self.ty(x);
        let (x, y) = (self.src(x), self.src(y));
        let f = ity(t);
        if t == DType::Bool {
            return self.bool_binary(d, b, &x, &y);
        }
        match b {
            BinaryOp::Add | BinaryOp::Sub if t.is_float() => {
                let n = if b == BinaryOp::Add { "add" } else { "sub" };
                self.ins(format!("{n}.rn.{f} {d}, {x}, {y}"));
            }
            BinaryOp::Add => self.ins(format!("add.{f} {d}, {x}, {y}")),
            BinaryOp::Sub => self.ins(format!("sub.{f} {d}, {x}, {y}")),
            BinaryOp::Mul if t.is_float() => self.ins(format!("mul.rn.{f} {d}, {x}, {y}")),
            BinaryOp::Mul => self.ins(format!("mul.lo.{f} {d}, {x}, {y}")),
            BinaryOp::Div if t.is_float() => self.ins(format!("div.rn.{f} {d}, {x}, {y}")),
            BinaryOp::Rem if t.is_float() => {
                self.call(MathFn::Fmod, d, t, &[x, y], None);
            }
            BinaryOp::Div | BinaryOp::Rem => self.int_div(d, b == BinaryOp::Div, t, &x, &y),
            BinaryOp::Min => self.ins(format!("min.{f} {d}, {x}, {y}")),
            BinaryOp::Max => self.ins(format!("max.{f} {d}, {x}, {y}")),
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => {
                let c = match b {
                    BinaryOp::Eq => "eq",
                    // Rust's `!=` is true when either side is NaN.
                    BinaryOp::Ne if t.is_float() => "neu",
                    BinaryOp::Ne => "ne",
                    BinaryOp::Lt => "lt",
                    BinaryOp::Le => "le",
                    BinaryOp::Gt => "gt",
                    _ => "ge",
                };
                self.ins(format!("setp.{c}.{f} {d}, {x}, {y}"));
            }
            BinaryOp::BitAnd => self.ins(format!("and.{} {d}, {x}, {y}", mty(t))),
            BinaryOp::BitOr => self.ins(format!("or.{} {d}, {x}, {y}", mty(t))),
            BinaryOp::BitXor => self.ins(format!("xor.{} {d}, {x}, {y}", mty(t))),
            BinaryOp::Shl | BinaryOp::Shr => {
                // The amount is a `u32` taken modulo the width, as Rust's
                // `wrapping_shl` (PTX clamps larger amounts instead).
                let amount = self.reg(Class::R);
                if t.size() == 8 {
                    let low = self.temp(t);
                    self.ins(format!("and.b64 {low}, {y}, 63"));
                    self.ins(format!("cvt.u32.u64 {amount}, {low}"));
                } else {
                    self.ins(format!("and.b32 {amount}, {y}, 31"));
                }
                if b == BinaryOp::Shl {
                    self.ins(format!("shl.{} {d}, {x}, {amount}", mty(t)));
                } else {
                    // Arithmetic for signed types, logical for unsigned.
                    self.ins(format!("shr.{f} {d}, {x}, {amount}"));
                }
            }
            BinaryOp::And | BinaryOp::Or => unreachable!("logical op on {t} survived verification"),
        }
    }

    fn bool_binary(&mut self, d: &str, b: BinaryOp, x: &str, y: &str) {
        let t = self.reg(Class::P);
        match b {
            BinaryOp::And => self.ins(format!("and.pred {d}, {x}, {y}")),
            BinaryOp::Or => self.ins(format!("or.pred {d}, {x}, {y}")),
            BinaryOp::Ne => self.ins(format!("xor.pred {d}, {x}, {y}")),
            BinaryOp::Eq => {
                self.ins(format!("xor.pred {t}, {x}, {y}"));
                self.ins(format!("not.pred {d}, {t}"));
            }
            // false < true
            BinaryOp::Lt | BinaryOp::Le => {
                self.ins(format!("not.pred {t}, {x}"));
                let n = if b == BinaryOp::Lt { "and" } else { "or" };
                self.ins(format!("{n}.pred {d}, {t}, {y}"));
            }
            BinaryOp::Gt | BinaryOp::Ge => {
                self.ins(format!("not.pred {t}, {y}"));
                let n = if b == BinaryOp::Gt { "and" } else { "or" };
                self.ins(format!("{n}.pred {d}, {x}, {t}"));
            }
            _ => unreachable!("{b} on bool survived verification"),
        }
    }

    /// Integer `/` or `%` with the reference guards: by zero gives 0,
    /// `MIN / -1` wraps to `MIN`, `MIN % -1` is 0.
    fn int_div(&mut self, d: &str, div: bool, t: DType, x: &str, y: &str) {
        let f = ity(t);
        let m = mty(t);
        let zero = self.reg(Class::P);
        self.ins(format!("setp.eq.{f} {zero}, {y}, 0"));
        let guard = if t.is_signed() {
            let minus = self.reg(Class::P);
            let g = self.reg(Class::P);
            self.ins(format!("setp.eq.{f} {minus}, {y}, -1"));
            self.ins(format!("or.pred {g}, {zero}, {minus}"));
            Some((minus, g))
        } else {
            None
        };
        let safe = self.temp(t);
        let q = self.temp(t);
        let g = guard.as_ref().map(|(_, g)| g.as_str()).unwrap_or(&zero);
        self.ins(format!("selp.{m} {safe}, 1, {y}, {g}"));
        let n = if div { "div" } else { "rem" };
        self.ins(format!("{n}.{f} {q}, {x}, {safe}"));
        if let Some((minus, _)) = &guard {
            if div {
                let neg = self.temp(t);
                self.ins(format!("neg.{f} {neg}, {x}"));
                self.ins(format!("selp.{m} {q}, {neg}, {q}, {minus}"));
            } else {
                self.ins(format!("selp.{m} {q}, 0, {q}, {minus}"));
            }
        }
        self.ins(format!("selp.{m} {d}, 0, {q}, {zero}"));
    }

    /// Rust `as` from `from` to `to`.
    fn cast(&mut self, d: &str, from: DType, to: DType, a: &str) {
        if from == to {
            return self.ins(format!("mov.{} {d}, {a}", mty(to)));
        }
        if to == DType::Bool {
            let c = if from.is_float() { "neu" } else { "ne" };
            let zero = immediate(Scalar::zero(from));
            return self.ins(format!("setp.{c}.{} {d}, {a}, {zero}", ity(from)));
        }
        if from == DType::Bool {
            let one = immediate(one(to));
            let zero = immediate(Scalar::zero(to));
            return self.ins(format!("selp.{} {d}, {one}, {zero}, {a}", mty(to)));
        }
        match (from.is_float(), to.is_float()) {
            (true, true) => {
                let r = if to.size() < from.size() { ".rn" } else { "" };
                self.ins(format!("cvt{r}.{}.{} {d}, {a}", ity(to), ity(from)));
            }
            (false, true) => self.ins(format!("cvt.rn.{}.{} {d}, {a}", ity(to), ity(from))),
            (false, false) => {
                if from.size() == to.size() {
                    self.ins(format!("mov.{} {d}, {a}", mty(to)));
                } else if to.size() > from.size() {
                    // Widen by the source's signedness (sign or zero extension).
                    let s = if from.is_signed() { "s" } else { "u" };
                    self.ins(format!("cvt.{s}64.{s}32 {d}, {a}"));
                } else {
                    self.ins(format!("cvt.u32.u64 {d}, {a}"));
                }
            }
            (true, false) => {
                // NaN → 0 and saturation, explicitly: cvt's own rules for
                // NaN depend on the types.
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
                let f = ity(from);
                let m = mty(to);
                let (nan, big, small) =
                    (self.reg(Class::P), self.reg(Class::P), self.reg(Class::P));
                let c = self.temp(to);
                self.ins(format!("cvt.rzi.{}.{f} {c}, {a}", ity(to)));
                self.ins(format!(
                    "setp.ge.{f} {big}, {a}, {}",
                    immediate(Scalar::F64(hi).cast(from))
                ));
                self.ins(format!("selp.{m} {c}, {}, {c}, {big}", immediate(max)));
                self.ins(format!(
                    "setp.le.{f} {small}, {a}, {}",
                    immediate(Scalar::F64(lo).cast(from))
                ));
                self.ins(format!("selp.{m} {c}, {}, {c}, {small}", immediate(min)));
                self.ins(format!("setp.nan.{f} {nan}, {a}, {a}"));
                self.ins(format!("selp.{m} {d}, 0, {c}, {nan}"));
            }
        }
    }

    fn builtin(&mut self, d: &str, b: Builtin) {
        let wg = self.k.workgroup_size;
        match b {
            Builtin::LocalId => self.ins(format!("mov.u32 {d}, %tid.x")),
            Builtin::WorkgroupId => self.ins(format!("mov.u32 {d}, %ctaid.x")),
            Builtin::NumWorkgroups => self.ins(format!("mov.u32 {d}, %nctaid.x")),
            Builtin::GlobalId => {
                let (c, t) = (self.reg(Class::R), self.reg(Class::R));
                self.ins(format!("mov.u32 {c}, %ctaid.x"));
                self.ins(format!("mov.u32 {t}, %tid.x"));
                self.ins(format!("mad.lo.u32 {d}, {c}, {wg}, {t}"));
            }
            Builtin::SubgroupSize => self.ins(format!("mov.u32 {d}, {WARP_SIZE}")),
            Builtin::SubgroupLane => self.ins(format!("mov.u32 {d}, %laneid")),
            Builtin::SubgroupId => {
                let t = self.reg(Class::R);
                self.ins(format!("mov.u32 {t}, %tid.x"));
                self.ins(format!("shr.u32 {d}, {t}, 5"));
            }
            Builtin::NumSubgroups => self.ins(format!("mov.u32 {d}, {}", wg.div_ceil(WARP_SIZE))),
        }
    }

    /// Lanes of a warp that exist: all 32, or the whole workgroup when it
    /// is smaller than a warp.
    fn member_mask(&self) -> (u32, u32) {
        let lanes = self.k.workgroup_size.min(WARP_SIZE);
        let mask = if lanes == 32 {
            u32::MAX
        } else {
            (1u32 << lanes) - 1
        };
        (mask, lanes)
    }

    /// `shfl.sync.<mode>` of a register of any type; 64-bit values move as
    /// two halves, `bool`s as a word. Returns the predicate of `up`.
    fn shuffle(&mut self, t: DType, mode: &str, v: &str, b: u32, mask: u32) -> (String, String) {
        let c = if mode == "up" { 0 } else { 31 };
        let out = self.temp(t);
        let p = self.reg(Class::P);
        let mask = format!("0x{mask:08x}");
        match t.size().max(4) {
            _ if t == DType::Bool => {
                let (w, r) = (self.reg(Class::R), self.reg(Class::R));
                self.ins(format!("selp.u32 {w}, 1, 0, {v}"));
                self.ins(format!(
                    "shfl.sync.{mode}.b32 {r}|{p}, {w}, {b}, {c}, {mask}"
                ));
                self.ins(format!("setp.ne.u32 {out}, {r}, 0"));
            }
            4 => {
                let (w, r) = (self.reg(Class::R), self.reg(Class::R));
                self.ins(format!("mov.b32 {w}, {v}"));
                self.ins(format!(
                    "shfl.sync.{mode}.b32 {r}|{p}, {w}, {b}, {c}, {mask}"
                ));
                self.ins(format!("mov.b32 {out}, {r}"));
            }
            _ => {
                let (lo, hi) = (self.reg(Class::R), self.reg(Class::R));
                let (rlo, rhi) = (self.reg(Class::R), self.reg(Class::R));
                let p2 = self.reg(Class::P);
                self.ins(format!("mov.b64 {{{lo}, {hi}}}, {v}"));
                self.ins(format!(
                    "shfl.sync.{mode}.b32 {rlo}|{p}, {lo}, {b}, {c}, {mask}"
                ));
                self.ins(format!(
                    "shfl.sync.{mode}.b32 {rhi}|{p2}, {hi}, {b}, {c}, {mask}"
                ));
                self.ins(format!("mov.b64 {out}, {{{rlo}, {rhi}}}"));
            }
        }
        (out, p)
    }

    fn combine(&mut self, op: SubgroupOp, t: DType, d: &str, a: &str, b: &str) {
        let f = ity(t);
        match op {
            SubgroupOp::Add | SubgroupOp::InclusiveAdd if t.is_float() => {
                self.ins(format!("add.rn.{f} {d}, {a}, {b}"))
            }
            SubgroupOp::Add | SubgroupOp::InclusiveAdd => {
                self.ins(format!("add.{f} {d}, {a}, {b}"))
            }
            SubgroupOp::Min => self.ins(format!("min.{f} {d}, {a}, {b}")),
            SubgroupOp::Max => self.ins(format!("max.{f} {d}, {a}, {b}")),
            _ => unreachable!("not a combining subgroup op"),
        }
    }

    fn subgroup(&mut self, d: &str, op: SubgroupOp, t: DType, a: &str) {
        let (mask, lanes) = self.member_mask();
        let m = mty(t);
        match op {
            SubgroupOp::All | SubgroupOp::Any => {
                let n = if op == SubgroupOp::All { "all" } else { "any" };
                self.ins(format!("vote.sync.{n}.pred {d}, {a}, 0x{mask:08x}"));
            }
            SubgroupOp::BroadcastFirst => {
                let (v, _) = self.shuffle(t, "idx", a, 0, mask);
                self.ins(format!("mov.{m} {d}, {v}"));
            }
            SubgroupOp::Add | SubgroupOp::Min | SubgroupOp::Max => {
                // Butterfly: every lane ends with the whole warp's value.
                let acc = self.temp(t);
                self.ins(format!("mov.{m} {acc}, {a}"));
                let mut off = lanes / 2;
                while off > 0 {
                    let (other, _) = self.shuffle(t, "bfly", &acc, off, mask);
                    self.combine(op, t, &acc, &acc, &other);
                    off /= 2;
                }
                self.ins(format!("mov.{m} {d}, {acc}"));
            }
            SubgroupOp::InclusiveAdd => {
                // Hillis–Steele over lanes with shfl.up; lanes below the
                // offset keep their value (the predicate is false there).
                let acc = self.temp(t);
                self.ins(format!("mov.{m} {acc}, {a}"));
                let mut off = 1;
                while off < lanes {
                    let (other, p) = self.shuffle(t, "up", &acc, off, mask);
                    let sum = self.temp(t);
                    self.combine(op, t, &sum, &acc, &other);
                    self.ins(format!("selp.{m} {acc}, {sum}, {acc}, {p}"));
                    off *= 2;
                }
                self.ins(format!("mov.{m} {d}, {acc}"));
            }
        }
    }
}

/// The math helpers `k` calls.
/// The PTX name and type suffix of an atomic operation on `elem`.
fn atom_op(op: AtomicOp, elem: DType) -> (&'static str, &'static str) {
    match op {
        AtomicOp::Add => ("add", if elem.size() == 8 { "u64" } else { "u32" }),
        AtomicOp::Min => ("min", ity(elem)),
        AtomicOp::Max => ("max", ity(elem)),
        AtomicOp::Or => ("or", mty(elem)),
        AtomicOp::Exchange => ("exch", mty(elem)),
    }
}

#[cfg(test)]
pub(crate) fn helpers_of(k: &Kernel) -> BTreeSet<MathFn> {
    use crate::codegen::kernel::visit;
    let mut set = BTreeSet::new();
    visit(&k.body, &mut |s| {
        if let Stmt::Assign(_, op) = s {
            match op {
                Op::Unary(UnaryOp::Exp, _) => {
                    set.insert(MathFn::Exp);
                }
                Op::Unary(UnaryOp::Ln, _) => {
                    set.insert(MathFn::Ln);
                }
                Op::Unary(UnaryOp::Sin | UnaryOp::Cos, _) => {
                    set.insert(MathFn::SinCos);
                }
                Op::Binary(BinaryOp::Rem, a, _) if k.operand_ty(*a).is_float() => {
                    set.insert(MathFn::Fmod);
                }
                _ => {}
            }
        }
    });
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::kernel::{FieldId, KernelBuilder, UniformField};

    #[test]
    fn immediates_are_exact() {
        assert_eq!(immediate(Scalar::F32(1.0)), "0f3F800000");
        assert_eq!(immediate(Scalar::F64(f64::NAN)), "0d7FF8000000000000");
        assert_eq!(immediate(Scalar::I32(i32::MIN)), "-2147483648");
        assert_eq!(immediate(Scalar::U32(u32::MAX)), "0xffffffff");
        assert_eq!(immediate(Scalar::U64(u64::MAX)), "0xffffffffffffffff");
        assert_eq!(immediate(Scalar::Bool(true)), "1");
    }

    #[test]
    fn uniform_block_matches_the_plan_layout() {
        let mut b = KernelBuilder::new("k", 32);
        let fields = [DType::U32, DType::F64, DType::Bool, DType::I64, DType::F32];
        b.uniforms(
            fields
                .iter()
                .enumerate()
                .map(|(i, &ty)| UniformField {
                    name: format!("f{i}"),
                    ty,
                })
                .collect(),
        );
        for (i, &ty) in fields.iter().enumerate() {
            b.assign(ty, Op::Uniform(FieldId::new(i)));
        }
        let k = b.finish().unwrap();
        let (offs, size) = uniform_offsets(&k);
        assert_eq!(offs, vec![0, 8, 16, 24, 32]);
        assert_eq!(size, 48);
        let text = write_kernel(&k).unwrap();
        assert!(text.contains(".param .align 16 .b8 cq_uniforms[48]"));
        assert!(text.contains("ld.param.f64 %fd0, [cq_uniforms+8]"));
    }

    #[test]
    fn helpers_are_listed_once() {
        let mut b = KernelBuilder::new("k", 32);
        let x = b.assign(DType::F32, Op::Copy(Operand::Const(Scalar::F32(1.0))));
        b.assign(DType::F32, Op::Unary(UnaryOp::Sin, x.into()));
        b.assign(DType::F32, Op::Unary(UnaryOp::Cos, x.into()));
        let k = b.finish().unwrap();
        assert_eq!(helpers_of(&k).len(), 1);
        let text = write_kernel(&k).unwrap();
        assert_eq!(text.matches(".func").count(), 1);
    }
}
