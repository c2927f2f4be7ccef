// computeq kernel `sort_count_u32_0`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;
var<workgroup> bins: array<atomic<u32>, 256>;

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
    r8 = (r6 * r1);
    r9 = min(r8, r0);
    r10 = (r9 + r1);
    r11 = min(r10, r0);
    r12 = (r9 + r5);
    for (r13 = r12; r13 < r11; r13 = r13 + 256u) {
        r14 = words[r13];
        r15 = (r14 >> (bitcast<u32>(0u) & 31u));
        r16 = (r15 & 255u);
        r17 = atomicAdd(&bins[r16], 1u);
    }
    workgroupBarrier();
    r18 = (r6 * 256u);
    for (r19 = r5; r19 < 256u; r19 = r19 + 256u) {
        r20 = atomicLoad(&bins[r19]);
        r21 = (r18 + r19);
        counts[r21] = r20;
    }
}
