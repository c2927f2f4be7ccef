// computeq kernel `group_starts`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(3) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read> totals: array<u32>;
@group(0) @binding(2) var<storage, read_write> starts: array<u32>;
var<workgroup> scan: array<u32, 256>;

@compute @workgroup_size(256)
fn group_starts(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r21: bool;
    var r22: u32;
    var r23: u32;
    var r24: u32;
    var r25: u32;
    var r26: bool;
    var r27: bool;
    var r28: bool;
    var r29: u32;
    var r30: u32;
    var r31: u32;
    var r32: u32;
    var r33: bool;
    var r34: u32;
    var r35: u32;
    var r36: u32;
    var r37: u32;
    var r38: u32;
    var r39: u32;
    var r40: bool;
    var r41: u32;
    var r42: u32;
    var r43: u32;
    var r44: u32;
    var r45: bool;
    var r46: u32;
    var r47: u32;
    var r48: u32;
    var r49: u32;
    var r50: bool;
    var r51: bool;
    var r52: bool;
    var r53: u32;
    var r54: bool;
    var r55: u32;
    var r56: u32;
    var r57: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
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
        r19 = 0u;
        for (r20 = r16; r20 < r18; r20 = r20 + 1u) {
            r21 = (r20 > 0u);
            r22 = (r20 - 1u);
            r23 = select(0u, r22, r21);
            r24 = words[r20];
            r25 = words[r23];
            r26 = (r24 != r25);
            r27 = (r20 == 0u);
            r28 = (r27 | r26);
            r29 = select(0u, 1u, r28);
            r30 = (r19 + r29);
            r19 = r30;
        }
        scan[r5] = r19;
        workgroupBarrier();
        r31 = 1u;
        for (r32 = 0u; r32 < 8u; r32 = r32 + 1u) {
            r33 = (r5 >= r31);
            r34 = 0u;
            if (r33) {
                r35 = (r5 - r31);
                r34 = scan[r35];
            }
            workgroupBarrier();
            if (r33) {
                r36 = scan[r5];
                r37 = (r34 + r36);
                scan[r5] = r37;
            }
            workgroupBarrier();
            r38 = (r31 + r31);
            r31 = r38;
        }
        r39 = 0u;
        r40 = (r5 > 0u);
        if (r40) {
            r41 = (r5 - 1u);
            r39 = scan[r41];
        }
        r42 = (r12 + r39);
        r43 = r42;
        for (r44 = r16; r44 < r18; r44 = r44 + 1u) {
            r45 = (r44 > 0u);
            r46 = (r44 - 1u);
            r47 = select(0u, r46, r45);
            r48 = words[r44];
            r49 = words[r47];
            r50 = (r48 != r49);
            r51 = (r44 == 0u);
            r52 = (r51 | r50);
            r53 = select(0u, 1u, r52);
            r54 = (r53 != 0u);
            if (r54) {
                starts[r43] = r44;
            }
            r55 = (r43 + r53);
            r43 = r55;
        }
        r56 = scan[255u];
        workgroupBarrier();
        r57 = (r12 + r56);
        r12 = r57;
    }
}
