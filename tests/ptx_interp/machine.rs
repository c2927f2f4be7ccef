//! Executes parsed PTX: a grid of blocks run one after the other, each a
//! set of warps of 32 lanes. Within a warp the lanes at the lowest
//! position (deepest call first, then lowest instruction index) execute
//! together, which reconverges structured branches and loops; `shfl.sync`
//! and `vote.sync` demand that every lane of their member mask be in that
//! group. `bar.sync` parks a thread until every thread of the block
//! arrives. Strict by design: out-of-bounds or misaligned accesses, reads
//! of shared words written by another thread since the last barrier (and
//! the other two orders of conflict), integer division by zero, a barrier
//! some threads can never reach and runaway loops are errors, as are reads
//! of shared words no thread of the block wrote (CUDA leaves shared memory
//! uninitialized, and the wgpu backend compiles the same kernels without
//! WGSL's zero-fill of workgroup memory).

use super::parse::{
    AtomOp, Base, Cmp, Imm, ImmForm, Instr, Module, Op, Operand, Rnd, ShflMode, Space, Special, Ty,
};
use std::collections::HashMap;

/// Global memory: allocations addressed as `(index + 1) << 40 | offset`.
#[derive(Default, Debug)]
pub struct Memory {
    pub buffers: Vec<Vec<u8>>,
    /// Byte ranges `(buffer, range)` that a started, unfinished download
    /// reads: writing into one is an error (see `device`).
    pub reading: Vec<(usize, std::ops::Range<usize>)>,
}

const ADDR_SHIFT: u32 = 40;
/// Constant-bank addresses: a tag no global address has.
const CONST_BASE: u64 = 0xC0 << 56;
const POISON: u8 = 0xCD;

impl Memory {
    pub fn alloc(&mut self, bytes: usize) -> u64 {
        self.buffers.push(vec![POISON; bytes]);
        (self.buffers.len() as u64) << ADDR_SHIFT
    }

    fn locate(&self, addr: u64, size: usize) -> Result<(usize, usize), String> {
        let idx = (addr >> ADDR_SHIFT) as usize;
        let off = (addr & ((1 << ADDR_SHIFT) - 1)) as usize;
        if idx == 0 || idx > self.buffers.len() {
            return Err(format!("global address {addr:#x} is in no buffer"));
        }
        let len = self.buffers[idx - 1].len();
        if off + size > len {
            return Err(format!(
                "global access of {size} bytes at offset {off} of a {len}-byte buffer"
            ));
        }
        if !off.is_multiple_of(size) {
            return Err(format!(
                "misaligned global access of {size} bytes at offset {off}"
            ));
        }
        Ok((idx - 1, off))
    }

    /// Fails when `range` of buffer `b` overlaps a download in flight.
    pub fn check_unread(&self, b: usize, range: std::ops::Range<usize>) -> Result<(), String> {
        match self
            .reading
            .iter()
            .find(|(rb, r)| *rb == b && r.start < range.end && range.start < r.end)
        {
            Some((_, r)) => Err(format!(
                "write of bytes {range:?} of buffer {b} while a download of bytes {r:?} \
                 from it is unfinished"
            )),
            None => Ok(()),
        }
    }

    pub fn read(&self, addr: u64, size: usize) -> Result<u64, String> {
        let (b, o) = self.locate(addr, size)?;
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&self.buffers[b][o..o + size]);
        Ok(u64::from_le_bytes(v))
    }

    pub fn write(&mut self, addr: u64, size: usize, value: u64) -> Result<(), String> {
        let (b, o) = self.locate(addr, size)?;
        self.check_unread(b, o..o + size)?;
        self.buffers[b][o..o + size].copy_from_slice(&value.to_le_bytes()[..size]);
        Ok(())
    }
}

/// Counters of one launch.
#[derive(Default, Debug, Clone, Copy)]
pub struct LaunchStats {
    pub lane_instructions: u64,
    pub barriers: u64,
    pub shuffles: u64,
}

/// Most lane-instructions one launch may execute before it is declared a
/// runaway.
pub const STEP_LIMIT: u64 = 400_000_000;

#[derive(Clone, Debug)]
struct Frame {
    func: usize,
    pc: usize,
    regs: Vec<u64>,
    params: HashMap<String, u64>,
    /// Caller's parameter receiving our return value.
    ret_to: Option<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Running,
    Barrier,
    Exited,
}

#[derive(Clone, Debug)]
struct Thread {
    frames: Vec<Frame>,
    state: State,
}

impl Thread {
    fn top(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("a frame")
    }
}

/// Shadow state of one shared word for the race detector.
#[derive(Copy, Clone, Default, Debug)]
struct Shadow {
    writer: u32,
    write_epoch: u32,
    reader: u32,
    read_epoch: u32,
    /// The epoch of the last atomic update (atomics of several threads
    /// between two barriers are not a race; a plain access among them is).
    atomic_epoch: u32,
    /// Some thread of the block wrote the word (plainly or atomically).
    written: bool,
}

const MANY: u32 = u32::MAX;

struct Block<'m> {
    module: &'m Module,
    ctaid: u32,
    nctaid: u32,
    ntid: u32,
    kernel_params: &'m [Vec<u8>],
    shared: Vec<u8>,
    shadow: Vec<Shadow>,
    epoch: u32,
}

fn err(ins: &Instr, m: impl std::fmt::Display) -> String {
    format!("`{}`: {m}", ins.text)
}

fn f32b(v: u64) -> f32 {
    f32::from_bits(v as u32)
}
fn f64b(v: u64) -> f64 {
    f64::from_bits(v)
}
fn bf32(v: f32) -> u64 {
    v.to_bits() as u64
}
fn bf64(v: f64) -> u64 {
    v.to_bits()
}

fn mask(t: Ty, v: u64) -> u64 {
    match t.bits() {
        1 => v & 1,
        32 => v & 0xffff_ffff,
        _ => v,
    }
}

fn sext(t: Ty, v: u64) -> i64 {
    if t.bits() == 32 {
        v as u32 as i32 as i64
    } else {
        v as i64
    }
}

/// The value of an immediate for an instruction of type `t`.
fn immediate(t: Ty, imm: &Imm) -> Result<u64, String> {
    let s = &imm.text;
    match imm.form {
        ImmForm::F32 => {
            if t != Ty::F32 && t != Ty::B32 {
                return Err(format!("f32 immediate {s} used as {t:?}"));
            }
            return imm.bits.clone();
        }
        ImmForm::F64 => {
            if t != Ty::F64 && t != Ty::B64 {
                return Err(format!("f64 immediate {s} used as {t:?}"));
            }
            return imm.bits.clone();
        }
        ImmForm::Int => {}
    }
    if t.is_float() {
        return Err(format!("integer immediate {s} used as {t:?}"));
    }
    let v = imm.bits.clone()?;
    if t.bits() == 32 {
        let fits = v <= u32::MAX as u64 || (v as i64) >= i32::MIN as i64;
        if !fits {
            return Err(format!("immediate {s} does not fit 32 bits"));
        }
    }
    Ok(mask(t, v))
}

/// Runs one launch of entry `entry` of `module`.
pub fn launch(
    module: &Module,
    entry: usize,
    grid: u32,
    block: u32,
    kernel_params: &[Vec<u8>],
    mem: &mut Memory,
) -> Result<LaunchStats, String> {
    let f = &module.functions[entry];
    if !f.is_entry {
        return Err(format!("{} is not an entry", f.name));
    }
    if let Some(n) = f.reqntid {
        if n != block {
            return Err(format!(
                "{} requires {n} threads per block, launched with {block}",
                f.name
            ));
        }
    }
    if kernel_params.len() != f.params.len() {
        return Err(format!(
            "{} takes {} parameters, given {}",
            f.name,
            f.params.len(),
            kernel_params.len()
        ));
    }
    for ((name, size), given) in f.params.iter().zip(kernel_params) {
        if *size != given.len() {
            return Err(format!(
                "parameter {name} has {size} bytes, given {}",
                given.len()
            ));
        }
    }
    if grid == 0 || block == 0 {
        return Err("empty launch".into());
    }
    let mut stats = LaunchStats::default();
    for ctaid in 0..grid {
        let mut b = Block {
            module,
            ctaid,
            nctaid: grid,
            ntid: block,
            kernel_params,
            shared: vec![POISON; f.shared_bytes as usize],
            shadow: vec![Shadow::default(); (f.shared_bytes as usize).div_ceil(4)],
            epoch: 1,
        };
        b.run(entry, mem, &mut stats)?;
    }
    Ok(stats)
}

impl<'m> Block<'m> {
    fn run(
        &mut self,
        entry: usize,
        mem: &mut Memory,
        stats: &mut LaunchStats,
    ) -> Result<(), String> {
        let f = &self.module.functions[entry];
        let mut threads: Vec<Thread> = (0..self.ntid)
            .map(|_| Thread {
                frames: vec![Frame {
                    func: entry,
                    pc: 0,
                    regs: vec![0xDEAD_BEEF_DEAD_BEEF; f.regs.len()],
                    params: HashMap::new(),
                    ret_to: None,
                }],
                state: State::Running,
            })
            .collect();
        let warps = self.ntid.div_ceil(32) as usize;
        loop {
            for w in 0..warps {
                let lo = w * 32;
                let hi = ((w + 1) * 32).min(threads.len());
                self.run_warp(&mut threads, lo, hi, mem, stats)?;
            }
            let waiting = threads.iter().filter(|t| t.state == State::Barrier).count();
            let exited = threads.iter().filter(|t| t.state == State::Exited).count();
            if exited == threads.len() {
                return Ok(());
            }
            if waiting == 0 {
                return Err("no thread can make progress".into());
            }
            if exited > 0 {
                return Err(format!(
                    "bar.sync reached by {waiting} threads while {exited} threads of the block have exited"
                ));
            }
            // Release the barrier.
            for t in threads.iter_mut() {
                t.state = State::Running;
                t.top().pc += 1;
            }
            self.epoch += 1;
            stats.barriers += 1;
        }
    }

    fn run_warp(
        &mut self,
        threads: &mut [Thread],
        lo: usize,
        hi: usize,
        mem: &mut Memory,
        stats: &mut LaunchStats,
    ) -> Result<(), String> {
        let warp_lanes = hi - lo;
        loop {
            // The group at the lowest position.
            let mut key: Option<(usize, usize, usize)> = None;
            for t in &threads[lo..hi] {
                if t.state != State::Running {
                    continue;
                }
                let fr = t.frames.last().unwrap();
                let k = (usize::MAX - t.frames.len(), fr.func, fr.pc);
                if key.is_none_or(|best| k < best) {
                    key = Some(k);
                }
            }
            let Some(key) = key else {
                return Ok(());
            };
            let (_, func, pc) = key;
            // Its lanes (bit `l`: thread `lo + l`), at most 32.
            let mut group = 0u32;
            for (l, t) in threads[lo..hi].iter().enumerate() {
                if t.state == State::Running {
                    let fr = t.frames.last().unwrap();
                    if (usize::MAX - t.frames.len(), fr.func, fr.pc) == key {
                        group |= 1 << l;
                    }
                }
            }
            let f = &self.module.functions[func];
            let ins = f
                .code
                .get(pc)
                .ok_or_else(|| format!("{}: ran past the end without ret", f.name))?;
            stats.lane_instructions += group.count_ones() as u64;
            if stats.lane_instructions > STEP_LIMIT {
                return Err(format!(
                    "runaway kernel: more than {STEP_LIMIT} lane-instructions"
                ));
            }
            // Guards: the lanes whose guard fails step past the instruction.
            let mut lanes = [0usize; 32];
            let mut n = 0;
            let mut amask = 0u32;
            for l in 0..warp_lanes {
                if group & (1 << l) == 0 {
                    continue;
                }
                let i = lo + l;
                let on = match ins.guard {
                    None => true,
                    Some((p, neg)) => (threads[i].frames.last().unwrap().regs[p] != 0) != neg,
                };
                if on {
                    lanes[n] = i;
                    n += 1;
                    amask |= 1 << l;
                } else {
                    threads[i].top().pc += 1;
                }
            }
            if n == 0 {
                continue;
            }
            let active = &lanes[..n];
            match ins.op {
                Op::Shfl(mode) => {
                    self.shfl(ins, mode, threads, lo, (active, amask), warp_lanes)?;
                    stats.shuffles += 1;
                }
                Op::Vote(all) => self.vote(ins, all, threads, lo, (active, amask), warp_lanes)?,
                Op::BarSync => {
                    if ins.guard.is_some() {
                        return Err(err(ins, "predicated barrier"));
                    }
                    for &i in active {
                        threads[i].state = State::Barrier;
                    }
                }
                _ => {
                    for &i in active {
                        self.step(ins, &mut threads[i], i as u32, mem)?;
                    }
                }
            }
        }
    }

    fn member_mask(&self, ins: &Instr, t: &Thread, arg: &Operand) -> Result<u32, String> {
        Ok(self.value(ins, t, arg, Ty::B32)? as u32)
    }

    /// Checks that every lane of `mask` is in `active` (its threads, and
    /// their lanes as a mask).
    fn check_converged(
        ins: &Instr,
        mask: u32,
        lo: usize,
        (active, amask): (&[usize], u32),
        lanes: usize,
    ) -> Result<(), String> {
        for l in 0..32 {
            if mask & (1 << l) != 0 {
                if l >= lanes {
                    return Err(err(
                        ins,
                        format!("member mask {mask:#x} names lane {l}, which does not exist"),
                    ));
                }
                if amask & (1 << l) == 0 {
                    return Err(err(
                        ins,
                        format!("lane {l} of member mask {mask:#x} is not converged here"),
                    ));
                }
            }
        }
        for &i in active {
            if mask & (1 << (i - lo)) == 0 {
                return Err(err(
                    ins,
                    format!("lane {} executes it outside its member mask", i - lo),
                ));
            }
        }
        Ok(())
    }

    fn shfl(
        &mut self,
        ins: &Instr,
        mode: ShflMode,
        threads: &mut [Thread],
        lo: usize,
        (active, amask): (&[usize], u32),
        lanes: usize,
    ) -> Result<(), String> {
        let [dst, a, b, c, m] = ins.args.as_slice() else {
            return Err(err(ins, "shfl takes five operands"));
        };
        let mask = self.member_mask(ins, &threads[active[0]], m)?;
        Self::check_converged(ins, mask, lo, (active, amask), lanes)?;
        let vals: Vec<u64> = (0..lanes)
            .map(|l| {
                if amask & (1 << l) != 0 {
                    self.value(ins, &threads[lo + l], a, Ty::B32)
                } else {
                    Ok(0)
                }
            })
            .collect::<Result<_, _>>()?;
        let mut results = Vec::new();
        for &i in active {
            let t = &threads[i];
            let lane = (i - lo) as u32;
            let bval = self.value(ins, t, b, Ty::B32)? as u32;
            let cval = self.value(ins, t, c, Ty::B32)? as u32;
            let clamp = cval & 0x1f;
            let seg = (cval >> 8) & 0x1f;
            if seg != 0 {
                return Err(err(ins, "segmented shuffles are not used"));
            }
            let (src, ok) = match mode {
                ShflMode::Up => {
                    let j = lane as i64 - bval as i64;
                    (j.max(0) as u32, j >= clamp as i64)
                }
                ShflMode::Bfly => {
                    let j = lane ^ bval;
                    (j, j <= clamp)
                }
                ShflMode::Idx => {
                    let j = bval & 0x1f;
                    (j, j <= clamp)
                }
            };
            let src = if ok { src } else { lane };
            if mask & (1 << src) == 0 || src as usize >= lanes {
                return Err(err(
                    ins,
                    format!("lane {lane} reads lane {src}, outside the member mask"),
                ));
            }
            results.push((i, vals[src as usize], ok));
        }
        for (i, v, ok) in results {
            let fr = threads[i].top();
            match dst {
                Operand::Reg(r) => fr.regs[*r] = v,
                Operand::RegPred(r, p) => {
                    fr.regs[*r] = v;
                    fr.regs[*p] = ok as u64;
                }
                _ => return Err(err(ins, "bad shfl destination")),
            }
            fr.pc += 1;
        }
        Ok(())
    }

    fn vote(
        &mut self,
        ins: &Instr,
        all: bool,
        threads: &mut [Thread],
        lo: usize,
        (active, amask): (&[usize], u32),
        lanes: usize,
    ) -> Result<(), String> {
        let [Operand::Reg(d), p, m] = ins.args.as_slice() else {
            return Err(err(ins, "vote takes three operands"));
        };
        let mask = self.member_mask(ins, &threads[active[0]], m)?;
        Self::check_converged(ins, mask, lo, (active, amask), lanes)?;
        let mut votes = Vec::new();
        for &i in active {
            votes.push(self.value(ins, &threads[i], p, Ty::Pred)? != 0);
        }
        let r = if all {
            votes.iter().all(|&v| v)
        } else {
            votes.iter().any(|&v| v)
        };
        for &i in active {
            let fr = threads[i].top();
            fr.regs[*d] = r as u64;
            fr.pc += 1;
        }
        Ok(())
    }

    /// The value of a source operand, as bits of type `t`.
    fn value(&self, ins: &Instr, t: &Thread, a: &Operand, ty: Ty) -> Result<u64, String> {
        let fr = t.frames.last().unwrap();
        Ok(match a {
            Operand::Reg(r) => mask(ty, fr.regs[*r]),
            Operand::Imm(s) => immediate(ty, s).map_err(|e| err(ins, e))?,
            Operand::Special(s) => {
                if ty.bits() != 32 {
                    return Err(err(ins, "special registers are 32-bit"));
                }
                match s {
                    Special::NtidX => self.ntid as u64,
                    Special::CtaidX => self.ctaid as u64,
                    Special::NctaidX => self.nctaid as u64,
                    Special::TidX | Special::LaneId => unreachable!("per-thread special"),
                }
            }
            Operand::Shared(off) => *off as u64,
            Operand::ConstSym(off) => CONST_BASE | *off as u64,
            _ => return Err(err(ins, "unexpected source operand form")),
        })
    }

    fn step(
        &mut self,
        ins: &Instr,
        t: &mut Thread,
        tid: u32,
        mem: &mut Memory,
    ) -> Result<(), String> {
        let a = &ins.args;
        // Per-thread specials are substituted here.
        let val = |me: &Self, t: &Thread, i: usize, ty: Ty| -> Result<u64, String> {
            match a.get(i) {
                Some(Operand::Special(Special::TidX)) => Ok(tid as u64),
                Some(Operand::Special(Special::LaneId)) => Ok((tid % 32) as u64),
                Some(o) => me.value(ins, t, o, ty),
                None => Err(err(ins, "missing operand")),
            }
        };
        let dst = |i: usize| -> Result<usize, String> {
            match a.get(i) {
                Some(Operand::Reg(r)) => Ok(*r),
                _ => Err(err(ins, "destination must be a register")),
            }
        };
        macro_rules! set {
            ($i:expr, $ty:expr, $v:expr) => {{
                let r = dst($i)?;
                let v = mask($ty, $v);
                t.top().regs[r] = v;
            }};
        }
        let mut next = true;
        match ins.op {
            Op::Mov(ty) => match (&a[0], &a[1]) {
                (Operand::Vector(v), _) => {
                    if ty != Ty::B64 || v.len() != 2 {
                        return Err(err(ins, "vector mov must be b64 of two halves"));
                    }
                    let x = val(self, t, 1, Ty::B64)?;
                    let fr = t.top();
                    fr.regs[v[0]] = x & 0xffff_ffff;
                    fr.regs[v[1]] = x >> 32;
                }
                (_, Operand::Vector(v)) => {
                    if ty != Ty::B64 || v.len() != 2 {
                        return Err(err(ins, "vector mov must be b64 of two halves"));
                    }
                    let fr = t.frames.last().unwrap();
                    let x = (fr.regs[v[0]] & 0xffff_ffff) | (fr.regs[v[1]] << 32);
                    set!(0, ty, x);
                }
                _ => {
                    let x = val(self, t, 1, ty)?;
                    set!(0, ty, x);
                }
            },
            Op::Ld(space, ty) => {
                let size = (ty.bits() / 8) as usize;
                let x = match (space, &a[1]) {
                    (Space::Param, Operand::Addr(Base::KernelParam(p), off)) => {
                        let bytes = &self.kernel_params[*p];
                        let o = *off as usize;
                        if o + size > bytes.len() || !o.is_multiple_of(size) {
                            return Err(err(ins, "parameter access out of bounds or misaligned"));
                        }
                        let mut v = [0u8; 8];
                        v[..size].copy_from_slice(&bytes[o..o + size]);
                        u64::from_le_bytes(v)
                    }
                    (Space::Param, Operand::Addr(Base::LocalParam(n), 0)) => {
                        *t.frames.last().unwrap().params.get(n).ok_or_else(|| {
                            err(ins, format!("parameter {n} read before it was written"))
                        })?
                    }
                    (Space::Global, Operand::Addr(Base::Reg(r), off)) => {
                        let addr = t.frames.last().unwrap().regs[*r].wrapping_add(*off as u64);
                        mem.read(addr, size).map_err(|e| err(ins, e))?
                    }
                    (Space::Shared, Operand::Addr(Base::Reg(r), off)) => {
                        let addr =
                            (t.frames.last().unwrap().regs[*r] as u32).wrapping_add(*off as u32);
                        self.shared_read(addr, size, tid).map_err(|e| err(ins, e))?
                    }
                    (Space::Const, Operand::Addr(Base::Reg(r), off)) => {
                        let addr = t.frames.last().unwrap().regs[*r].wrapping_add(*off as u64);
                        if addr & CONST_BASE != CONST_BASE {
                            return Err(err(
                                ins,
                                format!("{addr:#x} is not a constant-bank address"),
                            ));
                        }
                        let o = (addr & !CONST_BASE) as usize;
                        let bank = &self.module.consts;
                        if o + size > bank.len() || !o.is_multiple_of(size) {
                            return Err(err(ins, "constant access out of bounds or misaligned"));
                        }
                        let mut v = [0u8; 8];
                        v[..size].copy_from_slice(&bank[o..o + size]);
                        u64::from_le_bytes(v)
                    }
                    _ => return Err(err(ins, "unsupported load form")),
                };
                set!(0, ty, x);
            }
            Op::St(space, ty) => {
                let size = (ty.bits() / 8) as usize;
                let x = val(self, t, 1, ty)?;
                match (space, &a[0]) {
                    (Space::Param, Operand::Addr(Base::LocalParam(n), 0)) => {
                        t.top().params.insert(n.clone(), x);
                    }
                    (Space::Global, Operand::Addr(Base::Reg(r), off)) => {
                        let addr = t.frames.last().unwrap().regs[*r].wrapping_add(*off as u64);
                        mem.write(addr, size, x).map_err(|e| err(ins, e))?;
                    }
                    (Space::Shared, Operand::Addr(Base::Reg(r), off)) => {
                        let addr =
                            (t.frames.last().unwrap().regs[*r] as u32).wrapping_add(*off as u32);
                        self.shared_write(addr, size, x, tid)
                            .map_err(|e| err(ins, e))?;
                    }
                    _ => return Err(err(ins, "unsupported store form")),
                }
            }
            Op::CvtaToGlobal => {
                let x = val(self, t, 1, Ty::U64)?;
                if x >> ADDR_SHIFT == 0 {
                    return Err(err(ins, format!("{x:#x} is not a global address")));
                }
                set!(0, Ty::U64, x);
            }
            Op::Add(ty)
            | Op::Sub(ty)
            | Op::MulLo(ty)
            | Op::MulF(ty)
            | Op::DivF(ty)
            | Op::Min(ty)
            | Op::Max(ty)
            | Op::And(ty)
            | Op::Or(ty)
            | Op::Xor(ty)
            | Op::DivInt(ty)
            | Op::Rem(ty)
            | Op::Copysign(ty) => {
                let x = val(self, t, 1, ty)?;
                let y = val(self, t, 2, ty)?;
                let r = binary(ins, ty, x, y)?;
                set!(0, ty, r);
            }
            Op::Shl(ty) | Op::Shr(ty) => {
                let x = val(self, t, 1, ty)?;
                let s = val(self, t, 2, Ty::U32)? as u32;
                let bits = ty.bits();
                let r = if matches!(ins.op, Op::Shl(_)) {
                    if s >= bits {
                        0
                    } else {
                        x << s
                    }
                } else if ty.is_signed_int() {
                    let v = sext(ty, x);
                    (v >> s.min(bits - 1)) as u64
                } else if s >= bits {
                    0
                } else {
                    x >> s
                };
                set!(0, ty, r);
            }
            Op::MulHi(ty) => {
                let x = val(self, t, 1, ty)?;
                let y = val(self, t, 2, ty)?;
                set!(0, ty, ((x as u128 * y as u128) >> 64) as u64);
            }
            Op::MulWide(ty) => {
                let x = val(self, t, 1, ty)?;
                let y = val(self, t, 2, ty)?;
                let r = if ty == Ty::S32 {
                    (sext(ty, x) * sext(ty, y)) as u64
                } else {
                    x * y
                };
                set!(0, Ty::U64, r);
            }
            Op::MadLo(ty) => {
                let x = val(self, t, 1, ty)?;
                let y = val(self, t, 2, ty)?;
                let z = val(self, t, 3, ty)?;
                set!(0, ty, x.wrapping_mul(y).wrapping_add(z));
            }
            Op::Fma(ty) => {
                let (x, y, z) = (
                    val(self, t, 1, ty)?,
                    val(self, t, 2, ty)?,
                    val(self, t, 3, ty)?,
                );
                let r = if ty == Ty::F32 {
                    bf32(f32b(x).mul_add(f32b(y), f32b(z)))
                } else {
                    bf64(f64b(x).mul_add(f64b(y), f64b(z)))
                };
                set!(0, ty, r);
            }
            Op::Neg(ty) => {
                let x = val(self, t, 1, ty)?;
                let r = match ty {
                    Ty::F32 => x ^ 0x8000_0000,
                    Ty::F64 => x ^ (1 << 63),
                    _ => x.wrapping_neg(),
                };
                set!(0, ty, r);
            }
            Op::Abs(ty) => {
                let x = val(self, t, 1, ty)?;
                let r = if ty == Ty::F32 {
                    x & 0x7fff_ffff
                } else {
                    x & !(1 << 63)
                };
                set!(0, ty, r);
            }
            Op::Sqrt(ty) => {
                let x = val(self, t, 1, ty)?;
                let r = if ty == Ty::F32 {
                    bf32(f32b(x).sqrt())
                } else {
                    bf64(f64b(x).sqrt())
                };
                set!(0, ty, r);
            }
            Op::Not(ty) => {
                let x = val(self, t, 1, ty)?;
                set!(0, ty, !x);
            }
            Op::Setp(c, ty) => {
                let x = val(self, t, 1, ty)?;
                let y = val(self, t, 2, ty)?;
                let r = compare(c, ty, x, y);
                set!(0, Ty::Pred, r as u64);
            }
            Op::Selp(ty) => {
                let x = val(self, t, 1, ty)?;
                let y = val(self, t, 2, ty)?;
                let c = val(self, t, 3, Ty::Pred)?;
                set!(0, ty, if c != 0 { x } else { y });
            }
            Op::Cvt { rnd, dst, src } => {
                let x = val(self, t, 1, src)?;
                let r = convert(rnd, dst, src, x);
                set!(0, dst, r);
            }
            Op::Bra => {
                let Operand::Label(l) = a[0] else {
                    return Err(err(ins, "branch without a label"));
                };
                t.top().pc = l;
                next = false;
            }
            Op::Ret => {
                let fr = t.frames.pop().unwrap();
                if t.frames.is_empty() {
                    t.state = State::Exited;
                    t.frames.push(fr);
                    return Ok(());
                }
                let f = &self.module.functions[fr.func];
                let ret = f
                    .ret
                    .as_ref()
                    .ok_or_else(|| err(ins, "ret from a function without result"))?;
                let v = *fr
                    .params
                    .get(ret)
                    .ok_or_else(|| err(ins, "function returned without writing its result"))?;
                let to = fr.ret_to.clone().unwrap();
                let caller = t.top();
                caller.params.insert(to, v);
                caller.pc += 1;
                return Ok(());
            }
            Op::Call => {
                let Operand::Call(rets, callee, args) = &a[0] else {
                    return Err(err(ins, "bad call"));
                };
                let fi = self
                    .module
                    .function(callee)
                    .ok_or_else(|| err(ins, format!("no function {callee}")))?;
                let f = &self.module.functions[fi];
                if f.is_entry || rets.len() != 1 || args.len() != f.params.len() {
                    return Err(err(ins, "call signature mismatch"));
                }
                let caller = t.frames.last().unwrap();
                let mut params = HashMap::new();
                for ((name, _), arg) in f.params.iter().zip(args) {
                    let v = *caller
                        .params
                        .get(arg)
                        .ok_or_else(|| err(ins, format!("argument {arg} not written")))?;
                    params.insert(name.clone(), v);
                }
                t.frames.push(Frame {
                    func: fi,
                    pc: 0,
                    regs: vec![0xDEAD_BEEF_DEAD_BEEF; f.regs.len()],
                    params,
                    ret_to: Some(rets[0].clone()),
                });
                return Ok(());
            }
            Op::Atom(op, ty) => {
                let Operand::Addr(Base::Reg(r), off) = &a[1] else {
                    return Err(err(ins, "atomic needs a register address"));
                };
                let addr = t.frames.last().unwrap().regs[*r].wrapping_add(*off as u64);
                let size = (ty.bits() / 8) as usize;
                let old = mem.read(addr, size).map_err(|e| err(ins, e))?;
                let v = val(self, t, 2, ty)?;
                mem.write(addr, size, mask(ty, atom_apply(op, ty, old, v)))
                    .map_err(|e| err(ins, e))?;
                set!(0, ty, old);
            }
            Op::AtomShared(op, ty) => {
                let Operand::Addr(Base::Reg(r), off) = &a[1] else {
                    return Err(err(ins, "atomic needs a register address"));
                };
                let addr = (t.frames.last().unwrap().regs[*r] as u32).wrapping_add(*off as u32);
                let size = (ty.bits() / 8) as usize;
                let v = val(self, t, 2, ty)?;
                let old = self
                    .shared_atomic(addr, size, tid, |old| mask(ty, atom_apply(op, ty, old, v)))
                    .map_err(|e| err(ins, e))?;
                set!(0, ty, old);
            }
            Op::BarSync | Op::Shfl(_) | Op::Vote(_) => unreachable!("collectives run per warp"),
        }
        if next {
            t.top().pc += 1;
        }
        Ok(())
    }

    fn shared_check(&self, addr: u32, size: usize) -> Result<usize, String> {
        let a = addr as usize;
        if a + size > self.shared.len() {
            return Err(format!(
                "shared access of {size} bytes at {a} past the {}-byte window",
                self.shared.len()
            ));
        }
        if !a.is_multiple_of(size) {
            return Err(format!("misaligned shared access of {size} bytes at {a}"));
        }
        Ok(a)
    }

    fn shared_read(&mut self, addr: u32, size: usize, tid: u32) -> Result<u64, String> {
        let a = self.shared_check(addr, size)?;
        self.atomic_race(a, size, tid)?;
        let me = tid + 1;
        for w in a / 4..(a + size) / 4 {
            let s = &mut self.shadow[w];
            if !s.written {
                return Err(unwritten(tid, w));
            }
            if s.write_epoch == self.epoch && s.writer != me {
                return Err(format!(
                    "race: thread {tid} reads shared byte {} written by thread {} since the last barrier",
                    w * 4,
                    s.writer - 1
                ));
            }
            if s.read_epoch == self.epoch && s.reader != me {
                s.reader = MANY;
            } else {
                s.reader = me;
            }
            s.read_epoch = self.epoch;
        }
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&self.shared[a..a + size]);
        Ok(u64::from_le_bytes(v))
    }

    /// An atomic read-modify-write of a shared word: racing only with
    /// plain accesses of other threads since the last barrier.
    fn shared_atomic(
        &mut self,
        addr: u32,
        size: usize,
        tid: u32,
        f: impl FnOnce(u64) -> u64,
    ) -> Result<u64, String> {
        let a = self.shared_check(addr, size)?;
        let me = tid + 1;
        for w in a / 4..(a + size) / 4 {
            let s = &mut self.shadow[w];
            if !s.written {
                return Err(unwritten(tid, w));
            }
            let wrote = s.write_epoch == self.epoch && s.writer != me;
            let read = s.read_epoch == self.epoch && s.reader != me;
            if wrote || read {
                return Err(format!(
                    "race: thread {tid} updates shared byte {} atomically, another thread accessed it plainly since the last barrier",
                    w * 4
                ));
            }
            s.atomic_epoch = self.epoch;
        }
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&self.shared[a..a + size]);
        let old = u64::from_le_bytes(v);
        self.shared[a..a + size].copy_from_slice(&f(old).to_le_bytes()[..size]);
        Ok(old)
    }

    /// A plain access of a word updated atomically since the last barrier.
    fn atomic_race(&self, a: usize, size: usize, tid: u32) -> Result<(), String> {
        for w in a / 4..(a + size) / 4 {
            if self.shadow[w].atomic_epoch == self.epoch {
                return Err(format!(
                    "race: thread {tid} accesses shared byte {} plainly, updated atomically since the last barrier",
                    w * 4
                ));
            }
        }
        Ok(())
    }

    fn shared_write(&mut self, addr: u32, size: usize, value: u64, tid: u32) -> Result<(), String> {
        let a = self.shared_check(addr, size)?;
        self.atomic_race(a, size, tid)?;
        let me = tid + 1;
        for w in a / 4..(a + size) / 4 {
            let s = &mut self.shadow[w];
            if s.write_epoch == self.epoch && s.writer != me {
                return Err(format!(
                    "race: threads {} and {tid} write shared byte {} between two barriers",
                    s.writer - 1,
                    w * 4
                ));
            }
            if s.read_epoch == self.epoch && s.reader != me {
                return Err(format!(
                    "race: thread {tid} overwrites shared byte {} read by another thread since the last barrier",
                    w * 4
                ));
            }
            s.writer = me;
            s.write_epoch = self.epoch;
            s.written = true;
        }
        self.shared[a..a + size].copy_from_slice(&value.to_le_bytes()[..size]);
        Ok(())
    }
}

fn unwritten(tid: u32, word: usize) -> String {
    format!(
        "thread {tid} reads shared byte {} that no thread of its block wrote",
        word * 4
    )
}

/// The new value of an atomic `op` on `old` with operand `v`.
fn atom_apply(op: AtomOp, ty: Ty, old: u64, v: u64) -> u64 {
    match op {
        AtomOp::Add => old.wrapping_add(v),
        AtomOp::Or => old | v,
        AtomOp::Exch => v,
        AtomOp::Min | AtomOp::Max => {
            let less = if ty.is_signed_int() {
                sext(ty, v) < sext(ty, old)
            } else {
                v < old
            };
            if (op == AtomOp::Min) == less {
                v
            } else {
                old
            }
        }
    }
}

fn binary(ins: &Instr, ty: Ty, x: u64, y: u64) -> Result<u64, String> {
    if ty.is_float() {
        let f32op = |g: fn(f32, f32) -> f32| bf32(g(f32b(x), f32b(y)));
        let f64op = |g: fn(f64, f64) -> f64| bf64(g(f64b(x), f64b(y)));
        let pick = |a: fn(f32, f32) -> f32, b: fn(f64, f64) -> f64| {
            if ty == Ty::F32 {
                f32op(a)
            } else {
                f64op(b)
            }
        };
        return Ok(match ins.op {
            Op::Add(_) => pick(|a, b| a + b, |a, b| a + b),
            Op::Sub(_) => pick(|a, b| a - b, |a, b| a - b),
            Op::MulF(_) => pick(|a, b| a * b, |a, b| a * b),
            Op::DivF(_) => pick(|a, b| a / b, |a, b| a / b),
            // PTX: the non-NaN operand; both NaN → the canonical NaN.
            Op::Min(_) => pick(ptx_min32, ptx_min64),
            Op::Max(_) => pick(ptx_max32, ptx_max64),
            // copysign d, a, b: b with the sign of a.
            Op::Copysign(_) => {
                if ty == Ty::F32 {
                    (y & 0x7fff_ffff) | (x & 0x8000_0000)
                } else {
                    (y & !(1 << 63)) | (x & (1 << 63))
                }
            }
            _ => return Err(err(ins, "not a float operation")),
        });
    }
    let (sx, sy) = (sext(ty, x), sext(ty, y));
    let signed = ty.is_signed_int();
    Ok(match ins.op {
        Op::Add(_) => x.wrapping_add(y),
        Op::Sub(_) => x.wrapping_sub(y),
        Op::MulLo(_) => x.wrapping_mul(y),
        Op::And(_) => x & y,
        Op::Or(_) => x | y,
        Op::Xor(_) => x ^ y,
        Op::Min(_) => {
            if signed {
                if sx <= sy {
                    x
                } else {
                    y
                }
            } else if x <= y {
                x
            } else {
                y
            }
        }
        Op::Max(_) => {
            if signed {
                if sx >= sy {
                    x
                } else {
                    y
                }
            } else if x >= y {
                x
            } else {
                y
            }
        }
        Op::DivInt(_) | Op::Rem(_) => {
            if y == 0 {
                return Err(err(ins, "integer division by zero reached the hardware"));
            }
            let div = matches!(ins.op, Op::DivInt(_));
            if signed {
                let min = if ty.bits() == 32 {
                    i32::MIN as i64
                } else {
                    i64::MIN
                };
                if sx == min && sy == -1 {
                    return Err(err(ins, "MIN / -1 reached the hardware"));
                }
                (if div { sx / sy } else { sx % sy }) as u64
            } else if div {
                x / y
            } else {
                x % y
            }
        }
        _ => return Err(err(ins, "not an integer operation")),
    })
}

fn ptx_min32(a: f32, b: f32) -> f32 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f32::from_bits(0x7fff_ffff),
        (true, false) => b,
        (false, true) => a,
        _ => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}
fn ptx_max32(a: f32, b: f32) -> f32 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f32::from_bits(0x7fff_ffff),
        (true, false) => b,
        (false, true) => a,
        _ => {
            if b > a {
                b
            } else {
                a
            }
        }
    }
}
fn ptx_min64(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f64::from_bits(0x7fff_ffff_ffff_ffff),
        (true, false) => b,
        (false, true) => a,
        _ => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}
fn ptx_max64(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f64::from_bits(0x7fff_ffff_ffff_ffff),
        (true, false) => b,
        (false, true) => a,
        _ => {
            if b > a {
                b
            } else {
                a
            }
        }
    }
}

fn compare(c: Cmp, ty: Ty, x: u64, y: u64) -> bool {
    use std::cmp::Ordering as O;
    let ord: Option<O> = match ty {
        Ty::F32 => f32b(x).partial_cmp(&f32b(y)),
        Ty::F64 => f64b(x).partial_cmp(&f64b(y)),
        Ty::S32 | Ty::S64 => Some(sext(ty, x).cmp(&sext(ty, y))),
        _ => Some(x.cmp(&y)),
    };
    match (c, ord) {
        (Cmp::Nan, o) => o.is_none(),
        (Cmp::Equ, None) | (Cmp::Neu, None) => true,
        (_, None) => false,
        (Cmp::Eq | Cmp::Equ, Some(o)) => o == O::Equal,
        (Cmp::Ne | Cmp::Neu, Some(o)) => o != O::Equal,
        (Cmp::Lt, Some(o)) => o == O::Less,
        (Cmp::Le, Some(o)) => o != O::Greater,
        (Cmp::Gt, Some(o)) => o == O::Greater,
        (Cmp::Ge, Some(o)) => o != O::Less,
    }
}

fn round_float(rnd: Rnd, v: f64) -> f64 {
    match rnd {
        Rnd::Rzi => v.trunc(),
        Rnd::Rmi => v.floor(),
        Rnd::Rpi => v.ceil(),
        Rnd::Rni => v.round_ties_even(),
        Rnd::Rn => v,
    }
}

/// `cvt` with PTX's rules (float→int saturates; NaN gives 0 only for an
/// `f32` source and a 32-bit destination, else the sign-bit pattern).
fn convert(rnd: Option<Rnd>, dst: Ty, src: Ty, x: u64) -> u64 {
    if src.is_float() && dst.is_float() {
        return match (dst, src) {
            (Ty::F64, Ty::F32) => bf64(f32b(x) as f64),
            (Ty::F32, Ty::F64) => bf32(f64b(x) as f32),
            (Ty::F32, Ty::F32) => bf32(round_float(rnd.unwrap(), f32b(x) as f64) as f32),
            _ => bf64(round_float(rnd.unwrap(), f64b(x))),
        };
    }
    if src.is_float() {
        let v = if src == Ty::F32 {
            f32b(x) as f64
        } else {
            f64b(x)
        };
        if v.is_nan() {
            return if src == Ty::F32 && dst.bits() == 32 {
                0
            } else {
                1u64 << (dst.bits() - 1)
            };
        }
        let v = v.trunc();
        return match dst {
            Ty::S32 => v as i32 as u32 as u64,
            Ty::U32 => v as u32 as u64,
            Ty::S64 => v as i64 as u64,
            _ => v as u64,
        };
    }
    if dst.is_float() {
        let s = sext(src, x);
        return match (dst, src) {
            (Ty::F32, Ty::S32 | Ty::S64) => bf32(s as f32),
            (Ty::F32, _) => bf32(x as f32),
            (Ty::F64, Ty::S32 | Ty::S64) => bf64(s as f64),
            (_, _) => bf64(x as f64),
        };
    }
    match (dst, src) {
        (Ty::S64, Ty::S32) => sext(src, x) as u64,
        (Ty::U64, Ty::U32) => x & 0xffff_ffff,
        _ => x & 0xffff_ffff,
    }
}
