// computeq kernel `sort_count_u32_0`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
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
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = lid.x;
    r5 = wid.x;
    for (r6 = r4; r6 < 256u; r6 = r6 + 256u) {
        atomicStore(&bins[r6], 0u);
    }
    workgroupBarrier();
    r7 = (r5 * r1);
    r8 = min(r7, r0);
    r9 = (r8 + r1);
    r10 = min(r9, r0);
    r11 = (r8 + r4);
    for (r12 = r11; r12 < r10; r12 = r12 + 256u) {
        r13 = words[r12];
        r14 = (r13 >> (bitcast<u32>(0u) & 31u));
        r15 = (r14 & 255u);
        r16 = atomicAdd(&bins[r15], 1u);
    }
    workgroupBarrier();
    r17 = (r5 * 256u);
    for (r18 = r4; r18 < 256u; r18 = r18 + 256u) {
        r19 = atomicLoad(&bins[r18]);
        r20 = (r17 + r18);
        counts[r20] = r19;
    }
}
