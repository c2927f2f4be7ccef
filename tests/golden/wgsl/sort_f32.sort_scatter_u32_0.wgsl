// computeq kernel `sort_scatter_u32_0`
struct Uniforms {
    len: u32,
    span: u32,
    groups: u32,
    off0: u32,
}
@group(0) @binding(3) var<uniform> u: Uniforms;
@group(0) @binding(0) var<storage, read> words_in: array<u32>;
@group(0) @binding(1) var<storage, read_write> words_out: array<u32>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
var<workgroup> tile_words: array<u32, 512>;
var<workgroup> zeros: array<u32, 256>;
var<workgroup> runs: array<u32, 256>;
var<workgroup> firsts: array<u32, 256>;

@compute @workgroup_size(256)
fn sort_scatter_u32_0(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>) {
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
    var r22: bool;
    var r23: u32;
    var r24: u32;
    var r25: u32;
    var r26: bool;
    var r27: u32;
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
    var r41: bool;
    var r42: u32;
    var r43: u32;
    var r44: u32;
    var r45: u32;
    var r46: u32;
    var r47: u32;
    var r48: u32;
    var r49: u32;
    var r50: u32;
    var r51: u32;
    var r52: bool;
    var r53: u32;
    var r54: u32;
    var r55: u32;
    var r56: bool;
    var r57: u32;
    var r58: bool;
    var r59: u32;
    var r60: u32;
    var r61: u32;
    var r62: bool;
    var r63: u32;
    var r64: u32;
    var r65: u32;
    var r66: u32;
    var r67: u32;
    var r68: bool;
    var r69: bool;
    var r70: bool;
    var r71: bool;
    var r72: bool;
    var r73: u32;
    var r74: u32;
    var r75: u32;
    var r76: bool;
    var r77: u32;
    var r78: u32;
    var r79: u32;
    var r80: u32;
    var r81: u32;
    var r82: bool;
    var r83: bool;
    var r84: bool;
    var r85: bool;
    var r86: u32;
    var r87: u32;
    var r88: u32;
    var r89: u32;
    var r90: u32;
    var r91: u32;
    var r92: u32;
    var r93: u32;
    var r94: u32;
    var r95: bool;
    var r96: u32;
    var r97: u32;
    var r98: u32;
    var r99: u32;
    var r100: u32;
    var r101: bool;
    var r102: bool;
    var r103: bool;
    var r104: u32;
    var r105: u32;
    var r106: u32;
    var r107: u32;
    var r108: u32;
    var r109: bool;
    var r110: u32;
    var r111: u32;
    var r112: u32;
    var r113: u32;
    var r114: u32;
    var r115: bool;
    var r116: bool;
    var r117: bool;
    var r118: u32;
    var r119: u32;
    var r120: u32;
    var r121: u32;
    r0 = u.len;
    r1 = u.span;
    r2 = u.groups;
    r3 = u.off0;
    r4 = lid.x;
    r5 = wid.x;
    r6 = (r5 * 256u);
    for (r7 = r4; r7 < 256u; r7 = r7 + 256u) {
        r8 = (r6 + r7);
        r9 = starts[r8];
        runs[r7] = r9;
    }
    workgroupBarrier();
    r10 = (r5 * r1);
    r11 = min(r10, r0);
    r12 = (r11 + r1);
    r13 = min(r12, r0);
    r14 = (r4 * 2u);
    for (r15 = r11; r15 < r13; r15 = r15 + 512u) {
        r16 = (r13 - r15);
        r17 = min(r16, 512u);
        r18 = (r14 + 0u);
        r19 = (r14 + 1u);
        r20 = 4294967295u;
        r21 = 0u;
        r22 = (r18 < r17);
        if (r22) {
            r23 = (r15 + r18);
            r20 = words_in[r23];
        }
        tile_words[r18] = r20;
        r24 = 4294967295u;
        r25 = 0u;
        r26 = (r19 < r17);
        if (r26) {
            r27 = (r15 + r19);
            r24 = words_in[r27];
        }
        tile_words[r19] = r24;
        workgroupBarrier();
        for (r28 = 0u; r28 < 8u; r28 = r28 + 1u) {
            r29 = 0u;
            r30 = tile_words[r18];
            r31 = (r30 >> (bitcast<u32>(r28) & 31u));
            r32 = (r31 & 1u);
            r33 = (1u - r32);
            r29 = (r29 + r33);
            r34 = tile_words[r19];
            r35 = (r34 >> (bitcast<u32>(r28) & 31u));
            r36 = (r35 & 1u);
            r37 = (1u - r36);
            r29 = (r29 + r37);
            zeros[r4] = r29;
            workgroupBarrier();
            for (r38 = 0u; r38 < 8u; r38 = r38 + 1u) {
                r39 = (1u << (bitcast<u32>(r38) & 31u));
                r40 = zeros[r4];
                r41 = (r4 >= r39);
                r42 = (r4 - r39);
                r43 = select(0u, r42, r41);
                r44 = zeros[r43];
                r45 = select(0u, r44, r41);
                r46 = (r40 + r45);
                workgroupBarrier();
                zeros[r4] = r46;
                workgroupBarrier();
            }
            r47 = zeros[r4];
            r48 = zeros[255u];
            r49 = (r47 - r29);
            r50 = (r18 - r49);
            r51 = (r48 + r50);
            r52 = (r32 != 0u);
            r53 = select(r49, r51, r52);
            tile_words[r53] = r30;
            r49 = (r49 + r33);
            r54 = (r19 - r49);
            r55 = (r48 + r54);
            r56 = (r36 != 0u);
            r57 = select(r49, r55, r56);
            tile_words[r57] = r34;
            r49 = (r49 + r37);
            workgroupBarrier();
        }
        r58 = (r18 < r17);
        r59 = tile_words[r18];
        r60 = (r59 >> (bitcast<u32>(0u) & 31u));
        r61 = (r60 & 255u);
        r62 = (r18 > 0u);
        r63 = (r18 - 1u);
        r64 = select(0u, r63, r62);
        r65 = tile_words[r64];
        r66 = (r65 >> (bitcast<u32>(0u) & 31u));
        r67 = (r66 & 255u);
        r68 = (r67 != r61);
        r69 = (r18 == 0u);
        r70 = (r69 | r68);
        r71 = (r70 & r58);
        if (r71) {
            firsts[r61] = r18;
        }
        r72 = (r19 < r17);
        r73 = tile_words[r19];
        r74 = (r73 >> (bitcast<u32>(0u) & 31u));
        r75 = (r74 & 255u);
        r76 = (r19 > 0u);
        r77 = (r19 - 1u);
        r78 = select(0u, r77, r76);
        r79 = tile_words[r78];
        r80 = (r79 >> (bitcast<u32>(0u) & 31u));
        r81 = (r80 & 255u);
        r82 = (r81 != r75);
        r83 = (r19 == 0u);
        r84 = (r83 | r82);
        r85 = (r84 & r72);
        if (r85) {
            firsts[r75] = r19;
        }
        workgroupBarrier();
        if (r58) {
            r86 = runs[r61];
            r87 = firsts[r61];
            r88 = (r18 - r87);
            r89 = (r86 + r88);
            words_out[r89] = r59;
        }
        if (r72) {
            r90 = runs[r75];
            r91 = firsts[r75];
            r92 = (r19 - r91);
            r93 = (r90 + r92);
            words_out[r93] = r73;
        }
        workgroupBarrier();
        r94 = (r18 + 1u);
        r95 = (r94 == r17);
        r96 = (r17 - 1u);
        r97 = min(r94, r96);
        r98 = tile_words[r97];
        r99 = (r98 >> (bitcast<u32>(0u) & 31u));
        r100 = (r99 & 255u);
        r101 = (r100 != r61);
        r102 = (r95 | r101);
        r103 = (r102 & r58);
        if (r103) {
            r104 = runs[r61];
            r105 = firsts[r61];
            r106 = (r94 - r105);
            r107 = (r104 + r106);
            runs[r61] = r107;
        }
        r108 = (r19 + 1u);
        r109 = (r108 == r17);
        r110 = (r17 - 1u);
        r111 = min(r108, r110);
        r112 = tile_words[r111];
        r113 = (r112 >> (bitcast<u32>(0u) & 31u));
        r114 = (r113 & 255u);
        r115 = (r114 != r75);
        r116 = (r109 | r115);
        r117 = (r116 & r72);
        if (r117) {
            r118 = runs[r75];
            r119 = firsts[r75];
            r120 = (r108 - r119);
            r121 = (r118 + r120);
            runs[r75] = r121;
        }
        workgroupBarrier();
    }
}
