// computeq kernel `sort_zero`
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
@group(0) @binding(1) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read_write> counts: array<u32>;

@compute @workgroup_size(256)
fn sort_zero(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = (r6 * 256u);
    for (r8 = r5; r8 < 256u; r8 = r8 + 256u) {
        r9 = (r7 + r8);
        counts[r9] = 0u;
    }
}
