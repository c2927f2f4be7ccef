// computeq kernel `scan_reduce`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read_write> part0_0: array<i32>;
var<workgroup> red0_0: array<i32, 256>;
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
    var r4: u32;
    var r5: u32;
    var r6: i32;
    var r7: u32;
    var r8: u32;
    var r9: u32;
    var r10: u32;
    var r11: u32;
    var r12: u32;
    var r13: u32;
    var r14: i32;
    var r15: i32;
    var r16: bool;
    var r17: u32;
    var r18: u32;
    var r19: u32;
    var r20: u32;
    var r21: bool;
    var r22: i32;
    var r23: u32;
    var r24: i32;
    var r25: i32;
    var r26: i32;
    var r27: i32;
    var r28: i32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = lid.x;
    r5 = wid.x;
    r6 = 0i;
    r7 = (r5 * r1);
    r8 = min(r7, r0);
    r9 = (r8 + r1);
    r10 = min(r9, r0);
    r11 = (r8 + r4);
    for (r12 = r11; r12 < r10; r12 = r12 + 256u) {
        r13 = (r12 + r3);
        r14 = in0[r13];
        r15 = (r6 + r14);
        r6 = r15;
    }
    r16 = (r4 == 0u);
    red0_0[r4] = r6;
    workgroupBarrier();
    r17 = 1u;
    for (r18 = 0u; r18 < 8u; r18 = r18 + 1u) {
        r19 = (r17 + r17);
        r20 = cq_rem_u32(r4, r19);
        r21 = (r20 == 0u);
        if (r21) {
            r22 = red0_0[r4];
            r23 = (r4 + r17);
            r24 = red0_0[r23];
            r25 = (r22 + r24);
            r26 = r25;
            red0_0[r4] = r26;
        }
        workgroupBarrier();
        r17 = r19;
    }
    if (r16) {
        r27 = red0_0[0u];
        r28 = r27;
        part0_0[r5] = r28;
    }
}
