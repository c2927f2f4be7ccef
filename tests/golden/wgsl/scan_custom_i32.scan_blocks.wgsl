// computeq kernel `scan_blocks`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    p0: i32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read_write> totals: array<i32>;
@group(0) @binding(1) var<storage, read_write> carry: array<i32>;
var<workgroup> scan: array<i32, 256>;

@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: i32;
    var r5: u32;
    var r6: u32;
    var r7: i32;
    var r8: u32;
    var r9: i32;
    var r10: u32;
    var r11: u32;
    var r12: u32;
    var r13: u32;
    var r14: u32;
    var r15: u32;
    var r16: i32;
    var r17: u32;
    var r18: i32;
    var r19: bool;
    var r20: i32;
    var r21: u32;
    var r22: u32;
    var r23: bool;
    var r24: i32;
    var r25: u32;
    var r26: i32;
    var r27: bool;
    var r28: i32;
    var r29: u32;
    var r30: i32;
    var r31: bool;
    var r32: u32;
    var r33: bool;
    var r34: i32;
    var r35: i32;
    var r36: u32;
    var r37: i32;
    var r38: bool;
    var r39: i32;
    var r40: i32;
    var r41: bool;
    var r42: i32;
    var r43: bool;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.p0;
    r5 = lid.x;
    r6 = wid.x;
    r7 = carry[0u];
    r8 = 0u;
    r9 = r7;
    for (r10 = r8; r10 < r2; r10 = r10 + 1024u) {
        r11 = (r5 * 4u);
        r12 = (r10 + r11);
        r13 = min(r12, r2);
        r14 = (r13 + 4u);
        r15 = min(r14, r2);
        r16 = r4;
        for (r17 = r13; r17 < r15; r17 = r17 + 1u) {
            r18 = totals[r17];
            r19 = (r18 != 0i);
            r20 = select(r16, r18, r19);
            r16 = r20;
        }
        scan[r5] = r16;
        workgroupBarrier();
        r21 = 1u;
        for (r22 = 0u; r22 < 8u; r22 = r22 + 1u) {
            r23 = (r5 >= r21);
            r24 = r4;
            if (r23) {
                r25 = (r5 - r21);
                r24 = scan[r25];
            }
            workgroupBarrier();
            if (r23) {
                r26 = scan[r5];
                r27 = (r26 != 0i);
                r28 = select(r24, r26, r27);
                scan[r5] = r28;
            }
            workgroupBarrier();
            r29 = (r21 + r21);
            r21 = r29;
        }
        r30 = r4;
        r31 = (r5 > 0u);
        if (r31) {
            r32 = (r5 - 1u);
            r30 = scan[r32];
        }
        r33 = (r30 != 0i);
        r34 = select(r9, r30, r33);
        r35 = r34;
        for (r36 = r13; r36 < r15; r36 = r36 + 1u) {
            r37 = totals[r36];
            totals[r36] = r35;
            r38 = (r37 != 0i);
            r39 = select(r35, r37, r38);
            r35 = r39;
        }
        r40 = scan[255u];
        workgroupBarrier();
        r41 = (r40 != 0i);
        r42 = select(r9, r40, r41);
        r9 = r42;
    }
    r43 = (r5 == 0u);
    if (r43) {
        carry[0u] = r9;
    }
}
