// computeq kernel `group_bounds`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> totals: array<u32>;
var<workgroup> red0_0: array<u32, 256>;

@compute @workgroup_size(256)
fn group_bounds(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>, @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_id) sg_id: u32, @builtin(num_subgroups) num_sg: u32) {
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
    var r14: bool;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: u32;
    var r19: bool;
    var r20: bool;
    var r21: bool;
    var r22: u32;
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
    r11 = 0u;
    r12 = (r8 + r5);
    for (r13 = r12; r13 < r10; r13 = r13 + 256u) {
        r14 = (r13 > 0u);
        r15 = (r13 - 1u);
        r16 = select(0u, r15, r14);
        r17 = words[r13];
        r18 = words[r16];
        r19 = (r17 != r18);
        r20 = (r13 == 0u);
        r21 = (r20 | r19);
        r22 = select(0u, 1u, r21);
        r23 = (r11 + r22);
        r11 = r23;
    }
    r24 = (r5 == 0u);
    r25 = subgroupAdd(r11);
    r26 = sg_lane;
    r27 = sg_id;
    r28 = num_sg;
    r29 = (r26 == 0u);
    if (r29) {
        red0_0[r27] = r25;
    }
    workgroupBarrier();
    if (r24) {
        r30 = red0_0[0u];
        r31 = r30;
        for (r32 = 1u; r32 < r28; r32 = r32 + 1u) {
            r33 = red0_0[r32];
            r34 = (r31 + r33);
            r31 = r34;
        }
        totals[r6] = r31;
    }
}
