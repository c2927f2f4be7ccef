// computeq kernel `scan_blocks`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
    index0: u64,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read_write> totals: array<u32>;
@group(0) @binding(1) var<storage, read_write> carry: array<u32>;
var<workgroup> scan: array<u32, 256>;

@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r22: bool;
    var r23: u32;
    var r24: u32;
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
    var r37: u32;
    var r38: bool;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = u.index0;
    r6 = lid.x;
    r7 = wid.x;
    r8 = 0u;
    r9 = 0u;
    for (r10 = r8; r10 < r2; r10 = r10 + 1024u) {
        r11 = (r6 * 4u);
        r12 = (r10 + r11);
        r13 = min(r12, r2);
        r14 = (r13 + 4u);
        r15 = min(r14, r2);
        r16 = 0u;
        for (r17 = r13; r17 < r15; r17 = r17 + 1u) {
            r18 = totals[r17];
            r19 = (r16 + r18);
            r16 = r19;
        }
        scan[r6] = r16;
        workgroupBarrier();
        r20 = 1u;
        for (r21 = 0u; r21 < 8u; r21 = r21 + 1u) {
            r22 = (r6 >= r20);
            r23 = 0u;
            if (r22) {
                r24 = (r6 - r20);
                r23 = scan[r24];
            }
            workgroupBarrier();
            if (r22) {
                r25 = scan[r6];
                r26 = (r23 + r25);
                scan[r6] = r26;
            }
            workgroupBarrier();
            r27 = (r20 + r20);
            r20 = r27;
        }
        r28 = 0u;
        r29 = (r6 > 0u);
        if (r29) {
            r30 = (r6 - 1u);
            r28 = scan[r30];
        }
        r31 = (r9 + r28);
        r32 = r31;
        for (r33 = r13; r33 < r15; r33 = r33 + 1u) {
            r34 = totals[r33];
            totals[r33] = r32;
            r35 = (r32 + r34);
            r32 = r35;
        }
        r36 = scan[255u];
        workgroupBarrier();
        r37 = (r9 + r36);
        r9 = r37;
    }
    r38 = (r6 == 0u);
    if (r38) {
        carry[0u] = r9;
    }
}
