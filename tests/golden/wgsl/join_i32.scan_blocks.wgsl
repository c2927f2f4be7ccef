// computeq kernel `scan_blocks`
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
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read_write> totals: array<u64>;
@group(0) @binding(1) var<storage, read_write> carry: array<u64>;
var<workgroup> scan: array<u64, 256>;

@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: u32;
    var r5: u32;
    var r6: u32;
    var r7: u32;
    var r8: u64;
    var r9: u32;
    var r10: u32;
    var r11: u32;
    var r12: u32;
    var r13: u32;
    var r14: u32;
    var r15: u64;
    var r16: u32;
    var r17: u64;
    var r18: u64;
    var r19: u32;
    var r20: u32;
    var r21: bool;
    var r22: u64;
    var r23: u32;
    var r24: u64;
    var r25: u64;
    var r26: u32;
    var r27: u64;
    var r28: bool;
    var r29: u32;
    var r30: u64;
    var r31: u64;
    var r32: u32;
    var r33: u64;
    var r34: u64;
    var r35: u64;
    var r36: u64;
    var r37: bool;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = 0u;
    r8 = 0lu;
    for (r9 = r7; r9 < r2; r9 = r9 + 1024u) {
        r10 = (r5 * 4u);
        r11 = (r9 + r10);
        r12 = min(r11, r2);
        r13 = (r12 + 4u);
        r14 = min(r13, r2);
        r15 = 0lu;
        for (r16 = r12; r16 < r14; r16 = r16 + 1u) {
            r17 = totals[r16];
            r18 = (r15 + r17);
            r15 = r18;
        }
        scan[r5] = r15;
        workgroupBarrier();
        r19 = 1u;
        for (r20 = 0u; r20 < 8u; r20 = r20 + 1u) {
            r21 = (r5 >= r19);
            r22 = 0lu;
            if (r21) {
                r23 = (r5 - r19);
                r22 = scan[r23];
            }
            workgroupBarrier();
            if (r21) {
                r24 = scan[r5];
                r25 = (r22 + r24);
                scan[r5] = r25;
            }
            workgroupBarrier();
            r26 = (r19 + r19);
            r19 = r26;
        }
        r27 = 0lu;
        r28 = (r5 > 0u);
        if (r28) {
            r29 = (r5 - 1u);
            r27 = scan[r29];
        }
        r30 = (r8 + r27);
        r31 = r30;
        for (r32 = r12; r32 < r14; r32 = r32 + 1u) {
            r33 = totals[r32];
            totals[r32] = r31;
            r34 = (r31 + r33);
            r31 = r34;
        }
        r35 = scan[255u];
        workgroupBarrier();
        r36 = (r8 + r35);
        r8 = r36;
    }
    r37 = (r5 == 0u);
    if (r37) {
        carry[0u] = r8;
    }
}
