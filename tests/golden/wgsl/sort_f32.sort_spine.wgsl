// computeq kernel `sort_spine`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(3) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read_write> counts: array<u32>;
@group(0) @binding(1) var<storage, read_write> starts: array<u32>;
@group(0) @binding(2) var<storage, read_write> constant: array<u32>;
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
    var r17: bool;
    var r18: u32;
    var r19: u32;
    var r20: u32;
    var r21: u32;
    var r22: u32;
    var r23: u32;
    var r24: u32;
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
        r14 = 0u;
        for (r15 = 0u; r15 < 256u; r15 = r15 + 1u) {
            bases[r15] = r13;
            r16 = totals[r15];
            r13 = (r13 + r16);
            r14 = max(r14, r16);
        }
        r17 = (r14 == r13);
        r18 = select(0u, 1u, r17);
        constant[0u] = r18;
    }
    workgroupBarrier();
    for (r19 = r4; r19 < 256u; r19 = r19 + 256u) {
        r20 = bases[r19];
        for (r21 = 0u; r21 < r2; r21 = r21 + 1u) {
            r22 = (r21 * 256u);
            r23 = (r22 + r19);
            starts[r23] = r20;
            r24 = counts[r23];
            r20 = (r20 + r24);
        }
    }
}
