// computeq kernel `sort_spine`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read_write> counts: array<u32>;
@group(0) @binding(1) var<storage, read_write> starts: array<u32>;
var<workgroup> totals: array<u32, 256>;
var<workgroup> bases: array<u32, 256>;

@compute @workgroup_size(256)
fn sort_spine(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r13: bool;
    var r14: u32;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: u32;
    var r19: u32;
    var r20: u32;
    var r21: u32;
    var r22: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    for (r7 = r5; r7 < 256u; r7 = r7 + 256u) {
        r8 = 0u;
        for (r9 = 0u; r9 < r2; r9 = r9 + 1u) {
            r10 = (r9 * 256u);
            r11 = (r10 + r7);
            r12 = counts[r11];
            r8 = (r8 + r12);
        }
        totals[r7] = r8;
    }
    workgroupBarrier();
    r13 = (r5 == 0u);
    if (r13) {
        r14 = 0u;
        for (r15 = 0u; r15 < 256u; r15 = r15 + 1u) {
            bases[r15] = r14;
            r16 = totals[r15];
            r14 = (r14 + r16);
        }
    }
    workgroupBarrier();
    for (r17 = r5; r17 < 256u; r17 = r17 + 256u) {
        r18 = bases[r17];
        for (r19 = 0u; r19 < r2; r19 = r19 + 1u) {
            r20 = (r19 * 256u);
            r21 = (r20 + r17);
            starts[r21] = r18;
            r22 = counts[r21];
            r18 = (r18 + r22);
        }
    }
}
