// computeq kernel `sort_spine`
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
    var r12: u32;
    var r13: bool;
    var r14: u32;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: bool;
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
        r15 = 0u;
        for (r16 = 0u; r16 < 256u; r16 = r16 + 1u) {
            bases[r16] = r14;
            r17 = totals[r16];
            r14 = (r14 + r17);
            r15 = max(r15, r17);
        }
        r18 = (r15 == r14);
        r19 = select(0u, 1u, r18);
        constant[0u] = r19;
    }
    workgroupBarrier();
    for (r20 = r5; r20 < 256u; r20 = r20 + 256u) {
        r21 = bases[r20];
        for (r22 = 0u; r22 < r2; r22 = r22 + 1u) {
            r23 = (r22 * 256u);
            r24 = (r23 + r20);
            starts[r24] = r21;
            r25 = counts[r24];
            r21 = (r21 + r25);
        }
    }
}
