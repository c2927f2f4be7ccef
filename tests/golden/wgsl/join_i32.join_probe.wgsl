// computeq kernel `join_probe`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
    build_len: u32,
    off2: u32,
    off3: u32,
}
@group(0) @binding(6) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read> words: array<u32>;
@group(0) @binding(3) var<storage, read_write> matches: array<u32>;
@group(0) @binding(4) var<storage, read_write> first: array<u32>;
@group(0) @binding(5) var<storage, read_write> totals: array<u64>;
var<workgroup> red0_0: array<u64, 256>;
fn cq_rem_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a % b;
}

@compute @workgroup_size(256)
fn join_probe(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: u32;
    var r5: u32;
    var r6: u32;
    var r7: u32;
    var r8: u32;
    var r9: u32;
    var r10: u32;
    var r11: u32;
    var r12: u64;
    var r13: u32;
    var r14: u32;
    var r15: u32;
    var r16: i32;
    var r17: u32;
    var r18: f32;
    var r19: u32;
    var r20: u32;
    var r21: u32;
    var r22: u32;
    var r23: u32;
    var r24: bool;
    var r25: u32;
    var r26: u32;
    var r27: u32;
    var r28: bool;
    var r29: u32;
    var r30: u32;
    var r31: u32;
    var r32: u32;
    var r33: u32;
    var r34: u32;
    var r35: u32;
    var r36: u32;
    var r37: u32;
    var r38: bool;
    var r39: u32;
    var r40: u32;
    var r41: u32;
    var r42: bool;
    var r43: u32;
    var r44: u32;
    var r45: u32;
    var r46: u32;
    var r47: u32;
    var r48: u32;
    var r49: u64;
    var r50: u64;
    var r51: bool;
    var r52: u32;
    var r53: u32;
    var r54: u32;
    var r55: u32;
    var r56: bool;
    var r57: u64;
    var r58: u32;
    var r59: u64;
    var r60: u64;
    var r61: u64;
    var r62: u64;
    var r63: u64;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = u.build_len;
    r8 = (r6 * r1);
    r9 = min(r8, r0);
    r10 = (r9 + r1);
    r11 = min(r10, r0);
    r12 = 0lu;
    r13 = (r9 + r5);
    for (r14 = r13; r14 < r11; r14 = r14 + 256u) {
        r15 = (r14 + r3);
        r16 = in0[r15];
        r17 = (r14 + r4);
        r18 = in1[r17];
        r19 = bitcast<u32>(r16);
        r20 = (r19 ^ 2147483648u);
        r21 = 0u;
        r22 = r7;
        for (r23 = 0u; r23 < 32u; r23 = r23 + 1u) {
            r24 = (r22 > 0u);
            if (r24) {
                r25 = (r22 >> (bitcast<u32>(1u) & 31u));
                r26 = (r21 + r25);
                r27 = words[r26];
                r28 = (r27 < r20);
                r29 = (r26 + 1u);
                r30 = (r22 - r25);
                r31 = (r30 - 1u);
                r32 = select(r21, r29, r28);
                r33 = select(r25, r31, r28);
                r21 = r32;
                r22 = r33;
            }
        }
        r34 = (r7 - r21);
        r35 = r21;
        r36 = r34;
        for (r37 = 0u; r37 < 32u; r37 = r37 + 1u) {
            r38 = (r36 > 0u);
            if (r38) {
                r39 = (r36 >> (bitcast<u32>(1u) & 31u));
                r40 = (r35 + r39);
                r41 = words[r40];
                r42 = (r41 <= r20);
                r43 = (r40 + 1u);
                r44 = (r36 - r39);
                r45 = (r44 - 1u);
                r46 = select(r35, r43, r42);
                r47 = select(r39, r45, r42);
                r35 = r46;
                r36 = r47;
            }
        }
        r48 = (r35 - r21);
        matches[r14] = r48;
        first[r14] = r21;
        r49 = u64(r48);
        r50 = (r12 + r49);
        r12 = r50;
    }
    r51 = (r5 == 0u);
    red0_0[r5] = r12;
    workgroupBarrier();
    r52 = 1u;
    for (r53 = 0u; r53 < 8u; r53 = r53 + 1u) {
        r54 = (r52 + r52);
        r55 = cq_rem_u32(r5, r54);
        r56 = (r55 == 0u);
        if (r56) {
            r57 = red0_0[r5];
            r58 = (r5 + r52);
            r59 = red0_0[r58];
            r60 = (r57 + r59);
            r61 = r60;
            red0_0[r5] = r61;
        }
        workgroupBarrier();
        r52 = r54;
    }
    if (r51) {
        r62 = red0_0[0u];
        r63 = r62;
        totals[r6] = r63;
    }
}
