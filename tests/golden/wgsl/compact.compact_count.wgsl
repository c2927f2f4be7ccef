// computeq kernel `compact_count`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
    index0: u64,
}
@group(0) @binding(3) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<i32>;
@group(0) @binding(2) var<storage, read_write> part0_0: array<u32>;
var<workgroup> red0_0: array<u32, 256>;
fn cq_rem_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a % b;
}

@compute @workgroup_size(256)
fn compact_count(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r16: f32;
    var r17: u32;
    var r18: i32;
    var r19: u64;
    var r20: u64;
    var r21: f32;
    var r22: bool;
    var r23: u32;
    var r24: bool;
    var r25: u32;
    var r26: u32;
    var r27: u32;
    var r28: u32;
    var r29: bool;
    var r30: u32;
    var r31: u32;
    var r32: u32;
    var r33: u32;
    var r34: u32;
    var r35: u32;
    var r36: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = u.index0;
    r6 = lid.x;
    r7 = wid.x;
    r8 = 0u;
    r9 = (r7 * r1);
    r10 = min(r9, r0);
    r11 = (r10 + r1);
    r12 = min(r11, r0);
    r13 = (r10 + r6);
    for (r14 = r13; r14 < r12; r14 = r14 + 256u) {
        r15 = (r14 + r3);
        r16 = in0[r15];
        r17 = (r14 + r4);
        r18 = in1[r17];
        r19 = u64(r14);
        r20 = (r19 + r5);
        r21 = f32(r20);
        r22 = (r16 > 0.0f);
        if (r22) {
            r23 = (r8 + 1u);
            r8 = r23;
        }
    }
    r24 = (r6 == 0u);
    red0_0[r6] = r8;
    workgroupBarrier();
    r25 = 1u;
    for (r26 = 0u; r26 < 8u; r26 = r26 + 1u) {
        r27 = (r25 + r25);
        r28 = cq_rem_u32(r6, r27);
        r29 = (r28 == 0u);
        if (r29) {
            r30 = red0_0[r6];
            r31 = (r6 + r25);
            r32 = red0_0[r31];
            r33 = (r30 + r32);
            r34 = r33;
            red0_0[r6] = r34;
        }
        workgroupBarrier();
        r25 = r27;
    }
    if (r24) {
        r35 = red0_0[0u];
        r36 = r35;
        part0_0[r7] = r36;
    }
}
