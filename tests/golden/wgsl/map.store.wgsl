// computeq kernel `store`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(4) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out2: array<u32>;

@compute @workgroup_size(256)
fn store(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r14: f32;
    var r15: f32;
    var r16: f32;
    var r17: f32;
    var r18: bool;
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
        r14 = (r13 * 2.0f);
        r15 = (r14 + 1.0f);
        r16 = abs(r13);
        r17 = sqrt(r16);
        r18 = (r13 > 0.5f);
        out0[r11] = r15;
        out1[r11] = r17;
        out2[r11] = select(0u, 1u, r18);
    }
}
