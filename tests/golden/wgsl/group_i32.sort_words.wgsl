// computeq kernel `sort_words`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(4) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> words: array<u32>;
@group(0) @binding(3) var<storage, read_write> rows: array<u32>;

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
    var r13: u32;
    var r14: i32;
    var r15: u32;
    var r16: f32;
    var r17: u32;
    var r18: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = u.off1;
    r5 = lid.x;
    r6 = wid.x;
    r7 = (r6 * r1);
    r8 = min(r7, r0);
    r9 = (r8 + r1);
    r10 = min(r9, r0);
    r11 = (r8 + r5);
    for (r12 = r11; r12 < r10; r12 = r12 + 256u) {
        r13 = (r12 + r3);
        r14 = in0[r13];
        r15 = (r12 + r4);
        r16 = in1[r15];
        r17 = bitcast<u32>(r14);
        r18 = (r17 ^ 2147483648u);
        words[r12] = r18;
        rows[r12] = r12;
    }
}
