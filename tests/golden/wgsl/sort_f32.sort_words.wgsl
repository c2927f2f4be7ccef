// computeq kernel `sort_words`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(2) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
fn cq_isnan_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(256)
fn sort_words(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r13: f32;
    var r14: u32;
    var r15: bool;
    var r16: u32;
    var r17: u32;
    var r18: bool;
    var r19: u32;
    var r20: u32;
    var r21: u32;
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
        r12 = (r11 + r3);
        r13 = in0[r12];
        r14 = bitcast<u32>(r13);
        r15 = cq_isnan_f32(r13);
        r16 = select(r14, 2143289344u, r15);
        r17 = (r16 & 2147483648u);
        r18 = (r17 != 0u);
        r19 = ~(r16);
        r20 = (r16 | 2147483648u);
        r21 = select(r20, r19, r18);
        words[r11] = r21;
    }
}
