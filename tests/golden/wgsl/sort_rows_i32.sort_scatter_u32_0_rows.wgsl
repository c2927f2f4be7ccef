// computeq kernel `sort_scatter_u32_0_rows`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
    off1: u32,
}
@group(0) @binding(5) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words_in: array<u32>;
@group(0) @binding(1) var<storage, read> rows_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> words_out: array<u32>;
@group(0) @binding(3) var<storage, read_write> rows_out: array<u32>;
@group(0) @binding(4) var<storage, read> starts: array<u32>;
var<workgroup> tile_words: array<u32, 512>;
var<workgroup> tile_rows: array<u32, 512>;
var<workgroup> zeros: array<u32, 256>;
var<workgroup> runs: array<u32, 256>;
var<workgroup> firsts: array<u32, 256>;

@compute @workgroup_size(256)
fn sort_scatter_u32_0_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r21: u32;
    var r22: u32;
    var r23: bool;
    var r24: u32;
    var r25: u32;
    var r26: u32;
    var r27: bool;
    var r28: u32;
    var r29: u32;
    var r30: u32;
    var r31: u32;
    var r32: u32;
    var r33: u32;
    var r34: u32;
    var r35: u32;
    var r36: u32;
    var r37: u32;
    var r38: u32;
    var r39: u32;
    var r40: u32;
    var r41: u32;
    var r42: u32;
    var r43: u32;
    var r44: bool;
    var r45: u32;
    var r46: u32;
    var r47: u32;
    var r48: u32;
    var r49: u32;
    var r50: u32;
    var r51: u32;
    var r52: u32;
    var r53: u32;
    var r54: u32;
    var r55: bool;
    var r56: u32;
    var r57: u32;
    var r58: u32;
    var r59: bool;
    var r60: u32;
    var r61: bool;
    var r62: u32;
    var r63: u32;
    var r64: u32;
    var r65: bool;
    var r66: u32;
    var r67: u32;
    var r68: u32;
    var r69: u32;
    var r70: u32;
    var r71: bool;
    var r72: bool;
    var r73: bool;
    var r74: bool;
    var r75: bool;
    var r76: u32;
    var r77: u32;
    var r78: u32;
    var r79: bool;
    var r80: u32;
    var r81: u32;
    var r82: u32;
    var r83: u32;
    var r84: u32;
    var r85: bool;
    var r86: bool;
    var r87: bool;
    var r88: bool;
    var r89: u32;
    var r90: u32;
    var r91: u32;
    var r92: u32;
    var r93: u32;
    var r94: u32;
    var r95: u32;
    var r96: u32;
    var r97: u32;
    var r98: u32;
    var r99: u32;
    var r100: bool;
    var r101: u32;
    var r102: u32;
    var r103: u32;
    var r104: u32;
    var r105: u32;
    var r106: bool;
    var r107: bool;
    var r108: bool;
    var r109: u32;
    var r110: u32;
    var r111: u32;
    var r112: u32;
    var r113: u32;
    var r114: bool;
    var r115: u32;
    var r116: u32;
    var r117: u32;
    var r118: u32;
    var r119: u32;
    var r120: bool;
    var r121: bool;
    var r122: bool;
    var r123: u32;
    var r124: u32;
    var r125: u32;
    var r126: u32;
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
        r10 = starts[r9];
        runs[r8] = r10;
    }
    workgroupBarrier();
    r11 = (r6 * r1);
    r12 = min(r11, r0);
    r13 = (r12 + r1);
    r14 = min(r13, r0);
    r15 = (r5 * 2u);
    for (r16 = r12; r16 < r14; r16 = r16 + 512u) {
        r17 = (r14 - r16);
        r18 = min(r17, 512u);
        r19 = (r15 + 0u);
        r20 = (r15 + 1u);
        r21 = 4294967295u;
        r22 = 0u;
        r23 = (r19 < r18);
        if (r23) {
            r24 = (r16 + r19);
            r21 = words_in[r24];
            r22 = rows_in[r24];
        }
        tile_words[r19] = r21;
        tile_rows[r19] = r22;
        r25 = 4294967295u;
        r26 = 0u;
        r27 = (r20 < r18);
        if (r27) {
            r28 = (r16 + r20);
            r25 = words_in[r28];
            r26 = rows_in[r28];
        }
        tile_words[r20] = r25;
        tile_rows[r20] = r26;
        workgroupBarrier();
        for (r29 = 0u; r29 < 8u; r29 = r29 + 1u) {
            r30 = 0u;
            r31 = tile_words[r19];
            r32 = tile_rows[r19];
            r33 = (r31 >> (bitcast<u32>(r29) & 31u));
            r34 = (r33 & 1u);
            r35 = (1u - r34);
            r30 = (r30 + r35);
            r36 = tile_words[r20];
            r37 = tile_rows[r20];
            r38 = (r36 >> (bitcast<u32>(r29) & 31u));
            r39 = (r38 & 1u);
            r40 = (1u - r39);
            r30 = (r30 + r40);
            zeros[r5] = r30;
            workgroupBarrier();
            for (r41 = 0u; r41 < 8u; r41 = r41 + 1u) {
                r42 = (1u << (bitcast<u32>(r41) & 31u));
                r43 = zeros[r5];
                r44 = (r5 >= r42);
                r45 = (r5 - r42);
                r46 = select(0u, r45, r44);
                r47 = zeros[r46];
                r48 = select(0u, r47, r44);
                r49 = (r43 + r48);
                workgroupBarrier();
                zeros[r5] = r49;
                workgroupBarrier();
            }
            r50 = zeros[r5];
            r51 = zeros[255u];
            r52 = (r50 - r30);
            r53 = (r19 - r52);
            r54 = (r51 + r53);
            r55 = (r34 != 0u);
            r56 = select(r52, r54, r55);
            tile_words[r56] = r31;
            tile_rows[r56] = r32;
            r52 = (r52 + r35);
            r57 = (r20 - r52);
            r58 = (r51 + r57);
            r59 = (r39 != 0u);
            r60 = select(r52, r58, r59);
            tile_words[r60] = r36;
            tile_rows[r60] = r37;
            r52 = (r52 + r40);
            workgroupBarrier();
        }
        r61 = (r19 < r18);
        r62 = tile_words[r19];
        r63 = (r62 >> (bitcast<u32>(0u) & 31u));
        r64 = (r63 & 255u);
        r65 = (r19 > 0u);
        r66 = (r19 - 1u);
        r67 = select(0u, r66, r65);
        r68 = tile_words[r67];
        r69 = (r68 >> (bitcast<u32>(0u) & 31u));
        r70 = (r69 & 255u);
        r71 = (r70 != r64);
        r72 = (r19 == 0u);
        r73 = (r72 | r71);
        r74 = (r73 & r61);
        if (r74) {
            firsts[r64] = r19;
        }
        r75 = (r20 < r18);
        r76 = tile_words[r20];
        r77 = (r76 >> (bitcast<u32>(0u) & 31u));
        r78 = (r77 & 255u);
        r79 = (r20 > 0u);
        r80 = (r20 - 1u);
        r81 = select(0u, r80, r79);
        r82 = tile_words[r81];
        r83 = (r82 >> (bitcast<u32>(0u) & 31u));
        r84 = (r83 & 255u);
        r85 = (r84 != r78);
        r86 = (r20 == 0u);
        r87 = (r86 | r85);
        r88 = (r87 & r75);
        if (r88) {
            firsts[r78] = r20;
        }
        workgroupBarrier();
        if (r61) {
            r89 = runs[r64];
            r90 = firsts[r64];
            r91 = (r19 - r90);
            r92 = (r89 + r91);
            words_out[r92] = r62;
            r93 = tile_rows[r19];
            rows_out[r92] = r93;
        }
        if (r75) {
            r94 = runs[r78];
            r95 = firsts[r78];
            r96 = (r20 - r95);
            r97 = (r94 + r96);
            words_out[r97] = r76;
            r98 = tile_rows[r20];
            rows_out[r97] = r98;
        }
        workgroupBarrier();
        r99 = (r19 + 1u);
        r100 = (r99 == r18);
        r101 = (r18 - 1u);
        r102 = min(r99, r101);
        r103 = tile_words[r102];
        r104 = (r103 >> (bitcast<u32>(0u) & 31u));
        r105 = (r104 & 255u);
        r106 = (r105 != r64);
        r107 = (r100 | r106);
        r108 = (r107 & r61);
        if (r108) {
            r109 = runs[r64];
            r110 = firsts[r64];
            r111 = (r99 - r110);
            r112 = (r109 + r111);
            runs[r64] = r112;
        }
        r113 = (r20 + 1u);
        r114 = (r113 == r18);
        r115 = (r18 - 1u);
        r116 = min(r113, r115);
        r117 = tile_words[r116];
        r118 = (r117 >> (bitcast<u32>(0u) & 31u));
        r119 = (r118 & 255u);
        r120 = (r119 != r78);
        r121 = (r114 | r120);
        r122 = (r121 & r75);
        if (r122) {
            r123 = runs[r78];
            r124 = firsts[r78];
            r125 = (r113 - r124);
            r126 = (r123 + r125);
            runs[r78] = r126;
        }
        workgroupBarrier();
    }
}
