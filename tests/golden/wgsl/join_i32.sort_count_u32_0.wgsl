// computeq kernel `sort_count_u32_0`
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
@group(0) @binding(3) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;
@group(0) @binding(2) var<storage, read> count: array<u32>;
var<workgroup> bins: array<atomic<u32>, 256>;
fn cq_div_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a / b;
}

@compute @workgroup_size(256)
fn sort_count_u32_0(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r21: u32;
    var r22: u32;
    var r23: u32;
    var r24: u32;
    var r25: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    for (r7 = r5; r7 < 256u; r7 = r7 + 256u) {
        atomicStore(&bins[r7], 0u);
    }
    workgroupBarrier();
    r8 = count[0u];
    r9 = (r2 - 1u);
    r10 = (r8 + r9);
    r11 = cq_div_u32(r10, r2);
    r12 = (r6 * r11);
    r13 = min(r12, r8);
    r14 = (r13 + r11);
    r15 = min(r14, r8);
    r16 = (r13 + r5);
    for (r17 = r16; r17 < r15; r17 = r17 + 256u) {
        r18 = words[r17];
        r19 = (r18 >> (bitcast<u32>(0u) & 31u));
        r20 = (r19 & 255u);
        r21 = atomicAdd(&bins[r20], 1u);
    }
    workgroupBarrier();
    r22 = (r6 * 256u);
    for (r23 = r5; r23 < 256u; r23 = r23 + 256u) {
        r24 = atomicLoad(&bins[r23]);
        r25 = (r22 + r23);
        counts[r25] = r24;
    }
}
