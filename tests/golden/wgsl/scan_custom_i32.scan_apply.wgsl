// computeq kernel `scan_apply`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    p0: i32,
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
    var r4: i32;
    var r5: u32;
    var r6: u32;
    var r7: u32;
    var r8: u32;
    var r9: u32;
    var r10: u32;
    var r11: i32;
    var r12: i32;
    var r13: u32;
    var r14: u32;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: u32;
    var r19: i32;
    var r20: u32;
    var r21: u32;
    var r22: i32;
    var r23: bool;
    var r24: i32;
    var r25: u32;
    var r26: u32;
    var r27: bool;
    var r28: i32;
    var r29: u32;
    var r30: i32;
    var r31: bool;
    var r32: i32;
    var r33: u32;
    var r34: i32;
    var r35: bool;
    var r36: u32;
    var r37: bool;
    var r38: i32;
    var r39: i32;
    var r40: u32;
    var r41: u32;
    var r42: i32;
    var r43: bool;
    var r44: i32;
    var r45: i32;
    var r46: bool;
    var r47: i32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.p0;
    r5 = lid.x;
    r6 = wid.x;
    r7 = (r6 * r1);
    r8 = min(r7, r0);
    r9 = (r8 + r1);
    r10 = min(r9, r0);
    r11 = totals[r6];
    r12 = r11;
    for (r13 = r8; r13 < r10; r13 = r13 + 1024u) {
        r14 = (r5 * 4u);
        r15 = (r13 + r14);
        r16 = min(r15, r10);
        r17 = (r16 + 4u);
        r18 = min(r17, r10);
        r19 = r4;
        for (r20 = r16; r20 < r18; r20 = r20 + 1u) {
            r21 = (r20 + r3);
            r22 = in0[r21];
            r23 = (r22 != 0i);
            r24 = select(r19, r22, r23);
            r19 = r24;
        }
        scan[r5] = r19;
        workgroupBarrier();
        r25 = 1u;
        for (r26 = 0u; r26 < 8u; r26 = r26 + 1u) {
            r27 = (r5 >= r25);
            r28 = r4;
            if (r27) {
                r29 = (r5 - r25);
                r28 = scan[r29];
            }
            workgroupBarrier();
            if (r27) {
                r30 = scan[r5];
                r31 = (r30 != 0i);
                r32 = select(r28, r30, r31);
                scan[r5] = r32;
            }
            workgroupBarrier();
            r33 = (r25 + r25);
            r25 = r33;
        }
        r34 = r4;
        r35 = (r5 > 0u);
        if (r35) {
            r36 = (r5 - 1u);
            r34 = scan[r36];
        }
        r37 = (r34 != 0i);
        r38 = select(r12, r34, r37);
        r39 = r38;
        for (r40 = r16; r40 < r18; r40 = r40 + 1u) {
            r41 = (r40 + r3);
            r42 = in0[r41];
            r43 = (r42 != 0i);
            r44 = select(r39, r42, r43);
            out0[r40] = r39;
            r39 = r44;
        }
        r45 = scan[255u];
        workgroupBarrier();
        r46 = (r45 != 0i);
        r47 = select(r12, r45, r46);
        r12 = r47;
    }
}
