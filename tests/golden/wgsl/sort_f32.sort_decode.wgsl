// computeq kernel `sort_decode`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn sort_decode(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r14: bool;
    var r15: u32;
    var r16: u32;
    var r17: u32;
    var r18: f32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = lid.x;
    r5 = wid.x;
    r6 = (r5 * r1);
    r7 = min(r6, r0);
    r8 = (r7 + r1);
    r9 = min(r8, r0);
    r10 = (r7 + r4);
    for (r11 = r10; r11 < r9; r11 = r11 + 256u) {
        r12 = words[r11];
        r13 = (r12 & 2147483648u);
        r14 = (r13 != 0u);
        r15 = (r12 ^ 2147483648u);
        r16 = ~(r12);
        r17 = select(r16, r15, r14);
        r18 = bitcast<f32>(r17);
        out0[r11] = r18;
    }
}
