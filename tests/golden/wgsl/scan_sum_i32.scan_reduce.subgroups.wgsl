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

@compute @workgroup_size(256)
fn scan_reduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>, @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_id) sg_id: u32, @builtin(num_subgroups) num_sg: u32) {
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
    var r17: i32;
    var r18: u32;
    var r19: u32;
    var r20: u32;
    var r21: bool;
    var r22: i32;
    var r23: i32;
    var r24: u32;
    var r25: i32;
    var r26: i32;
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
    r17 = subgroupAdd(r6);
    r18 = sg_lane;
    r19 = sg_id;
    r20 = num_sg;
    r21 = (r18 == 0u);
    if (r21) {
        red0_0[r19] = r17;
    }
    workgroupBarrier();
    if (r16) {
        r22 = red0_0[0u];
        r23 = r22;
        for (r24 = 1u; r24 < r20; r24 = r24 + 1u) {
            r25 = red0_0[r24];
            r26 = (r23 + r25);
            r23 = r26;
        }
        part0_0[r5] = r23;
    }
}
