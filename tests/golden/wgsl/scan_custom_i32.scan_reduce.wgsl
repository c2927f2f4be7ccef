// computeq kernel `scan_reduce`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    p0: i32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read_write> part0_0: array<i32>;
var<workgroup> red0_0: array<i32, 256>;
fn cq_div_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a / b;
}
fn cq_rem_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a % b;
}

@compute @workgroup_size(256)
fn scan_reduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: i32;
    var r5: u32;
    var r6: u32;
    var r7: i32;
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
    var r22: i32;
    var r23: bool;
    var r24: i32;
    var r25: bool;
    var r26: u32;
    var r27: u32;
    var r28: u32;
    var r29: u32;
    var r30: bool;
    var r31: i32;
    var r32: u32;
    var r33: i32;
    var r34: bool;
    var r35: i32;
    var r36: i32;
    var r37: i32;
    var r38: i32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.p0;
    r5 = lid.x;
    r6 = wid.x;
    r7 = r4;
    r8 = (r6 * r1);
    r9 = min(r8, r0);
    r10 = (r9 + r1);
    r11 = min(r10, r0);
    r12 = (r11 - r9);
    r13 = (r12 + 255u);
    r14 = cq_div_u32(r13, 256u);
    r15 = (r5 * r14);
    r16 = (r9 + r15);
    r17 = min(r16, r11);
    r18 = (r17 + r14);
    r19 = min(r18, r11);
    for (r20 = r17; r20 < r19; r20 = r20 + 1u) {
        r21 = (r20 + r3);
        r22 = in0[r21];
        r23 = (r22 != 0i);
        r24 = select(r7, r22, r23);
        r7 = r24;
    }
    r25 = (r5 == 0u);
    red0_0[r5] = r7;
    workgroupBarrier();
    r26 = 1u;
    for (r27 = 0u; r27 < 8u; r27 = r27 + 1u) {
        r28 = (r26 + r26);
        r29 = cq_rem_u32(r5, r28);
        r30 = (r29 == 0u);
        if (r30) {
            r31 = red0_0[r5];
            r32 = (r5 + r26);
            r33 = red0_0[r32];
            r34 = (r33 != 0i);
            r35 = select(r31, r33, r34);
            r36 = r35;
            red0_0[r5] = r36;
        }
        workgroupBarrier();
        r26 = r28;
    }
    if (r25) {
        r37 = red0_0[0u];
        r38 = r37;
        part0_0[r6] = r38;
    }
}
