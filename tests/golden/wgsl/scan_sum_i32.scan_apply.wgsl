// computeq kernel `scan_apply`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(3) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> totals: array<i32>;
@group(0) @binding(2) var<storage, read_write> out0: array<i32>;
var<workgroup> scan: array<i32, 256>;

@compute @workgroup_size(256)
fn scan_apply(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r10: i32;
    var r11: i32;
    var r12: u32;
    var r13: u32;
    var r14: u32;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: i32;
    var r19: u32;
    var r20: u32;
    var r21: i32;
    var r22: i32;
    var r23: u32;
    var r24: u32;
    var r25: bool;
    var r26: i32;
    var r27: u32;
    var r28: i32;
    var r29: i32;
    var r30: u32;
    var r31: i32;
    var r32: bool;
    var r33: u32;
    var r34: i32;
    var r35: i32;
    var r36: u32;
    var r37: u32;
    var r38: i32;
    var r39: i32;
    var r40: i32;
    var r41: i32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = lid.x;
    r5 = wid.x;
    r6 = (r5 * r1);
    r7 = min(r6, r0);
    r8 = (r7 + r1);
    r9 = min(r8, r0);
    r10 = totals[r5];
    r11 = r10;
    for (r12 = r7; r12 < r9; r12 = r12 + 1024u) {
        r13 = (r4 * 4u);
        r14 = (r12 + r13);
        r15 = min(r14, r9);
        r16 = (r15 + 4u);
        r17 = min(r16, r9);
        r18 = 0i;
        for (r19 = r15; r19 < r17; r19 = r19 + 1u) {
            r20 = (r19 + r3);
            r21 = in0[r20];
            r22 = (r18 + r21);
            r18 = r22;
        }
        scan[r4] = r18;
        workgroupBarrier();
        r23 = 1u;
        for (r24 = 0u; r24 < 8u; r24 = r24 + 1u) {
            r25 = (r4 >= r23);
            r26 = 0i;
            if (r25) {
                r27 = (r4 - r23);
                r26 = scan[r27];
            }
            workgroupBarrier();
            if (r25) {
                r28 = scan[r4];
                r29 = (r26 + r28);
                scan[r4] = r29;
            }
            workgroupBarrier();
            r30 = (r23 + r23);
            r23 = r30;
        }
        r31 = 0i;
        r32 = (r4 > 0u);
        if (r32) {
            r33 = (r4 - 1u);
            r31 = scan[r33];
        }
        r34 = (r11 + r31);
        r35 = r34;
        for (r36 = r15; r36 < r17; r36 = r36 + 1u) {
            r37 = (r36 + r3);
            r38 = in0[r37];
            r39 = (r35 + r38);
            out0[r36] = r39;
            r35 = r39;
        }
        r40 = scan[255u];
        workgroupBarrier();
        r41 = (r11 + r40);
        r11 = r41;
    }
}
