// computeq kernel `sort_spine`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
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
    var r12: bool;
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
    r4 = lid.x;
    r5 = wid.x;
    for (r6 = r4; r6 < 256u; r6 = r6 + 256u) {
        r7 = 0u;
        for (r8 = 0u; r8 < r2; r8 = r8 + 1u) {
            r9 = (r8 * 256u);
            r10 = (r9 + r6);
            r11 = counts[r10];
            r7 = (r7 + r11);
        }
        totals[r6] = r7;
    }
    workgroupBarrier();
    r12 = (r4 == 0u);
    if (r12) {
        r13 = 0u;
        for (r14 = 0u; r14 < 256u; r14 = r14 + 1u) {
            bases[r14] = r13;
            r15 = totals[r14];
            r13 = (r13 + r15);
        }
    }
    workgroupBarrier();
    for (r16 = r4; r16 < 256u; r16 = r16 + 256u) {
        r17 = bases[r16];
        for (r18 = 0u; r18 < r2; r18 = r18 + 1u) {
            r19 = (r18 * 256u);
            r20 = (r19 + r16);
            starts[r20] = r17;
            r21 = counts[r20];
            r17 = (r17 + r21);
        }
    }
}
