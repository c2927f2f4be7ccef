//! Parses the PTX subset the writer emits into resolved instructions:
//! registers become indices, labels become instruction positions, opcodes
//! become [`Op`] values. Anything outside the subset is an error.

use std::collections::HashMap;

/// A PTX type as instructions name it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Pred,
    B32,
    B64,
    U32,
    S32,
    U64,
    S64,
    F32,
    F64,
}

impl Ty {
    pub fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "pred" => Ty::Pred,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "u32" => Ty::U32,
            "s32" => Ty::S32,
            "u64" => Ty::U64,
            "s64" => Ty::S64,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            _ => return None,
        })
    }

    pub fn bits(self) -> u32 {
        match self {
            Ty::Pred => 1,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 => 32,
            _ => 64,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, Ty::S32 | Ty::S64)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            Ty::B32 | Ty::B64 | Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64
        )
    }

    /// Whether an instruction of type `self` may use a register declared
    /// `decl` (PTX's operand type-checking rules, restricted).
    fn accepts_register(self, decl: Ty) -> bool {
        if self == Ty::Pred || decl == Ty::Pred {
            return self == decl;
        }
        if self.bits() != decl.bits() {
            return false;
        }
        let bit = |t: Ty| matches!(t, Ty::B32 | Ty::B64);
        bit(self) || bit(decl) || (self.is_int() && decl.is_int()) || self == decl
    }
}

/// Rounding modifiers of `cvt` and float arithmetic.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rnd {
    Rn,
    Rzi,
    Rmi,
    Rpi,
    Rni,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Equ,
    Neu,
    Nan,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Param,
    Const,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ShflMode {
    Bfly,
    Up,
    Idx,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AtomOp {
    Add,
    Min,
    Max,
    Or,
    Exch,
}

/// A decoded opcode.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Mov(Ty),
    Ld(Space, Ty),
    St(Space, Ty),
    CvtaToGlobal,
    Add(Ty),
    Sub(Ty),
    MulLo(Ty),
    MulHi(Ty),
    MulWide(Ty),
    MulF(Ty),
    MadLo(Ty),
    Fma(Ty),
    DivInt(Ty),
    DivF(Ty),
    Rem(Ty),
    Min(Ty),
    Max(Ty),
    Neg(Ty),
    Abs(Ty),
    Sqrt(Ty),
    Not(Ty),
    And(Ty),
    Or(Ty),
    Xor(Ty),
    Shl(Ty),
    Shr(Ty),
    Setp(Cmp, Ty),
    Selp(Ty),
    Cvt {
        rnd: Option<Rnd>,
        dst: Ty,
        src: Ty,
    },
    Copysign(Ty),
    Bra,
    Ret,
    BarSync,
    Shfl(ShflMode),
    Vote(bool),
    Atom(AtomOp, Ty),
    /// An atomic on a shared-window address (32-bit register).
    AtomShared(AtomOp, Ty),
    Call,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Special {
    TidX,
    NtidX,
    CtaidX,
    NctaidX,
    LaneId,
}

/// Where an address operand points.
#[derive(Clone, Debug, PartialEq)]
pub enum Base {
    /// A register holding the address.
    Reg(usize),
    /// A kernel parameter, by index in the entry's parameter list.
    KernelParam(usize),
    /// A `.param` of the current function body or of its signature.
    LocalParam(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(usize),
    /// `d|p` of `shfl.sync`.
    RegPred(usize, usize),
    Imm(Imm),
    Special(Special),
    /// The shared-window address of a `.shared` array.
    Shared(u32),
    /// The constant-bank address of a module `.const` array.
    ConstSym(u32),
    Addr(Base, i64),
    Vector(Vec<usize>),
    Label(usize),
    /// `call`: return parameter names, callee, argument names.
    Call(Vec<String>, String, Vec<String>),
}

/// An immediate operand: its text, the form its prefix gives it and its
/// bits, parsed once (the machine checks them against the type of each
/// use, with the errors a parse at each use would give).
#[derive(Clone, Debug, PartialEq)]
pub struct Imm {
    pub text: String,
    pub form: ImmForm,
    pub bits: Result<u64, String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImmForm {
    /// `0f` and eight hex digits.
    F32,
    /// `0d` and sixteen hex digits.
    F64,
    /// Decimal, `-` decimal or `0x` hex.
    Int,
}

impl Imm {
    pub fn new(text: String) -> Imm {
        let (form, bits) = if let Some(h) = text.strip_prefix("0f") {
            let bits = u32::from_str_radix(h, 16)
                .map(|v| v as u64)
                .map_err(|e| e.to_string());
            (ImmForm::F32, bits)
        } else if let Some(h) = text.strip_prefix("0d") {
            (
                ImmForm::F64,
                u64::from_str_radix(h, 16).map_err(|e| e.to_string()),
            )
        } else if let Some(h) = text.strip_prefix("0x") {
            (
                ImmForm::Int,
                u64::from_str_radix(h, 16).map_err(|e| e.to_string()),
            )
        } else if let Some(d) = text.strip_prefix('-') {
            let bits = d
                .parse::<u64>()
                .map(|v| (v as i64).wrapping_neg() as u64)
                .map_err(|e| format!("{text}: {e}"));
            (ImmForm::Int, bits)
        } else {
            let bits = text.parse::<u64>().map_err(|e| format!("{text}: {e}"));
            (ImmForm::Int, bits)
        };
        Imm { text, form, bits }
    }
}

#[derive(Clone, Debug)]
pub struct Instr {
    pub guard: Option<(usize, bool)>,
    pub op: Op,
    pub args: Vec<Operand>,
    pub text: String,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub is_entry: bool,
    /// Entry: the kernel parameters (name, bytes). Func: input names.
    pub params: Vec<(String, usize)>,
    /// Func: the return parameter name.
    pub ret: Option<String>,
    pub reqntid: Option<u32>,
    /// Declared type of each register.
    pub regs: Vec<Ty>,
    pub shared_bytes: u32,
    pub code: Vec<Instr>,
}

#[derive(Clone, Debug)]
pub struct Module {
    pub functions: Vec<Function>,
    /// The constant bank: every module-scope `.const` array.
    pub consts: Vec<u8>,
}

impl Module {
    pub fn function(&self, name: &str) -> Option<usize> {
        self.functions.iter().position(|f| f.name == name)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Punct(char),
}

fn tokenize(src: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    for line in src.lines() {
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let mut chars = line.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if c.is_ascii_alphanumeric() || "_.$%".contains(c) {
                let mut w = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || "_.$%".contains(c) {
                        w.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Word(w));
            } else {
                out.push(Tok::Punct(c));
                chars.next();
            }
        }
    }
    out
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

type R<T> = Result<T, String>;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> R<Tok> {
        let t = self
            .toks
            .get(self.at)
            .cloned()
            .ok_or("unexpected end of module")?;
        self.at += 1;
        Ok(t)
    }

    fn word(&mut self) -> R<String> {
        match self.next()? {
            Tok::Word(w) => Ok(w),
            t => Err(format!("expected a word, found {t:?}")),
        }
    }

    fn expect(&mut self, c: char) -> R<()> {
        match self.next()? {
            Tok::Punct(p) if p == c => Ok(()),
            t => Err(format!("expected `{c}`, found {t:?}")),
        }
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_word(&mut self, w: &str) -> R<()> {
        let got = self.word()?;
        if got == w {
            Ok(())
        } else {
            Err(format!("expected `{w}`, found `{got}`"))
        }
    }
}

/// Parses a whole module.
pub fn parse(src: &str) -> R<Module> {
    let mut p = Parser {
        toks: tokenize(src),
        at: 0,
    };
    p.expect_word(".version")?;
    let v = p.word()?;
    if !["7.0", "7.8", "8.0", "8.3"].contains(&v.as_str()) {
        return Err(format!("unexpected .version {v}"));
    }
    p.expect_word(".target")?;
    let t = p.word()?;
    if !t.starts_with("sm_") {
        return Err(format!("unexpected .target {t}"));
    }
    p.expect_word(".address_size")?;
    p.expect_word("64")?;
    let mut functions = Vec::new();
    let mut consts = Vec::new();
    let mut syms = HashMap::new();
    while p.peek().is_some() {
        let w = p.word()?;
        let f = match w.as_str() {
            ".func" => parse_func(&mut p, &syms)?,
            ".visible" => {
                p.expect_word(".entry")?;
                parse_entry(&mut p, &syms)?
            }
            ".const" => {
                // .const .align 8 .b64 name[N] = {v, ...};
                p.expect_word(".align")?;
                let _ = p.word()?;
                p.expect_word(".b64")?;
                let name = p.word()?;
                p.expect('[')?;
                let n: usize = p.word()?.parse().map_err(|e| format!("const size: {e}"))?;
                p.expect(']')?;
                p.expect('=')?;
                p.expect('{')?;
                consts.resize(consts.len().next_multiple_of(8), 0);
                syms.insert(name, consts.len() as u32);
                for i in 0..n {
                    let v = p.word()?;
                    let v = match v.strip_prefix("0x") {
                        Some(h) => u64::from_str_radix(h, 16),
                        None => v.parse::<u64>(),
                    }
                    .map_err(|e| format!("const value: {e}"))?;
                    consts.extend_from_slice(&v.to_le_bytes());
                    if i + 1 < n {
                        p.expect(',')?;
                    }
                }
                p.expect('}')?;
                p.expect(';')?;
                continue;
            }
            other => return Err(format!("unexpected top-level `{other}`")),
        };
        functions.push(f);
    }
    Ok(Module { functions, consts })
}

/// `.param .f64 name` in a signature; returns (name, bytes).
fn parse_param(p: &mut Parser) -> R<(String, usize)> {
    p.expect_word(".param")?;
    let t = p.word()?;
    match t.as_str() {
        ".u64" | ".f64" | ".b64" => Ok((p.word()?, 8)),
        ".b32" | ".u32" | ".f32" => Ok((p.word()?, 4)),
        ".align" => {
            let _align = p.word()?;
            p.expect_word(".b8")?;
            let name = p.word()?;
            p.expect('[')?;
            let n: usize = p.word()?.parse().map_err(|e| format!("array size: {e}"))?;
            p.expect(']')?;
            Ok((name, n))
        }
        other => Err(format!("unexpected parameter type `{other}`")),
    }
}

fn parse_func(p: &mut Parser, syms: &HashMap<String, u32>) -> R<Function> {
    p.expect('(')?;
    let (ret, _) = parse_param(p)?;
    p.expect(')')?;
    let name = p.word()?;
    p.expect('(')?;
    let mut params = Vec::new();
    loop {
        params.push(parse_param(p)?);
        if !p.eat_punct(',') {
            break;
        }
    }
    p.expect(')')?;
    let mut f = Function {
        name,
        is_entry: false,
        params,
        ret: Some(ret),
        reqntid: None,
        regs: Vec::new(),
        shared_bytes: 0,
        code: Vec::new(),
    };
    parse_body(p, &mut f, syms)?;
    Ok(f)
}

fn parse_entry(p: &mut Parser, syms: &HashMap<String, u32>) -> R<Function> {
    let name = p.word()?;
    p.expect('(')?;
    let mut params = Vec::new();
    if !p.is_punct(')') {
        loop {
            params.push(parse_param(p)?);
            if !p.eat_punct(',') {
                break;
            }
        }
    }
    p.expect(')')?;
    let mut reqntid = None;
    if p.peek() == Some(&Tok::Word(".reqntid".into())) {
        p.next()?;
        let x: u32 = p.word()?.parse().map_err(|e| format!(".reqntid: {e}"))?;
        p.expect(',')?;
        p.expect_word("1")?;
        p.expect(',')?;
        p.expect_word("1")?;
        reqntid = Some(x);
    }
    let mut f = Function {
        name,
        is_entry: true,
        params,
        ret: None,
        reqntid,
        regs: Vec::new(),
        shared_bytes: 0,
        code: Vec::new(),
    };
    parse_body(p, &mut f, syms)?;
    Ok(f)
}

struct BodyCtx {
    consts: HashMap<String, u32>,
    regs: HashMap<String, usize>,
    shared: HashMap<String, u32>,
    local_params: Vec<String>,
    labels: HashMap<String, usize>,
    pending_labels: Vec<(usize, usize, String)>,
}

fn parse_body(p: &mut Parser, f: &mut Function, syms: &HashMap<String, u32>) -> R<()> {
    p.expect('{')?;
    let mut cx = BodyCtx {
        consts: syms.clone(),
        regs: HashMap::new(),
        shared: HashMap::new(),
        local_params: Vec::new(),
        labels: HashMap::new(),
        pending_labels: Vec::new(),
    };
    let mut depth = 1;
    while depth > 0 {
        if p.eat_punct('{') {
            depth += 1;
            continue;
        }
        if p.eat_punct('}') {
            depth -= 1;
            continue;
        }
        if p.is_punct('@') {
            let ins = parse_instr(p, f, &mut cx)?;
            f.code.push(ins);
            continue;
        }
        let w = p.word()?;
        match w.as_str() {
            ".reg" => {
                let t = p.word()?;
                let ty =
                    Ty::parse(t.trim_start_matches('.')).ok_or(format!("register type {t}"))?;
                let name = p.word()?;
                if p.eat_punct('<') {
                    let n: usize = p
                        .word()?
                        .parse()
                        .map_err(|e| format!("register count: {e}"))?;
                    p.expect('>')?;
                    for i in 0..n {
                        declare(&mut cx, f, format!("{name}{i}"), ty)?;
                    }
                } else {
                    declare(&mut cx, f, name, ty)?;
                }
                p.expect(';')?;
            }
            ".shared" => {
                p.expect_word(".align")?;
                let a: u32 = p.word()?.parse().map_err(|e| format!("align: {e}"))?;
                p.expect_word(".b8")?;
                let name = p.word()?;
                p.expect('[')?;
                let n: u32 = p.word()?.parse().map_err(|e| format!("shared size: {e}"))?;
                p.expect(']')?;
                p.expect(';')?;
                f.shared_bytes = f.shared_bytes.next_multiple_of(a);
                cx.shared.insert(name, f.shared_bytes);
                f.shared_bytes += n;
            }
            ".param" => {
                let _t = p.word()?;
                let name = p.word()?;
                p.expect(';')?;
                cx.local_params.push(name);
            }
            w if w.starts_with('$') && p.is_punct(':') => {
                p.next()?;
                if cx.labels.insert(w.to_string(), f.code.len()).is_some() {
                    return Err(format!("label {w} defined twice"));
                }
            }
            _ => {
                p.at -= 1;
                let ins = parse_instr(p, f, &mut cx)?;
                f.code.push(ins);
            }
        }
    }
    for (i, a, l) in std::mem::take(&mut cx.pending_labels) {
        let at = *cx.labels.get(&l).ok_or(format!("undefined label {l}"))?;
        f.code[i].args[a] = Operand::Label(at);
    }
    Ok(())
}

fn declare(cx: &mut BodyCtx, f: &mut Function, name: String, ty: Ty) -> R<()> {
    if cx.regs.insert(name.clone(), f.regs.len()).is_some() {
        return Err(format!("register {name} declared twice"));
    }
    f.regs.push(ty);
    Ok(())
}

fn decode(op: &str) -> R<Op> {
    let parts: Vec<&str> = op.split('.').collect();
    let ty = |s: &str| Ty::parse(s).ok_or(format!("unknown type .{s} in `{op}`"));
    let bad = || Err(format!("unsupported instruction `{op}`"));
    let t1 = |i: usize| -> R<Ty> { ty(parts.get(i).ok_or(format!("`{op}` lacks a type"))?) };
    let o = match parts.as_slice() {
        ["mov", t] => Op::Mov(ty(t)?),
        ["ld", sp, t] | ["st", sp, t] => {
            let space = match *sp {
                "global" => Space::Global,
                "shared" => Space::Shared,
                "param" => Space::Param,
                "const" => Space::Const,
                _ => return bad(),
            };
            if parts[0] == "ld" {
                Op::Ld(space, ty(t)?)
            } else {
                Op::St(space, ty(t)?)
            }
        }
        ["cvta", "to", "global", "u64"] => Op::CvtaToGlobal,
        ["add", "rn", t] if ty(t)?.is_float() => Op::Add(ty(t)?),
        ["add", t] if ty(t)?.is_int() => Op::Add(ty(t)?),
        ["sub", "rn", t] if ty(t)?.is_float() => Op::Sub(ty(t)?),
        ["sub", t] if ty(t)?.is_int() => Op::Sub(ty(t)?),
        ["mul", "lo", t] if ty(t)?.is_int() => Op::MulLo(ty(t)?),
        ["mul", "hi", "u64"] => Op::MulHi(Ty::U64),
        ["mul", "wide", t] if matches!(ty(t)?, Ty::U32 | Ty::S32) => Op::MulWide(ty(t)?),
        ["mul", "rn", t] if ty(t)?.is_float() => Op::MulF(ty(t)?),
        ["mad", "lo", t] if ty(t)?.is_int() => Op::MadLo(ty(t)?),
        ["fma", "rn", t] if ty(t)?.is_float() => Op::Fma(ty(t)?),
        ["div", "rn", t] if ty(t)?.is_float() => Op::DivF(ty(t)?),
        ["div", t] if ty(t)?.is_int() => Op::DivInt(ty(t)?),
        ["rem", t] if ty(t)?.is_int() => Op::Rem(ty(t)?),
        ["min", t] if ty(t)? != Ty::Pred => Op::Min(ty(t)?),
        ["max", t] if ty(t)? != Ty::Pred => Op::Max(ty(t)?),
        ["neg", t] if matches!(ty(t)?, Ty::S32 | Ty::S64 | Ty::F32 | Ty::F64) => Op::Neg(ty(t)?),
        ["abs", t] if ty(t)?.is_float() => Op::Abs(ty(t)?),
        ["sqrt", "rn", t] if ty(t)?.is_float() => Op::Sqrt(ty(t)?),
        ["not", t] => Op::Not(ty(t)?),
        ["and", t] => Op::And(ty(t)?),
        ["or", t] => Op::Or(ty(t)?),
        ["xor", t] => Op::Xor(ty(t)?),
        ["shl", t] if matches!(ty(t)?, Ty::B32 | Ty::B64) => Op::Shl(ty(t)?),
        ["shr", t] if ty(t)?.is_int() => Op::Shr(ty(t)?),
        ["setp", c, t] => {
            let t = ty(t)?;
            let c = match *c {
                "eq" => Cmp::Eq,
                "ne" => Cmp::Ne,
                "lt" => Cmp::Lt,
                "le" => Cmp::Le,
                "gt" => Cmp::Gt,
                "ge" => Cmp::Ge,
                "equ" if t.is_float() => Cmp::Equ,
                "neu" if t.is_float() => Cmp::Neu,
                "nan" if t.is_float() => Cmp::Nan,
                _ => return bad(),
            };
            if t == Ty::Pred {
                return bad();
            }
            Op::Setp(c, t)
        }
        ["selp", t] if ty(t)? != Ty::Pred => Op::Selp(ty(t)?),
        ["copysign", t] if ty(t)?.is_float() => Op::Copysign(ty(t)?),
        ["cvt", rest @ ..] => {
            let (rnd, types) = match rest {
                [r, d, s] => (
                    Some(match *r {
                        "rn" => Rnd::Rn,
                        "rzi" => Rnd::Rzi,
                        "rmi" => Rnd::Rmi,
                        "rpi" => Rnd::Rpi,
                        "rni" => Rnd::Rni,
                        _ => return bad(),
                    }),
                    (ty(d)?, ty(s)?),
                ),
                [d, s] => (None, (ty(d)?, ty(s)?)),
                _ => return bad(),
            };
            let (dst, src) = types;
            let ok = match (rnd, dst.is_float(), src.is_float()) {
                // float → float: exact widening, rounded narrowing, or
                // rounding to an integral value in the same type
                (None, true, true) => dst == Ty::F64 && src == Ty::F32,
                (Some(Rnd::Rn), true, true) => dst == Ty::F32 && src == Ty::F64,
                (Some(Rnd::Rzi | Rnd::Rmi | Rnd::Rpi | Rnd::Rni), true, true) => dst == src,
                (Some(Rnd::Rn), true, false) => {
                    matches!(src, Ty::S32 | Ty::U32 | Ty::S64 | Ty::U64)
                }
                (Some(Rnd::Rzi), false, true) => {
                    matches!(dst, Ty::S32 | Ty::U32 | Ty::S64 | Ty::U64)
                }
                (None, false, false) => matches!(
                    (dst, src),
                    (Ty::S64, Ty::S32) | (Ty::U64, Ty::U32) | (Ty::U32, Ty::U64)
                ),
                _ => false,
            };
            if !ok {
                return bad();
            }
            Op::Cvt { rnd, dst, src }
        }
        ["bra"] => Op::Bra,
        ["ret"] => Op::Ret,
        ["bar", "sync"] => Op::BarSync,
        ["call"] => Op::Call,
        ["shfl", "sync", m, "b32"] => Op::Shfl(match *m {
            "bfly" => ShflMode::Bfly,
            "up" => ShflMode::Up,
            "idx" => ShflMode::Idx,
            _ => return bad(),
        }),
        ["vote", "sync", m, "pred"] => Op::Vote(match *m {
            "all" => true,
            "any" => false,
            _ => return bad(),
        }),
        ["atom", space @ ("global" | "shared"), a, _] => {
            let t = t1(3)?;
            let a = match *a {
                "add" if matches!(t, Ty::U32 | Ty::U64 | Ty::S32) => AtomOp::Add,
                "min" if t.is_int() => AtomOp::Min,
                "max" if t.is_int() => AtomOp::Max,
                "or" if matches!(t, Ty::B32 | Ty::B64) => AtomOp::Or,
                "exch" if matches!(t, Ty::B32 | Ty::B64) => AtomOp::Exch,
                _ => return bad(),
            };
            if *space == "shared" {
                Op::AtomShared(a, t)
            } else {
                Op::Atom(a, t)
            }
        }
        _ => return bad(),
    };
    Ok(o)
}

fn parse_reg(cx: &BodyCtx, w: &str) -> R<usize> {
    cx.regs
        .get(w)
        .copied()
        .ok_or(format!("undeclared register {w}"))
}

fn parse_instr(p: &mut Parser, f: &Function, cx: &mut BodyCtx) -> R<Instr> {
    let start = p.at;
    let mut guard = None;
    if p.eat_punct('@') {
        let neg = p.eat_punct('!');
        let r = parse_reg(cx, &p.word()?)?;
        if f.regs[r] != Ty::Pred {
            return Err("guard is not a predicate".into());
        }
        guard = Some((r, neg));
    }
    let opname = p.word()?;
    let op = decode(&opname)?;
    let mut args = Vec::new();
    if op == Op::Call {
        // call (ret), name, (args)
        let list = |p: &mut Parser| -> R<Vec<String>> {
            p.expect('(')?;
            let mut v = Vec::new();
            if !p.is_punct(')') {
                loop {
                    v.push(p.word()?);
                    if !p.eat_punct(',') {
                        break;
                    }
                }
            }
            p.expect(')')?;
            Ok(v)
        };
        let rets = list(p)?;
        p.expect(',')?;
        let callee = p.word()?;
        p.expect(',')?;
        let a = list(p)?;
        p.expect(';')?;
        args.push(Operand::Call(rets, callee, a));
    } else if !p.is_punct(';') {
        loop {
            args.push(parse_operand(p, f, cx)?);
            if !p.eat_punct(',') {
                break;
            }
        }
        p.expect(';')?;
    } else {
        p.expect(';')?;
    }
    let text: Vec<String> = p.toks[start..p.at]
        .iter()
        .map(|t| match t {
            Tok::Word(w) => w.clone(),
            Tok::Punct(c) => c.to_string(),
        })
        .collect();
    let ins = Instr {
        guard,
        op,
        args,
        text: text.join(" "),
    };
    if op == Op::Bra {
        match ins.args.as_slice() {
            [Operand::Imm(l)] if l.text.starts_with('$') => {
                cx.pending_labels.push((f.code.len(), 0, l.text.clone()));
            }
            _ => return Err(format!("bad branch `{}`", ins.text)),
        }
    }
    check_types(f, &ins)?;
    Ok(ins)
}

fn parse_operand(p: &mut Parser, f: &Function, cx: &BodyCtx) -> R<Operand> {
    if p.eat_punct('[') {
        let w = p.word()?;
        let base = if w.starts_with('%') {
            Base::Reg(parse_reg(cx, &w)?)
        } else if let Some(i) = f
            .params
            .iter()
            .position(|(n, _)| *n == w)
            .filter(|_| f.is_entry)
        {
            Base::KernelParam(i)
        } else if cx.local_params.contains(&w)
            || f.params.iter().any(|(n, _)| *n == w)
            || f.ret.as_deref() == Some(w.as_str())
        {
            Base::LocalParam(w)
        } else {
            return Err(format!("unknown address base {w}"));
        };
        let mut off = 0i64;
        if p.eat_punct('+') {
            off = p
                .word()?
                .parse()
                .map_err(|e| format!("address offset: {e}"))?;
        }
        p.expect(']')?;
        return Ok(Operand::Addr(base, off));
    }
    if p.eat_punct('{') {
        let mut v = Vec::new();
        loop {
            v.push(parse_reg(cx, &p.word()?)?);
            if !p.eat_punct(',') {
                break;
            }
        }
        p.expect('}')?;
        return Ok(Operand::Vector(v));
    }
    if p.eat_punct('-') {
        let w = p.word()?;
        return Ok(Operand::Imm(Imm::new(format!("-{w}"))));
    }
    let w = p.word()?;
    if w.starts_with('%') {
        let special = match w.as_str() {
            "%tid.x" => Some(Special::TidX),
            "%ntid.x" => Some(Special::NtidX),
            "%ctaid.x" => Some(Special::CtaidX),
            "%nctaid.x" => Some(Special::NctaidX),
            "%laneid" => Some(Special::LaneId),
            _ => None,
        };
        if let Some(s) = special {
            return Ok(Operand::Special(s));
        }
        let r = parse_reg(cx, &w)?;
        if p.eat_punct('|') {
            let q = parse_reg(cx, &p.word()?)?;
            return Ok(Operand::RegPred(r, q));
        }
        return Ok(Operand::Reg(r));
    }
    if let Some(&off) = cx.shared.get(&w) {
        return Ok(Operand::Shared(off));
    }
    if let Some(&off) = cx.consts.get(&w) {
        return Ok(Operand::ConstSym(off));
    }
    Ok(Operand::Imm(Imm::new(w)))
}

/// Register operands must match the instruction's type.
fn check_types(f: &Function, ins: &Instr) -> R<()> {
    let need = |r: usize, t: Ty| -> R<()> {
        if t.accepts_register(f.regs[r]) {
            Ok(())
        } else {
            Err(format!(
                "register of type {:?} used as {t:?} in `{}`",
                f.regs[r], ins.text
            ))
        }
    };
    let reg_ty = |i: usize| -> Option<Ty> {
        match (&ins.op, i) {
            (Op::Mov(t), _) => Some(*t),
            (Op::Ld(_, t), 0) | (Op::St(_, t), 1) => Some(*t),
            (Op::Ld(..), _) | (Op::St(..), _) => Some(Ty::U64),
            (Op::CvtaToGlobal, _) => Some(Ty::U64),
            (Op::MulWide(_), 0) => Some(Ty::U64),
            (Op::Setp(..), 0) => Some(Ty::Pred),
            (Op::Setp(_, t), _) => Some(*t),
            (Op::Selp(_), 3) => Some(Ty::Pred),
            (Op::Shl(_) | Op::Shr(_), 2) => Some(Ty::U32),
            (Op::Cvt { dst, .. }, 0) => Some(*dst),
            (Op::Cvt { src, .. }, _) => Some(*src),
            (Op::Vote(_), _) => Some(Ty::Pred),
            (Op::Shfl(_), _) => Some(Ty::B32),
            (Op::Atom(_, t) | Op::AtomShared(_, t), 0 | 2) => Some(*t),
            (
                Op::Add(t)
                | Op::Sub(t)
                | Op::MulLo(t)
                | Op::MulHi(t)
                | Op::MulWide(t)
                | Op::MulF(t)
                | Op::MadLo(t)
                | Op::Fma(t)
                | Op::DivInt(t)
                | Op::DivF(t)
                | Op::Rem(t)
                | Op::Min(t)
                | Op::Max(t)
                | Op::Neg(t)
                | Op::Abs(t)
                | Op::Sqrt(t)
                | Op::Not(t)
                | Op::And(t)
                | Op::Or(t)
                | Op::Xor(t)
                | Op::Shl(t)
                | Op::Shr(t)
                | Op::Selp(t)
                | Op::Copysign(t),
                _,
            ) => Some(*t),
            _ => None,
        }
    };
    for (i, a) in ins.args.iter().enumerate() {
        match a {
            Operand::Reg(r) => {
                if let Some(t) = reg_ty(i) {
                    need(*r, t)?;
                }
            }
            Operand::RegPred(r, q) => {
                need(*r, Ty::B32)?;
                need(*q, Ty::Pred)?;
            }
            Operand::Addr(Base::Reg(r), _) => {
                let t = match ins.op {
                    Op::Ld(Space::Shared, _) | Op::St(Space::Shared, _) | Op::AtomShared(..) => {
                        Ty::U32
                    }
                    _ => Ty::U64,
                };
                need(*r, t)?;
            }
            Operand::Vector(v) => {
                for r in v {
                    need(*r, Ty::B32)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}
