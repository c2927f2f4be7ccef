// computeq kernel `group_fold_wide`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(8) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read_write> out0: array<i32>;
@group(0) @binding(5) var<storage, read_write> out1: array<u64>;
@group(0) @binding(6) var<storage, read_write> out2: array<f32>;
@group(0) @binding(7) var<storage, read> count: array<u32>;
var<workgroup> red0_0: array<f32, 256>;
fn cq_div_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a / b;
}

@compute @workgroup_size(256)
fn group_fold_wide(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>, @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_id) sg_id: u32, @builtin(num_subgroups) num_sg: u32) {
    var r0: u32;
    var r1: u32;
    var r2: u32;
    var r3: u32;
    var r4: u32;
    var r5: u32;
    var r6: u32;
    var r7: u32;
    var r8: u32;
    var r9: bool;
    var r10: bool;
    var r11: bool;
    var r12: u32;
    var r13: u32;
    var r14: u32;
    var r15: bool;
    var r16: u32;
    var r17: u32;
    var r18: u32;
    var r19: u32;
    var r20: f32;
    var r21: u32;
    var r22: u32;
    var r23: u32;
    var r24: u32;
    var r25: i32;
    var r26: u32;
    var r27: f32;
    var r28: f32;
    var r29: bool;
    var r30: f32;
    var r31: u32;
    var r32: u32;
    var r33: u32;
    var r34: bool;
    var r35: f32;
    var r36: f32;
    var r37: u32;
    var r38: f32;
    var r39: f32;
    var r40: u32;
    var r41: u32;
    var r42: i32;
    var r43: u32;
    var r44: f32;
    var r45: u32;
    var r46: u64;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = count[0u];
    r8 = cq_div_u32(r0, 256u);
    r9 = (r7 > 0u);
    r10 = (r7 <= r8);
    r11 = (r9 & r10);
    if (r11) {
        for (r12 = r6; r12 < r7; r12 = r12 + r2) {
            workgroupBarrier();
            r13 = starts[r12];
            r14 = (r12 + 1u);
            r15 = (r14 < r7);
            r16 = (r7 - 1u);
            r17 = min(r14, r16);
            r18 = starts[r17];
            r19 = select(r0, r18, r15);
            r20 = 0.0f;
            r21 = (r13 + r5);
            for (r22 = r21; r22 < r19; r22 = r22 + 256u) {
                r23 = rows[r22];
                r24 = (r23 + r3);
                r25 = in0[r24];
                r26 = (r23 + r4);
                r27 = in1[r26];
                r28 = (r20 + r27);
                r20 = r28;
            }
            r29 = (r5 == 0u);
            r30 = subgroupAdd(r20);
            r31 = sg_lane;
            r32 = sg_id;
            r33 = num_sg;
            r34 = (r31 == 0u);
            if (r34) {
                red0_0[r32] = r30;
            }
            workgroupBarrier();
            if (r29) {
                r35 = red0_0[0u];
                r36 = r35;
                for (r37 = 1u; r37 < r33; r37 = r37 + 1u) {
                    r38 = red0_0[r37];
                    r39 = (r36 + r38);
                    r36 = r39;
                }
                r40 = rows[r13];
                r41 = (r40 + r3);
                r42 = in0[r41];
                r43 = (r40 + r4);
                r44 = in1[r43];
                out0[r12] = r42;
                r45 = (r19 - r13);
                r46 = u64(r45);
                out1[r12] = r46;
                out2[r12] = r36;
            }
        }
    }
}
