// computeq kernel `join_emit`
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
@group(0) @binding(10) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read> build1: array<u32>;
@group(0) @binding(3) var<storage, read> matches: array<u32>;
@group(0) @binding(4) var<storage, read> first: array<u32>;
@group(0) @binding(5) var<storage, read> rows: array<u32>;
@group(0) @binding(6) var<storage, read> totals: array<u64>;
@group(0) @binding(7) var<storage, read_write> out0: array<i32>;
@group(0) @binding(8) var<storage, read_write> out1: array<f32>;
@group(0) @binding(9) var<storage, read_write> out2: array<u32>;
var<workgroup> scan: array<u64, 256>;

@compute @workgroup_size(256)
fn join_emit(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r13: u64;
    var r14: u32;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: u32;
    var r19: u32;
    var r20: u64;
    var r21: u32;
    var r22: u32;
    var r23: u64;
    var r24: u64;
    var r25: u32;
    var r26: u32;
    var r27: bool;
    var r28: u64;
    var r29: u32;
    var r30: u64;
    var r31: u64;
    var r32: u32;
    var r33: u64;
    var r34: bool;
    var r35: u32;
    var r36: u64;
    var r37: u64;
    var r38: u32;
    var r39: u32;
    var r40: bool;
    var r41: u32;
    var r42: i32;
    var r43: u32;
    var r44: f32;
    var r45: u32;
    var r46: u32;
    var r47: u32;
    var r48: u32;
    var r49: u32;
    var r50: u32;
    var r51: u32;
    var r52: u32;
    var r53: u64;
    var r54: u64;
    var r55: u64;
    var r56: u64;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = u.off3;
    r8 = (r6 * r1);
    r9 = min(r8, r0);
    r10 = (r9 + r1);
    r11 = min(r10, r0);
    r12 = totals[r6];
    r13 = r12;
    for (r14 = r9; r14 < r11; r14 = r14 + 1024u) {
        r15 = (r5 * 4u);
        r16 = (r14 + r15);
        r17 = min(r16, r11);
        r18 = (r17 + 4u);
        r19 = min(r18, r11);
        r20 = 0lu;
        for (r21 = r17; r21 < r19; r21 = r21 + 1u) {
            r22 = matches[r21];
            r23 = u64(r22);
            r24 = (r20 + r23);
            r20 = r24;
        }
        scan[r5] = r20;
        workgroupBarrier();
        r25 = 1u;
        for (r26 = 0u; r26 < 8u; r26 = r26 + 1u) {
            r27 = (r5 >= r25);
            r28 = 0lu;
            if (r27) {
                r29 = (r5 - r25);
                r28 = scan[r29];
            }
            workgroupBarrier();
            if (r27) {
                r30 = scan[r5];
                r31 = (r28 + r30);
                scan[r5] = r31;
            }
            workgroupBarrier();
            r32 = (r25 + r25);
            r25 = r32;
        }
        r33 = 0lu;
        r34 = (r5 > 0u);
        if (r34) {
            r35 = (r5 - 1u);
            r33 = scan[r35];
        }
        r36 = (r13 + r33);
        r37 = r36;
        for (r38 = r17; r38 < r19; r38 = r38 + 1u) {
            r39 = matches[r38];
            r40 = (r39 > 0u);
            if (r40) {
                r41 = (r38 + r3);
                r42 = in0[r41];
                r43 = (r38 + r4);
                r44 = in1[r43];
                r45 = u32(r37);
                r46 = first[r38];
                for (r47 = 0u; r47 < r39; r47 = r47 + 1u) {
                    r48 = (r45 + r47);
                    out0[r48] = r42;
                    out1[r48] = r44;
                    r49 = (r46 + r47);
                    r50 = rows[r49];
                    r51 = (r50 + r7);
                    r52 = build1[r51];
                    out2[r48] = r52;
                }
            }
            r53 = u64(r39);
            r54 = (r37 + r53);
            r37 = r54;
        }
        r55 = scan[255u];
        workgroupBarrier();
        r56 = (r13 + r55);
        r13 = r56;
    }
}
