//! Tests of the test-only PTX interpreter (`tests/ptx_interp`) on its own:
//! small hand-written PTX kernels whose answers are known independently of
//! the library's PTX writer, run through `ptx_interp::parse::parse` and
//! `ptx_interp::machine::launch`, with every result checked exactly.
//!
//! Covered: special registers (`%tid.x`, `%ntid.x`, `%ctaid.x`,
//! `%nctaid.x`, `%laneid`) and global stores over a grid of blocks; warp
//! shuffles (`shfl.sync.bfly` reduction, `.up` scan, `.idx` broadcast) and
//! votes (`vote.sync.any` / `.all`, full and partial member masks); shared
//! memory with `bar.sync`, and the race detector when the barrier is
//! missing; global atomics (`add`, `min`, `max`, `or`); predicated
//! execution, forward and backward branches, divergent loops that
//! reconverge, `selp`, and `setp` with signed, unsigned and float
//! comparisons including NaN (ordered and unordered); integer edges
//! (wrapping, `mul.lo` / `mul.hi` / `mul.wide`, signed `div` / `rem`,
//! shifts, `min`, `neg`), and `cvt` between floats and integers with its
//! rounding modes and saturation; strictness (unknown instructions,
//! registers of the wrong type, undefined labels, misaligned,
//! out-of-bounds and non-buffer accesses, kernel parameters of the wrong
//! number or size, a block size other than `.reqntid`, division by zero,
//! divergent shuffles, predicated barriers and barriers some threads can
//! never reach).
//!
//! Not covered, because the interpreter does not implement it (it runs
//! exactly the subset the library's PTX writer emits): `vote.sync.ballot`,
//! `shfl.sync.down`, `mul.hi` of 32-bit types, float-to-integer `cvt`
//! rounding modes other than `.rzi`, and 8/16-bit types. The runaway-loop
//! guard (`STEP_LIMIT`, 400 million lane-instructions) is not exercised:
//! a spinning kernel takes about 20 seconds to reach it in the test
//! profile, far more than this file's budget of a few seconds.

mod ptx_interp;

use ptx_interp::machine::{launch, LaunchStats, Memory};
use ptx_interp::parse::{parse, Module};

/// A PTX module: the usual header followed by `body`.
macro_rules! ptx {
    ($body:literal) => {
        concat!(".version 7.0\n.target sm_70\n.address_size 64\n", $body)
    };
}

// ------------------------------------------------------------------ helpers

/// A `.u64` kernel parameter (a buffer address), little-endian.
fn ptr(addr: u64) -> Vec<u8> {
    addr.to_le_bytes().to_vec()
}

/// A `.u32` kernel parameter, little-endian.
fn u32_param(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// Allocates a buffer holding `values` as little-endian `u32`s.
fn buffer_u32(mem: &mut Memory, values: &[u32]) -> u64 {
    let addr = mem.alloc(values.len() * 4);
    for (i, &v) in values.iter().enumerate() {
        mem.write(addr + 4 * i as u64, 4, u64::from(v)).unwrap();
    }
    addr
}

/// Allocates an uninitialised (poisoned) buffer of `n` 32-bit words.
fn words32(mem: &mut Memory, n: usize) -> u64 {
    mem.alloc(n * 4)
}

/// Allocates an uninitialised (poisoned) buffer of `n` 64-bit words.
fn words64(mem: &mut Memory, n: usize) -> u64 {
    mem.alloc(n * 8)
}

fn read_u32s(mem: &Memory, addr: u64, n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| mem.read(addr + 4 * i as u64, 4).unwrap() as u32)
        .collect()
}

fn read_i32s(mem: &Memory, addr: u64, n: usize) -> Vec<i32> {
    read_u32s(mem, addr, n)
        .into_iter()
        .map(|v| v as i32)
        .collect()
}

fn read_u64s(mem: &Memory, addr: u64, n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| mem.read(addr + 8 * i as u64, 8).unwrap())
        .collect()
}

fn module(src: &str) -> Module {
    parse(src).unwrap_or_else(|e| panic!("parse: {e}"))
}

/// Launches entry `entry` of `src` on `grid` blocks of `block` threads.
fn run(
    src: &str,
    entry: &str,
    grid: u32,
    block: u32,
    params: &[Vec<u8>],
    mem: &mut Memory,
) -> Result<LaunchStats, String> {
    let m = parse(src)?;
    let e = m.function(entry).ok_or(format!("no entry {entry}"))?;
    launch(&m, e, grid, block, params, mem)
}

// ------------------------------------------------------------------ 1. special registers

const GLOBAL_INDEX: &str = ptx!(
    r#"
.visible .entry global_index(
	.param .u64 out,
	.param .u64 aux
)
.reqntid 64, 1, 1
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [aux];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ntid.x;
	mov.u32 %r2, %ctaid.x;
	mad.lo.u32 %r3, %r2, %r1, %r0;
	mul.wide.u32 %rd2, %r3, 4;
	add.u64 %rd3, %rd0, %rd2;
	st.global.u32 [%rd3], %r3;
	// aux = nctaid * 1000 + laneid
	mov.u32 %r4, %nctaid.x;
	mov.u32 %r5, %laneid;
	mad.lo.u32 %r6, %r4, 1000, %r5;
	add.u64 %rd4, %rd1, %rd2;
	st.global.u32 [%rd4], %r6;
	ret;
}
"#
);

#[test]
fn special_registers_index_a_grid_of_blocks() {
    let (grid, block) = (3u32, 64u32);
    let n = (grid * block) as usize;
    let mut mem = Memory::default();
    let out = words32(&mut mem, n);
    let aux = words32(&mut mem, n);
    let stats = run(
        GLOBAL_INDEX,
        "global_index",
        grid,
        block,
        &[ptr(out), ptr(aux)],
        &mut mem,
    )
    .unwrap();
    let want: Vec<u32> = (0..n as u32).collect();
    assert_eq!(read_u32s(&mem, out, n), want);
    let want_aux: Vec<u32> = (0..n as u32).map(|g| grid * 1000 + g % 32).collect();
    assert_eq!(read_u32s(&mem, aux, n), want_aux);
    assert_eq!(stats.barriers, 0);
    assert_eq!(stats.shuffles, 0);
    // 17 instructions, every one executed by every thread.
    assert_eq!(stats.lane_instructions, 17 * n as u64);
}

// ------------------------------------------------------------------ 2. shuffles and votes

const WARP_SHUFFLES: &str = ptx!(
    r#"
.visible .entry warp_shuffles(
	.param .u64 inp,
	.param .u64 sums,
	.param .u64 scan,
	.param .u64 bcast
)
.reqntid 64, 1, 1
{
	.reg .pred %p<2>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<10>;
	ld.param.u64 %rd0, [inp];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [sums];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u64 %rd2, [scan];
	cvta.to.global.u64 %rd2, %rd2;
	ld.param.u64 %rd3, [bcast];
	cvta.to.global.u64 %rd3, %rd3;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ntid.x;
	mov.u32 %r2, %ctaid.x;
	mad.lo.u32 %r3, %r2, %r1, %r0;
	mul.wide.u32 %rd4, %r3, 4;
	add.u64 %rd5, %rd0, %rd4;
	ld.global.u32 %r4, [%rd5];
	// butterfly reduction: the warp sum in every lane
	shfl.sync.bfly.b32 %r5, %r4, 16, 31, 0xffffffff;
	add.u32 %r5, %r5, %r4;
	shfl.sync.bfly.b32 %r6, %r5, 8, 31, 0xffffffff;
	add.u32 %r5, %r5, %r6;
	shfl.sync.bfly.b32 %r6, %r5, 4, 31, 0xffffffff;
	add.u32 %r5, %r5, %r6;
	shfl.sync.bfly.b32 %r6, %r5, 2, 31, 0xffffffff;
	add.u32 %r5, %r5, %r6;
	shfl.sync.bfly.b32 %r6|%p1, %r5, 1, 31, 0xffffffff;
	add.u32 %r5, %r5, %r6;
	// lane 0 writes sums[global warp]
	mov.u32 %r7, %laneid;
	setp.ne.u32 %p0, %r7, 0;
	@%p0 bra $L_scan;
	shr.u32 %r8, %r3, 5;
	mul.wide.u32 %rd6, %r8, 4;
	add.u64 %rd6, %rd1, %rd6;
	st.global.u32 [%rd6], %r5;
$L_scan:
	// inclusive scan: lanes below the distance keep their value (p false)
	mov.u32 %r9, %r4;
	shfl.sync.up.b32 %r10|%p1, %r9, 1, 0, 0xffffffff;
	@%p1 add.u32 %r9, %r9, %r10;
	shfl.sync.up.b32 %r10|%p1, %r9, 2, 0, 0xffffffff;
	@%p1 add.u32 %r9, %r9, %r10;
	shfl.sync.up.b32 %r10|%p1, %r9, 4, 0, 0xffffffff;
	@%p1 add.u32 %r9, %r9, %r10;
	shfl.sync.up.b32 %r10|%p1, %r9, 8, 0, 0xffffffff;
	@%p1 add.u32 %r9, %r9, %r10;
	shfl.sync.up.b32 %r10|%p1, %r9, 16, 0, 0xffffffff;
	@%p1 add.u32 %r9, %r9, %r10;
	add.u64 %rd7, %rd2, %rd4;
	st.global.u32 [%rd7], %r9;
	// broadcast of lane 5
	shfl.sync.idx.b32 %r11, %r4, 5, 31, 0xffffffff;
	add.u64 %rd8, %rd3, %rd4;
	st.global.u32 [%rd8], %r11;
	ret;
}
"#
);

#[test]
fn warp_shuffles_reduce_scan_and_broadcast() {
    let (grid, block) = (2u32, 64u32);
    let n = (grid * block) as usize;
    let warps = n / 32;
    // Values that overflow a u32 when summed, to check wrapping adds.
    let input: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ (i << 3))
        .collect();
    let mut mem = Memory::default();
    let inp = buffer_u32(&mut mem, &input);
    let sums = words32(&mut mem, warps);
    let scan = words32(&mut mem, n);
    let bcast = words32(&mut mem, n);
    let stats = run(
        WARP_SHUFFLES,
        "warp_shuffles",
        grid,
        block,
        &[ptr(inp), ptr(sums), ptr(scan), ptr(bcast)],
        &mut mem,
    )
    .unwrap();
    let want_sums: Vec<u32> = input
        .chunks(32)
        .map(|w| w.iter().fold(0u32, |a, &v| a.wrapping_add(v)))
        .collect();
    assert_eq!(read_u32s(&mem, sums, warps), want_sums);
    let want_scan: Vec<u32> = input
        .chunks(32)
        .flat_map(|w| {
            w.iter().scan(0u32, |acc, &v| {
                *acc = acc.wrapping_add(v);
                Some(*acc)
            })
        })
        .collect();
    assert_eq!(read_u32s(&mem, scan, n), want_scan);
    let want_bcast: Vec<u32> = input.chunks(32).flat_map(|w| [w[5]; 32]).collect();
    assert_eq!(read_u32s(&mem, bcast, n), want_bcast);
    // 5 butterflies, 5 ups and 1 idx per warp.
    assert_eq!(stats.shuffles, 11 * warps as u64);
}

const WARP_VOTES: &str = ptx!(
    r#"
.visible .entry warp_votes(
	.param .u64 out
)
.reqntid 64, 1, 1
{
	.reg .pred %p<12>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %laneid;
	mov.u32 %r2, 0;
	setp.ge.u32 %p0, %r0, 40;
	setp.ge.u32 %p1, %r0, 32;
	setp.lt.u32 %p2, %r1, 3;
	setp.gt.u32 %p3, %r0, 1000;
	setp.lt.u32 %p4, %r0, 1000;
	vote.sync.any.pred %p5, %p0, 0xffffffff;
	selp.u32 %r3, 1, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.all.pred %p5, %p0, 0xffffffff;
	selp.u32 %r3, 2, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.any.pred %p5, %p1, 0xffffffff;
	selp.u32 %r3, 4, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.all.pred %p5, %p1, 0xffffffff;
	selp.u32 %r3, 8, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.any.pred %p5, %p2, 0xffffffff;
	selp.u32 %r3, 16, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.all.pred %p5, %p2, 0xffffffff;
	selp.u32 %r3, 32, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.any.pred %p5, %p3, 0xffffffff;
	selp.u32 %r3, 64, 0, %p5;
	or.b32 %r2, %r2, %r3;
	vote.sync.all.pred %p5, %p4, 0xffffffff;
	selp.u32 %r3, 128, 0, %p5;
	or.b32 %r2, %r2, %r3;
	// Only lanes 0..15 vote, with the member mask 0xffff, on lane == 15
	// (any) and lane < 3 (all).
	setp.lt.u32 %p6, %r1, 16;
	setp.eq.u32 %p7, %r1, 15;
	@%p6 vote.sync.any.pred %p8, %p7, 0xffff;
	@%p6 selp.u32 %r3, 256, 0, %p8;
	@%p6 or.b32 %r2, %r2, %r3;
	@%p6 vote.sync.all.pred %p8, %p2, 0xffff;
	@%p6 selp.u32 %r3, 512, 0, %p8;
	@%p6 or.b32 %r2, %r2, %r3;
	mul.wide.u32 %rd1, %r0, 4;
	add.u64 %rd2, %rd0, %rd1;
	st.global.u32 [%rd2], %r2;
	ret;
}
"#
);

#[test]
fn warp_votes_any_and_all() {
    let block = 64usize;
    let mut mem = Memory::default();
    let out = words32(&mut mem, block);
    run(
        WARP_VOTES,
        "warp_votes",
        1,
        block as u32,
        &[ptr(out)],
        &mut mem,
    )
    .unwrap();
    let preds: [fn(usize) -> bool; 5] = [
        |t| t >= 40,
        |t| t >= 32,
        |t| t % 32 < 3,
        |t| t > 1000,
        |t| t < 1000,
    ];
    let want: Vec<u32> = (0..block)
        .map(|t| {
            let warp = t / 32 * 32..t / 32 * 32 + 32;
            let any = |p: fn(usize) -> bool| warp.clone().any(p);
            let all = |p: fn(usize) -> bool| warp.clone().all(p);
            let mut w = u32::from(any(preds[0]))
                | u32::from(all(preds[0])) << 1
                | u32::from(any(preds[1])) << 2
                | u32::from(all(preds[1])) << 3
                | u32::from(any(preds[2])) << 4
                | u32::from(all(preds[2])) << 5
                | u32::from(any(preds[3])) << 6
                | u32::from(all(preds[4])) << 7;
            if t % 32 < 16 {
                // any(lane == 15) over lanes 0..15; all(lane < 3) over them.
                w |= 1 << 8;
            }
            w
        })
        .collect();
    assert_eq!(read_u32s(&mem, out, block), want);
    // Spelled out for the two warps.
    assert_eq!(want[0], 0x10 | 0x80 | 0x100);
    assert_eq!(want[63], 0x01 | 0x04 | 0x08 | 0x10 | 0x80);
}

// ------------------------------------------------------------------ 3. shared memory

const REVERSE: &str = ptx!(
    r#"
.visible .entry reverse(
	.param .u64 inp,
	.param .u64 out
)
.reqntid 64, 1, 1
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	.shared .align 4 .b8 sh[256];
	ld.param.u64 %rd0, [inp];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ntid.x;
	mov.u32 %r2, %ctaid.x;
	mad.lo.u32 %r3, %r2, %r1, %r0;
	mul.wide.u32 %rd2, %r3, 4;
	add.u64 %rd3, %rd0, %rd2;
	ld.global.u32 %r4, [%rd3];
	mov.u32 %r5, sh;
	mad.lo.u32 %r6, %r0, 4, %r5;
	st.shared.u32 [%r6], %r4;
	bar.sync 0;
	sub.u32 %r7, %r1, 1;
	sub.u32 %r7, %r7, %r0;
	mad.lo.u32 %r7, %r7, 4, %r5;
	ld.shared.u32 %r4, [%r7];
	add.u64 %rd4, %rd1, %rd2;
	st.global.u32 [%rd4], %r4;
	ret;
}
"#
);

#[test]
fn shared_memory_reversal_needs_its_barrier() {
    let (grid, block) = (3u32, 64u32);
    let n = (grid * block) as usize;
    let input: Vec<u32> = (0..n as u32).map(|i| i * 7 + 1).collect();
    let mut mem = Memory::default();
    let inp = buffer_u32(&mut mem, &input);
    let out = words32(&mut mem, n);
    let stats = run(
        REVERSE,
        "reverse",
        grid,
        block,
        &[ptr(inp), ptr(out)],
        &mut mem,
    )
    .unwrap();
    let want: Vec<u32> = input
        .chunks(block as usize)
        .flat_map(|b| b.iter().rev().copied())
        .collect();
    assert_eq!(read_u32s(&mem, out, n), want);
    // One barrier per block.
    assert_eq!(stats.barriers, u64::from(grid));

    // Without the barrier the first warp reads the second warp's words
    // before that warp wrote them; without the store, after the barrier,
    // every thread reads a word nobody wrote (CUDA's shared memory starts
    // uninitialized, and so does wgpu's without WGSL's zero-fill). With
    // the barrier, but each thread then writing its own word, a thread of
    // the other warp read that word since the barrier: a race.
    const UNWRITTEN: &str = "that no thread of its block wrote";
    for (broken, what, error) in [
        (
            REVERSE.replacen("bar.sync 0;", "", 1),
            "no barrier",
            UNWRITTEN,
        ),
        (
            REVERSE.replacen("st.shared.u32 [%r6], %r4;", "", 1),
            "no store",
            UNWRITTEN,
        ),
        (
            REVERSE.replacen(
                "ld.shared.u32 %r4, [%r7];",
                "ld.shared.u32 %r4, [%r7];\n\tst.shared.u32 [%r6], %r4;",
                1,
            ),
            "an overwrite",
            "race",
        ),
    ] {
        let mut mem = Memory::default();
        let inp = buffer_u32(&mut mem, &input);
        let out = words32(&mut mem, n);
        let e = run(
            &broken,
            "reverse",
            grid,
            block,
            &[ptr(inp), ptr(out)],
            &mut mem,
        )
        .unwrap_err();
        assert!(e.contains(error), "{what}: {e}");
    }
}

const SHARED_SLOT: &str = ptx!(
    r#"
.visible .entry shared_slot(
	.param .u64 out
)
.reqntid 32, 1, 1
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<2>;
	.shared .align 4 .b8 sh[4];
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, sh;
	st.shared.u32 [%r1], %r0;
	ret;
}
"#
);

#[test]
fn two_threads_writing_one_shared_word_race() {
    let mut mem = Memory::default();
    let out = words32(&mut mem, 1);
    let e = run(SHARED_SLOT, "shared_slot", 1, 32, &[ptr(out)], &mut mem).unwrap_err();
    assert!(e.contains("race"), "{e}");
    assert!(e.contains("threads 0 and 1 write"), "{e}");
}

// ------------------------------------------------------------------ 4. atomics

const ATOMICS: &str = ptx!(
    r#"
.visible .entry atomics(
	.param .u64 cells,
	.param .u64 olds
)
.reqntid 64, 1, 1
{
	.reg .b32 %r<10>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd0, [cells];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [olds];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ntid.x;
	mov.u32 %r2, %ctaid.x;
	mad.lo.u32 %r3, %r2, %r1, %r0;
	atom.global.add.u32 %r4, [%rd0], 1;
	mul.wide.u32 %rd2, %r3, 4;
	add.u64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r4;
	sub.s32 %r5, %r3, 100;
	atom.global.max.s32 %r6, [%rd0+4], %r5;
	atom.global.min.s32 %r6, [%rd0+8], %r5;
	and.b32 %r7, %r3, 31;
	shl.b32 %r8, 1, %r7;
	atom.global.or.b32 %r6, [%rd0+12], %r8;
	ret;
}
"#
);

#[test]
fn atomics_count_every_thread() {
    let (grid, block) = (4u32, 64u32);
    let n = (grid * block) as usize;
    let mut mem = Memory::default();
    let cells = buffer_u32(&mut mem, &[0, i32::MIN as u32, i32::MAX as u32, 0]);
    let olds = words32(&mut mem, n);
    run(
        ATOMICS,
        "atomics",
        grid,
        block,
        &[ptr(cells), ptr(olds)],
        &mut mem,
    )
    .unwrap();
    let c = read_u32s(&mem, cells, 4);
    assert_eq!(c[0], n as u32, "the counter");
    assert_eq!(c[1] as i32, n as i32 - 1 - 100, "the signed max");
    assert_eq!(c[2] as i32, -100, "the signed min");
    assert_eq!(c[3], u32::MAX, "the or");
    // The old values returned are a permutation of 0..n.
    let mut o = read_u32s(&mem, olds, n);
    o.sort_unstable();
    assert_eq!(o, (0..n as u32).collect::<Vec<_>>());
}

/// Shared-memory atomics: every thread adds 1 to bin `tid % 4` of a
/// workgroup array (cleared first), then thread `t < 4` writes bin `t` to
/// `out[ctaid * 4 + t]`; the barrier between the adds and the reads is
/// what `BARRIER` names (a plain read among the atomics is a race).
const SHARED_ATOMICS: &str = ptx!(
    r#"
.visible .entry shared_atomics(
	.param .u64 out
)
.reqntid 64, 1, 1
{
	.reg .pred %p<2>;
	.reg .b32 %r<10>;
	.reg .b64 %rd<4>;
	.shared .align 8 .b8 bins[16];
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, bins;
	setp.lt.u32 %p0, %r0, 4;
	mad.lo.u32 %r3, %r0, 4, %r2;
	@%p0 st.shared.u32 [%r3], 0;
	bar.sync 0;
	and.b32 %r4, %r0, 3;
	mad.lo.u32 %r5, %r4, 4, %r2;
	atom.shared.add.u32 %r6, [%r5], 1;
	BARRIER
	@!%p0 bra $L_done;
	ld.shared.u32 %r7, [%r3];
	mad.lo.u32 %r8, %r1, 4, %r0;
	mul.wide.u32 %rd1, %r8, 4;
	add.u64 %rd2, %rd0, %rd1;
	st.global.u32 [%rd2], %r7;
$L_done:
	ret;
}
"#
);

#[test]
fn shared_atomics_count_and_race_with_plain_accesses() {
    let grid = 3u32;
    let mut mem = Memory::default();
    let out = words32(&mut mem, 12);
    let src = SHARED_ATOMICS.replace("BARRIER", "bar.sync 0;");
    run(&src, "shared_atomics", grid, 64, &[ptr(out)], &mut mem).unwrap();
    assert_eq!(read_u32s(&mem, out, 12), vec![16; 12]);
    // Without the barrier the reads race with the other threads' adds.
    let mut mem = Memory::default();
    let out = words32(&mut mem, 12);
    let src = SHARED_ATOMICS.replace("BARRIER", "");
    let e = run(&src, "shared_atomics", grid, 64, &[ptr(out)], &mut mem).unwrap_err();
    assert!(e.contains("race"), "{e}");
}

// ------------------------------------------------------------------ 5. predicates and branches

const BRANCHES: &str = ptx!(
    r#"
.visible .entry branches(
	.param .u64 tri,
	.param .u64 bcast,
	.param .u64 parity
)
.reqntid 32, 1, 1
{
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd0, [tri];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [bcast];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u64 %rd2, [parity];
	cvta.to.global.u64 %rd2, %rd2;
	mov.u32 %r0, %tid.x;
	// a loop of tid iterations: acc = 0 + 1 + ... + (tid - 1)
	mov.u32 %r1, 0;
	mov.u32 %r2, 0;
$L_loop:
	setp.ge.u32 %p0, %r1, %r0;
	@%p0 bra $L_done;
	add.u32 %r2, %r2, %r1;
	add.u32 %r1, %r1, 1;
	bra $L_loop;
$L_done:
	mul.wide.u32 %rd3, %r0, 4;
	add.u64 %rd4, %rd0, %rd3;
	st.global.u32 [%rd4], %r2;
	// the warp has reconverged: a full-mask shuffle is legal
	shfl.sync.idx.b32 %r3, %r2, 31, 31, 0xffffffff;
	add.u64 %rd4, %rd1, %rd3;
	st.global.u32 [%rd4], %r3;
	// if (tid even) tid * 10 else -tid
	and.b32 %r4, %r0, 1;
	setp.eq.u32 %p1, %r4, 0;
	@!%p1 bra $L_odd;
	mul.lo.u32 %r5, %r0, 10;
	bra $L_join;
$L_odd:
	mov.u32 %r6, 0;
	sub.u32 %r5, %r6, %r0;
$L_join:
	add.u64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r5;
	ret;
}
"#
);

#[test]
fn branches_loops_and_reconvergence() {
    let block = 32usize;
    let mut mem = Memory::default();
    let tri = words32(&mut mem, block);
    let bcast = words32(&mut mem, block);
    let parity = words32(&mut mem, block);
    run(
        BRANCHES,
        "branches",
        1,
        block as u32,
        &[ptr(tri), ptr(bcast), ptr(parity)],
        &mut mem,
    )
    .unwrap();
    let want_tri: Vec<u32> = (0..block as u32)
        .map(|t| t * t.saturating_sub(1) / 2)
        .collect();
    assert_eq!(read_u32s(&mem, tri, block), want_tri);
    assert_eq!(read_u32s(&mem, bcast, block), vec![31 * 30 / 2; block]);
    let want_parity: Vec<i32> = (0..block as i32)
        .map(|t| if t % 2 == 0 { t * 10 } else { -t })
        .collect();
    assert_eq!(read_i32s(&mem, parity, block), want_parity);
}

const COMPARES: &str = ptx!(
    r#"
.visible .entry compares(
	.param .u64 a,
	.param .u64 b,
	.param .u64 out
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd0, [a];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [b];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u64 %rd2, [out];
	cvta.to.global.u64 %rd2, %rd2;
	mov.u32 %r0, %tid.x;
	mul.wide.u32 %rd3, %r0, 4;
	add.u64 %rd4, %rd0, %rd3;
	add.u64 %rd5, %rd1, %rd3;
	add.u64 %rd6, %rd2, %rd3;
	ld.global.u32 %r1, [%rd4];
	ld.global.u32 %r2, [%rd5];
	ld.global.f32 %f0, [%rd4];
	ld.global.f32 %f1, [%rd5];
	mov.u32 %r3, 0;
	setp.lt.s32 %p0, %r1, %r2;
	selp.u32 %r4, 1, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.lt.u32 %p0, %r1, %r2;
	selp.u32 %r4, 2, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.lt.f32 %p0, %f0, %f1;
	selp.u32 %r4, 4, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.ge.f32 %p0, %f0, %f1;
	selp.u32 %r4, 8, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.eq.f32 %p0, %f0, %f1;
	selp.u32 %r4, 16, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.ne.f32 %p0, %f0, %f1;
	selp.u32 %r4, 32, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.neu.f32 %p0, %f0, %f1;
	selp.u32 %r4, 64, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.equ.f32 %p0, %f0, %f1;
	selp.u32 %r4, 128, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.nan.f32 %p0, %f0, %f1;
	selp.u32 %r4, 256, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.le.s32 %p0, %r1, %r2;
	selp.u32 %r4, 512, 0, %p0;
	or.b32 %r3, %r3, %r4;
	setp.gt.u32 %p0, %r1, %r2;
	selp.u32 %r4, 1024, 0, %p0;
	or.b32 %r3, %r3, %r4;
	// a predicated store: only threads with a > b (as f32) write 0x800 more
	setp.gt.f32 %p1, %f0, %f1;
	@%p1 or.b32 %r3, %r3, 2048;
	st.global.u32 [%rd6], %r3;
	ret;
}
"#
);

/// What `COMPARES` computes for `(a, b)`, from PTX's definitions: ordered
/// float comparisons are false when either operand is NaN, the unordered
/// ones (`equ`, `neu`) true, and `nan` tests for a NaN operand.
fn compare_flags(a: u32, b: u32) -> u32 {
    let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
    let unordered = fa.is_nan() || fb.is_nan();
    [
        (a as i32) < (b as i32),
        a < b,
        fa < fb,
        fa >= fb,
        fa == fb,
        !unordered && fa != fb,
        unordered || fa != fb,
        unordered || fa == fb,
        unordered,
        (a as i32) <= (b as i32),
        a > b,
        fa > fb,
    ]
    .iter()
    .enumerate()
    .map(|(i, &f)| u32::from(f) << i)
    .sum()
}

#[test]
fn setp_and_selp_signed_unsigned_and_float_with_nan() {
    let nan = f32::NAN.to_bits();
    let one = 1.0f32.to_bits();
    let pairs: [(u32, u32); 12] = [
        (1, 2),
        (u32::MAX, 1),
        (nan, one),
        (one, nan),
        (nan, nan),
        ((-0.0f32).to_bits(), 0.0f32.to_bits()),
        (f32::INFINITY.to_bits(), one),
        (f32::NEG_INFINITY.to_bits(), (-1e38f32).to_bits()),
        (one, one),
        (2.0f32.to_bits(), one),
        (0x8000_0000, 0x7fff_ffff),
        (u32::MAX, u32::MAX),
    ];
    let (a, b): (Vec<u32>, Vec<u32>) = pairs.iter().copied().unzip();
    let n = pairs.len();
    let mut mem = Memory::default();
    let pa = buffer_u32(&mut mem, &a);
    let pb = buffer_u32(&mut mem, &b);
    let out = words32(&mut mem, n);
    run(
        COMPARES,
        "compares",
        1,
        n as u32,
        &[ptr(pa), ptr(pb), ptr(out)],
        &mut mem,
    )
    .unwrap();
    let got = read_u32s(&mem, out, n);
    let want: Vec<u32> = pairs.iter().map(|&(a, b)| compare_flags(a, b)).collect();
    assert_eq!(got, want);
    // Spelled out: NaN < 1.0 is false, and only neu, equ and nan hold.
    assert_eq!(got[2] & 0b1_1111_1100, 64 | 128 | 256);
    // -0.0 == 0.0 as floats, yet -0.0 < 0.0 as signed integers.
    assert_eq!(got[5] & (1 | 4 | 8 | 16), 1 | 8 | 16);
}

// ------------------------------------------------------------------ 6. integer and conversion edges

const EDGES: &str = ptx!(
    r#"
.visible .entry edges(
	.param .u64 o32,
	.param .u64 o64,
	.param .u32 big
)
{
	.reg .b32 %r<6>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd0, [o32];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [o64];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u32 %r0, [big];
	add.u32 %r1, %r0, 2;
	st.global.u32 [%rd0+0], %r1;
	mov.u32 %r2, 0;
	sub.u32 %r1, %r2, 1;
	st.global.u32 [%rd0+4], %r1;
	mov.u32 %r2, 65536;
	mul.lo.u32 %r1, %r2, 65537;
	st.global.u32 [%rd0+8], %r1;
	mov.s32 %r2, -7;
	div.s32 %r1, %r2, 2;
	st.global.u32 [%rd0+12], %r1;
	rem.s32 %r1, %r2, 2;
	st.global.u32 [%rd0+16], %r1;
	mov.s32 %r3, 7;
	rem.s32 %r1, %r3, -2;
	st.global.u32 [%rd0+20], %r1;
	div.u32 %r1, %r2, 2;
	st.global.u32 [%rd0+24], %r1;
	shr.s32 %r1, %r2, 1;
	st.global.u32 [%rd0+28], %r1;
	shr.u32 %r1, %r2, 1;
	st.global.u32 [%rd0+32], %r1;
	mov.u32 %r3, 1;
	shl.b32 %r1, %r3, 31;
	st.global.u32 [%rd0+36], %r1;
	shl.b32 %r1, %r0, 32;
	st.global.u32 [%rd0+40], %r1;
	min.s32 %r1, %r0, 1;
	st.global.u32 [%rd0+44], %r1;
	min.u32 %r1, %r0, 1;
	st.global.u32 [%rd0+48], %r1;
	mov.s32 %r3, -2147483648;
	neg.s32 %r1, %r3;
	st.global.u32 [%rd0+52], %r1;
	mov.f32 %f0, 0fC0300000;
	cvt.rzi.s32.f32 %r1, %f0;
	st.global.u32 [%rd0+56], %r1;
	mov.f32 %f0, 0f40300000;
	cvt.rzi.s32.f32 %r1, %f0;
	st.global.u32 [%rd0+60], %r1;
	mov.f32 %f0, 0f4F32D05E;
	cvt.rzi.s32.f32 %r1, %f0;
	st.global.u32 [%rd0+64], %r1;
	mov.f32 %f0, 0fBFC00000;
	cvt.rzi.u32.f32 %r1, %f0;
	st.global.u32 [%rd0+68], %r1;
	mov.f32 %f0, 0f7FC00000;
	cvt.rzi.s32.f32 %r1, %f0;
	st.global.u32 [%rd0+72], %r1;
	mov.s32 %r3, 16777217;
	cvt.rn.f32.s32 %f1, %r3;
	st.global.f32 [%rd0+76], %f1;
	cvt.rn.f32.u32 %f1, %r0;
	st.global.f32 [%rd0+80], %f1;
	mov.f32 %f0, 0f40200000;
	cvt.rni.f32.f32 %f1, %f0;
	st.global.f32 [%rd0+84], %f1;
	mov.f32 %f0, 0fBF000000;
	cvt.rni.f32.f32 %f1, %f0;
	st.global.f32 [%rd0+88], %f1;
	mov.f32 %f0, 0fBFC00000;
	cvt.rmi.f32.f32 %f1, %f0;
	st.global.f32 [%rd0+92], %f1;
	mov.f32 %f0, 0f3FA00000;
	cvt.rpi.f32.f32 %f1, %f0;
	st.global.f32 [%rd0+96], %f1;
	mov.u64 %rd2, 0x100000005;
	cvt.u32.u64 %r1, %rd2;
	st.global.u32 [%rd0+100], %r1;
	mul.wide.u32 %rd2, %r0, %r0;
	st.global.u64 [%rd1+0], %rd2;
	mov.s32 %r3, -2;
	mov.u32 %r4, 0x7fffffff;
	mul.wide.s32 %rd2, %r3, %r4;
	st.global.u64 [%rd1+8], %rd2;
	mov.u64 %rd3, 0xffffffffffffffff;
	mul.hi.u64 %rd2, %rd3, %rd3;
	st.global.u64 [%rd1+16], %rd2;
	mul.lo.u64 %rd2, %rd3, %rd3;
	st.global.u64 [%rd1+24], %rd2;
	cvt.s64.s32 %rd2, %r2;
	st.global.u64 [%rd1+32], %rd2;
	cvt.u64.u32 %rd2, %r0;
	st.global.u64 [%rd1+40], %rd2;
	add.u64 %rd2, %rd3, 1;
	st.global.u64 [%rd1+48], %rd2;
	ret;
}
"#
);

#[test]
fn integer_edges_and_conversions() {
    let mut mem = Memory::default();
    let o32 = words32(&mut mem, 26);
    let o64 = words64(&mut mem, 7);
    run(
        EDGES,
        "edges",
        1,
        1,
        &[ptr(o32), ptr(o64), u32_param(u32::MAX)],
        &mut mem,
    )
    .unwrap();
    let want32: [(u32, &str); 26] = [
        (1, "add.u32 0xffffffff + 2 wraps"),
        (u32::MAX, "sub.u32 0 - 1 wraps"),
        (0x0001_0000, "mul.lo.u32 keeps the low half"),
        (-3i32 as u32, "div.s32 -7 / 2 truncates"),
        (-1i32 as u32, "rem.s32 -7 % 2 has the dividend's sign"),
        (1, "rem.s32 7 % -2"),
        (0x7fff_fffc, "div.u32 0xfffffff9 / 2"),
        (-4i32 as u32, "shr.s32 -7 >> 1 is arithmetic"),
        (0x7fff_fffc, "shr.u32 0xfffffff9 >> 1 is logical"),
        (0x8000_0000, "shl.b32 1 << 31"),
        (0, "shl.b32 by 32 clamps to 0"),
        (u32::MAX, "min.s32 -1, 1"),
        (1, "min.u32 0xffffffff, 1"),
        (0x8000_0000, "neg.s32 i32::MIN wraps"),
        (-2i32 as u32, "cvt.rzi.s32.f32 -2.75"),
        (2, "cvt.rzi.s32.f32 2.75"),
        (i32::MAX as u32, "cvt.rzi.s32.f32 3e9 saturates"),
        (0, "cvt.rzi.u32.f32 -1.5 saturates"),
        (0, "cvt.rzi.s32.f32 NaN"),
        (
            16_777_216.0f32.to_bits(),
            "cvt.rn.f32.s32 16777217 ties to even",
        ),
        (4_294_967_296.0f32.to_bits(), "cvt.rn.f32.u32 0xffffffff"),
        (2.0f32.to_bits(), "cvt.rni.f32.f32 2.5 ties to even"),
        ((-0.0f32).to_bits(), "cvt.rni.f32.f32 -0.5 keeps the sign"),
        ((-2.0f32).to_bits(), "cvt.rmi.f32.f32 -1.5"),
        (2.0f32.to_bits(), "cvt.rpi.f32.f32 1.25"),
        (5, "cvt.u32.u64 truncates"),
    ];
    let got32 = read_u32s(&mem, o32, want32.len());
    for (i, ((want, what), got)) in want32.iter().zip(&got32).enumerate() {
        assert_eq!(got, want, "slot {i}: {what}: got {got:#x}, want {want:#x}");
    }
    let want64: [(u64, &str); 7] = [
        (0xffff_fffe_0000_0001, "mul.wide.u32 0xffffffff^2"),
        (-4_294_967_294i64 as u64, "mul.wide.s32 -2 * 0x7fffffff"),
        (0xffff_ffff_ffff_fffe, "mul.hi.u64 (2^64-1)^2"),
        (1, "mul.lo.u64 (2^64-1)^2"),
        (-7i64 as u64, "cvt.s64.s32 sign-extends"),
        (0xffff_ffff, "cvt.u64.u32 zero-extends"),
        (0, "add.u64 wraps"),
    ];
    let got64 = read_u64s(&mem, o64, want64.len());
    for (i, ((want, what), got)) in want64.iter().zip(&got64).enumerate() {
        assert_eq!(got, want, "slot {i}: {what}: got {got:#x}, want {want:#x}");
    }
}

// ------------------------------------------------------------------ 7. strictness

/// A kernel for the strictness tests: `//BODY` is replaced by the
/// instructions under test, ahead of a store of `tid` to `out[tid]`.
const STRICT: &str = ptx!(
    r#"
.visible .entry strict(
	.param .u64 out
)
.reqntid 32, 1, 1
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	mov.u32 %r0, %tid.x;
	mul.wide.u32 %rd1, %r0, 4;
	add.u64 %rd2, %rd0, %rd1;
	//BODY
	st.global.u32 [%rd2], %r0;
	ret;
}
"#
);

/// Runs `STRICT` with `body` on one block of 32 threads.
fn strict(body: &str) -> Result<Vec<u32>, String> {
    let src = STRICT.replacen("//BODY", body, 1);
    let mut mem = Memory::default();
    let out = words32(&mut mem, 32);
    run(&src, "strict", 1, 32, &[ptr(out)], &mut mem)?;
    Ok(read_u32s(&mem, out, 32))
}

#[track_caller]
fn assert_fails(body: &str, needle: &str) {
    match strict(body) {
        Ok(_) => panic!("`{body}` ran without error"),
        Err(e) => assert!(e.contains(needle), "`{body}`: {e:?} lacks {needle:?}"),
    }
}

#[test]
fn the_strictness_kernel_runs_unchanged() {
    assert_eq!(strict("").unwrap(), (0..32).collect::<Vec<u32>>());
}

#[test]
fn unknown_instructions_are_parse_errors() {
    for body in [
        "popc.b32 %r1, %r0;",
        "exit;",
        "add.rz.f32 %f0, %f1, %f1;",
        "mul.f32 %f0, %f1, %f1;",
        "ld.global.nc.u32 %r1, [%rd2];",
        "shfl.sync.down.b32 %r1, %r0, 1, 31, 0xffffffff;",
        "vote.sync.ballot.b32 %r1, %p0, 0xffffffff;",
        "cvt.rni.s32.f32 %r1, %f0;",
    ] {
        let src = STRICT.replacen("//BODY", body, 1);
        let e = parse(&src)
            .err()
            .unwrap_or_else(|| panic!("`{body}` parsed"));
        assert!(e.contains("unsupported"), "`{body}`: {e}");
    }
    let src = STRICT.replacen("//BODY", "bra $nowhere;", 1);
    let e = parse(&src).expect_err("an undefined label");
    assert!(e.contains("undefined label"), "{e}");
    let src = STRICT.replacen("//BODY", "add.u32 %r1, %r9, 1;", 1);
    let e = parse(&src).expect_err("an undeclared register");
    assert!(e.contains("undeclared register"), "{e}");
}

#[test]
fn registers_of_the_wrong_type_are_errors() {
    for body in [
        // a 64-bit register in a 32-bit add
        "add.u32 %r1, %rd0, 1;",
        // an f32 register in an integer add
        "add.u32 %r1, %f0, 1;",
        // a 32-bit register as an f64
        "add.rn.f64 %rd3, %r0, %r0;",
        // a predicate as a value
        "mov.u32 %r1, %p0;",
        // a 32-bit register as a global address
        "ld.global.u32 %r1, [%r0];",
    ] {
        let src = STRICT.replacen("//BODY", body, 1);
        let e = parse(&src)
            .err()
            .unwrap_or_else(|| panic!("`{body}` parsed"));
        assert!(e.contains("used as"), "`{body}`: {e}");
    }
    // A float immediate in an integer instruction fails when it runs.
    assert_fails("mov.u32 %r1, 0f3F800000;", "used as");
}

#[test]
fn bad_global_accesses_are_errors() {
    assert_fails("st.global.u32 [%rd2+2], %r0;", "misaligned");
    assert_fails("ld.global.u64 %rd3, [%rd2];", "misaligned");
    assert_fails(
        "st.global.u32 [%rd2+128], %r0;",
        "at offset 128 of a 128-byte",
    );
    assert_fails("ld.global.u32 %r1, [%rd2+4096];", "of a 128-byte buffer");
    // %rd1 = tid * 4 is not an address of any buffer.
    assert_fails("ld.global.u32 %r1, [%rd1];", "in no buffer");
    assert_fails("cvta.to.global.u64 %rd3, %rd1;", "not a global address");
    assert_fails("ld.param.u64 %rd3, [out+8];", "parameter access");
}

#[test]
fn bad_launches_are_errors() {
    let m = module(STRICT);
    let e = m.function("strict").unwrap();
    let mut mem = Memory::default();
    let out = words32(&mut mem, 64);
    let err = launch(&m, e, 1, 32, &[], &mut mem).unwrap_err();
    assert!(err.contains("takes 1 parameters, given 0"), "{err}");
    let err = launch(&m, e, 1, 32, &[ptr(out), ptr(out)], &mut mem).unwrap_err();
    assert!(err.contains("takes 1 parameters, given 2"), "{err}");
    let err = launch(&m, e, 1, 32, &[u32_param(7)], &mut mem).unwrap_err();
    assert!(err.contains("has 8 bytes, given 4"), "{err}");
    let err = launch(&m, e, 1, 64, &[ptr(out)], &mut mem).unwrap_err();
    assert!(
        err.contains("requires 32 threads per block, launched with 64"),
        "{err}"
    );
    let err = launch(&m, e, 0, 32, &[ptr(out)], &mut mem).unwrap_err();
    assert!(err.contains("empty launch"), "{err}");
    // Each of them failed before a thread ran: the buffer is untouched.
    assert!(mem.buffers[0].iter().all(|&b| b == 0xCD));
    launch(&m, e, 2, 32, &[ptr(out)], &mut mem).unwrap();
}

#[test]
fn runtime_faults_are_errors() {
    assert_fails("div.u32 %r1, %r0, 0;", "division by zero");
    assert_fails("rem.s32 %r1, %r0, 0;", "division by zero");
    assert_fails(
        "mov.s32 %r1, -2147483648;\n\tdiv.s32 %r1, %r1, -1;",
        "MIN / -1",
    );
    // Half the warp at a full-mask shuffle.
    assert_fails(
        "setp.lt.u32 %p0, %r0, 16;\n\t@%p0 shfl.sync.bfly.b32 %r1, %r0, 1, 31, 0xffffffff;",
        "not converged",
    );
    // A member mask that leaves out an executing lane.
    assert_fails(
        "vote.sync.any.pred %p1, %p0, 0xffff;",
        "outside its member mask",
    );
    assert_fails(
        "setp.lt.u32 %p0, %r0, 16;\n\t@%p0 bar.sync 0;",
        "predicated barrier",
    );
    // Half the block exits before a barrier the other half waits at.
    assert_fails(
        "setp.lt.u32 %p0, %r0, 16;\n\t@%p0 ret;\n\tbar.sync 0;",
        "bar.sync reached by 16 threads while 16 threads",
    );
}
