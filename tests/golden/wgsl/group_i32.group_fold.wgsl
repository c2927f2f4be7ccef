// computeq kernel `group_fold`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(8) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read_write> out0: array<i32>;
@group(0) @binding(5) var<storage, read_write> out1: array<u64>;
@group(0) @binding(6) var<storage, read_write> out2: array<f32>;
@group(0) @binding(7) var<storage, read> count: array<u32>;
fn cq_div_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a / b;
}

@compute @workgroup_size(256)
fn group_fold(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: u32;
    var r5: u32;
    var r6: u32;
    var r7: u32;
    var r8: u32;
    var r9: bool;
    var r10: bool;
    var r11: bool;
    var r12: bool;
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
    var r23: u32;
    var r24: u32;
    var r25: bool;
    var r26: u32;
    var r27: u32;
    var r28: u32;
    var r29: u32;
    var r30: f32;
    var r31: u32;
    var r32: u32;
    var r33: u32;
    var r34: i32;
    var r35: u32;
    var r36: f32;
    var r37: f32;
    var r38: u32;
    var r39: u32;
    var r40: i32;
    var r41: u32;
    var r42: f32;
    var r43: u32;
    var r44: u64;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = count[0u];
    r8 = cq_div_u32(r0, 256u);
    r9 = (r7 > 0u);
    r10 = (r7 <= r8);
    r11 = (r9 & r10);
    r12 = !(r11);
    r13 = count[0u];
    r14 = (r2 - 1u);
    r15 = (r13 + r14);
    r16 = cq_div_u32(r15, r2);
    r17 = (r6 * r16);
    r18 = min(r17, r13);
    r19 = (r18 + r16);
    r20 = min(r19, r13);
    if (r12) {
        r21 = (r18 + r5);
        for (r22 = r21; r22 < r20; r22 = r22 + 256u) {
            r23 = starts[r22];
            r24 = (r22 + 1u);
            r25 = (r24 < r7);
            r26 = (r7 - 1u);
            r27 = min(r24, r26);
            r28 = starts[r27];
            r29 = select(r0, r28, r25);
            r30 = 0.0f;
            for (r31 = r23; r31 < r29; r31 = r31 + 1u) {
                r32 = rows[r31];
                r33 = (r32 + r3);
                r34 = in0[r33];
                r35 = (r32 + r4);
                r36 = in1[r35];
                r37 = (r30 + r36);
                r30 = r37;
            }
            r38 = rows[r23];
            r39 = (r38 + r3);
            r40 = in0[r39];
            r41 = (r38 + r4);
            r42 = in1[r41];
            out0[r22] = r40;
            r43 = (r29 - r23);
            r44 = u64(r43);
            out1[r22] = r44;
            out2[r22] = r30;
        }
    }
}
