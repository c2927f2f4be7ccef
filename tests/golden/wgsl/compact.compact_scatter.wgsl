// computeq kernel `compact_scatter`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
    index0: u64,
}
@group(0) @binding(6) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<i32>;
@group(0) @binding(2) var<storage, read> totals: array<u32>;
@group(0) @binding(3) var<storage, read_write> out0: array<f32>;
@group(0) @binding(4) var<storage, read_write> out1: array<i32>;
@group(0) @binding(5) var<storage, read_write> out2: array<f32>;
var<workgroup> scan: array<u32, 256>;

@compute @workgroup_size(256)
fn compact_scatter(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: u32;
    var r5: u64;
    var r6: u32;
    var r7: u32;
    var r8: u32;
    var r9: u32;
    var r10: u32;
    var r11: u32;
    var r12: u32;
    var r13: u32;
    var r14: u32;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: u32;
    var r19: u32;
    var r20: u32;
    var r21: u32;
    var r22: u32;
    var r23: f32;
    var r24: u32;
    var r25: i32;
    var r26: u64;
    var r27: u64;
    var r28: f32;
    var r29: bool;
    var r30: u32;
    var r31: u32;
    var r32: u32;
    var r33: u32;
    var r34: bool;
    var r35: u32;
    var r36: u32;
    var r37: u32;
    var r38: u32;
    var r39: u32;
    var r40: u32;
    var r41: bool;
    var r42: u32;
    var r43: u32;
    var r44: u32;
    var r45: u32;
    var r46: u32;
    var r47: f32;
    var r48: u32;
    var r49: i32;
    var r50: u64;
    var r51: u64;
    var r52: f32;
    var r53: bool;
    var r54: u32;
    var r55: u32;
    var r56: u32;
    var r57: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = u.index0;
    r6 = lid.x;
    r7 = wid.x;
    r8 = (r7 * r1);
    r9 = min(r8, r0);
    r10 = (r9 + r1);
    r11 = min(r10, r0);
    r12 = totals[r7];
    r13 = r12;
    for (r14 = r9; r14 < r11; r14 = r14 + 1024u) {
        r15 = (r6 * 4u);
        r16 = (r14 + r15);
        r17 = min(r16, r11);
        r18 = (r17 + 4u);
        r19 = min(r18, r11);
        r20 = 0u;
        for (r21 = r17; r21 < r19; r21 = r21 + 1u) {
            r22 = (r21 + r3);
            r23 = in0[r22];
            r24 = (r21 + r4);
            r25 = in1[r24];
            r26 = u64(r21);
            r27 = (r26 + r5);
            r28 = f32(r27);
            r29 = (r23 > 0.0f);
            r30 = select(0u, 1u, r29);
            r31 = (r20 + r30);
            r20 = r31;
        }
        scan[r6] = r20;
        workgroupBarrier();
        r32 = 1u;
        for (r33 = 0u; r33 < 8u; r33 = r33 + 1u) {
            r34 = (r6 >= r32);
            r35 = 0u;
            if (r34) {
                r36 = (r6 - r32);
                r35 = scan[r36];
            }
            workgroupBarrier();
            if (r34) {
                r37 = scan[r6];
                r38 = (r35 + r37);
                scan[r6] = r38;
            }
            workgroupBarrier();
            r39 = (r32 + r32);
            r32 = r39;
        }
        r40 = 0u;
        r41 = (r6 > 0u);
        if (r41) {
            r42 = (r6 - 1u);
            r40 = scan[r42];
        }
        r43 = (r13 + r40);
        r44 = r43;
        for (r45 = r17; r45 < r19; r45 = r45 + 1u) {
            r46 = (r45 + r3);
            r47 = in0[r46];
            r48 = (r45 + r4);
            r49 = in1[r48];
            r50 = u64(r45);
            r51 = (r50 + r5);
            r52 = f32(r51);
            r53 = (r47 > 0.0f);
            r54 = select(0u, 1u, r53);
            r55 = (r44 + r54);
            if (r53) {
                out0[r44] = r52;
                out1[r44] = r49;
                out2[r44] = r47;
            }
            r44 = r55;
        }
        r56 = scan[255u];
        workgroupBarrier();
        r57 = (r13 + r56);
        r13 = r57;
    }
}
