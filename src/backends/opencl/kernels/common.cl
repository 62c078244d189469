// Shared by every kernel file (concatenated first). Tensors travel as a buffer
// plus an element offset, because Tensor views are (base, byte offset) pairs.
// Contraction to fma is off so that sums done in the CPU backend's order give
// the CPU backend's bits (the DSA top-k depends on exact ties).
#pragma OPENCL FP_CONTRACT OFF

#define WG 64  // work-group size of the reducing kernels (host uses the same)

// Values of anymoe::DType (core/dtype.h).
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_Q8_0 3
#define DT_Q4_0 4
#define DT_Q4_1 5
#define DT_Q4_K 6
#define DT_Q5_K 7
#define DT_Q6_K 8
#define DT_Q2_K 10
#define DT_Q3_K 11
#define DT_Q5_0 12
#define DT_Q5_1 13
#define DT_IQ1_S 14
#define DT_IQ1_M 15
#define DT_IQ2_XXS 16
#define DT_IQ2_XS 17
#define DT_IQ2_S 18
#define DT_IQ3_XXS 19
#define DT_IQ3_S 20
#define DT_IQ4_XS 21
#define DT_IQ4_NL 22
#define DT_MXFP4 23
#define DT_F8_E4M3 24
#define DT_F8_E5M2 25

// Codebook rows of the i-quants (iq_grids.cl, generated): byte j of a row is
// value j (int8 for IQ1's {-1, 0, 1}).
ulong grid_row_iq1s(uint i);
ulong grid_row_iq2xxs(uint i);
ulong grid_row_iq2xs(uint i);
ulong grid_row_iq2s(uint i);
uint grid_row_iq3xxs(uint i);
uint grid_row_iq3s(uint i);

// The 16 levels of IQ4_NL / IQ4_XS (core/iquant_blocks.cc).
constant char kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};

float half_at(global const uchar* p) { return vload_half(0, (global const half*)p); }

// An f16 given by its bits (IQ1_M spreads its scale over four words).
float half_bits(ushort bits) {
  const ushort b = bits;
  return vload_half(0, (const half*)&b);
}

uint u16_at(global const uchar* p) { return (uint)p[0] | ((uint)p[1] << 8); }

// The 8 signs of a group from a 7-bit pattern: the eighth makes the number of
// negative values even (IQ2_XXS / IQ2_XS / IQ3_XXS).
uint even_signs(uint pattern7) { return pattern7 | (popcount(pattern7) & 1) << 7; }

// IQ1 value j of a codebook row: dl * (value + delta), value in {-1, 0, 1}.
float iq1_value(float dl, float delta, ulong row, int j) {
  return dl * ((float)(char)((row >> (8 * j)) & 255) + delta);
}

// MXFP4's e2m1 values, doubled so that they are integers (the scale is halved).
constant char kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float bf16_at(global const uchar* p) {
  const uint bits = (uint)p[0] | ((uint)p[1] << 8);
  return as_float(bits << 16);
}

// FP8 values as core/dtype.cc's F8E4M3ToF32 / F8E5M2ToF32 build them (exact).
float f8e4m3(uchar v) {
  const uint sign = (uint)(v >> 7) << 31, e = (v >> 3) & 15, m = v & 7;
  if (e == 15 && m == 7) return as_float(sign | 0x7fc00000u);  // the NaN
  const float mag = e == 0 ? (float)m * 0x1p-9f : as_float((e + 120) << 23 | m << 20);
  return sign ? -mag : mag;
}

// E5M2: the top byte of an f16, widened as F16ToF32 widens it.
float f8e5m2(uchar v) {
  const uint sign = (uint)(v >> 7) << 31, e = (v >> 2) & 31, m = v & 3;
  if (e == 31) return as_float(sign | 0x7f800000u | m << 21);  // inf, NaN
  const float mag = e == 0 ? (float)m * 0x1p-16f : as_float((e + 112) << 23 | m << 21);
  return sign ? -mag : mag;
}

// Row r's block scales of an FP8 weight: grid row (first + r) / s_rows of
// s_stride floats (see device::WeightScales; unread when the weight has none).
global const float* scale_row(global const float* s, int s_rows, int s_stride, int first, int r) {
  return s + (ulong)((first + r) / s_rows) * s_stride;
}

uint u32_at(global const uchar* p) {
  return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

// Value i of a q5_0 / q5_1 block: nibble i % 16 of qs (low for i < 16), fifth
// bit i of the word qh.
int q5_value(global const uchar* qs, uint qh, int i) {
  const int nibble = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
  return nibble | (int)((qh >> i) & 1) << 4;
}

// Scale and min of sub-block j (of 8) from the 12 packed bytes of q4_k / q5_k.
void k_scale_min(global const uchar* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 2) & 48);
    *m = (s[j + 4] >> 4) | ((s[j] >> 2) & 48);
  }
}

// Element e (of 256) of a super-block of the k-quants and 256-element
// i-quants, with the CPU dequantisers' operations in their order
// (core/quant_blocks.cc, core/iquant_blocks.cc), so values match bit for bit.
float super_block_at(global const uchar* b, int dtype, int e) {
  switch (dtype) {
    case DT_Q2_K: {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const float dl = half_at(b + 80) * (float)(b[e / 16] & 15);
      const float ml = half_at(b + 82) * (float)(b[e / 16] >> 4);
      return dl * (float)((b[16 + 32 * h + l] >> (2 * s)) & 3) - ml;
    }
    case DT_Q3_K: {
      global const uchar* sc = b + 96;
      const int j = e / 16;
      const int low = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
      const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
      const float dl = half_at(b + 108) * (float)((char)(low | high << 4) - 32);
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q2 = (b[32 + 32 * h + l] >> (2 * s)) & 3;
      const int hbit = (b[e % 32] >> (e / 32)) & 1;
      return dl * (float)(q2 - ((hbit ^ 1) << 2));
    }
    case DT_Q4_K:
    case DT_Q5_K: {
      const int j = e / 32, l = e % 32;
      int sc, m;
      k_scale_min(b + 4, j, &sc, &m);
      const float dl = half_at(b) * (float)sc;
      const float ml = half_at(b + 2) * (float)m;
      global const uchar* qs = b + (dtype == DT_Q4_K ? 16 : 48);
      int v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if (dtype == DT_Q5_K) v |= ((b[16 + l] >> j) & 1) << 4;
      return dl * (float)v - ml;
    }
    case DT_Q6_K: {
      const int hb = e / 128, in_half = e % 128;
      const int lo = (b[64 * hb + in_half % 64] >> (4 * (in_half / 64))) & 15;
      const int hi = (b[128 + 32 * hb + in_half % 32] >> (2 * (in_half / 32))) & 3;
      const float dl = half_at(b + 208) * (float)((char)b[192 + e / 16]);
      return dl * (float)((lo | (hi << 4)) - 32);
    }
    case DT_IQ4_XS: {
      const int ib = e / 32, i = e % 32;
      const uint scales_h = (uint)b[2] | ((uint)b[3] << 8);
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((scales_h >> (2 * ib)) & 3) << 4;
      const float dl = half_at(b) * (float)(ls - 32);
      global const uchar* qs = b + 8 + 16 * ib;
      return dl * (float)kIq4Levels[i < 16 ? qs[i] & 15 : qs[i - 16] >> 4];
    }
    case DT_IQ2_XXS: {
      global const uchar* q = b + 2 + 8 * (e / 32);
      const uint aux = u32_at(q + 4);
      const float db = half_at(b) * (0.5f + (float)(aux >> 28)) * 0.25f;
      const int l = (e % 32) / 8, jj = e % 8;
      const uint signs = even_signs((aux >> (7 * l)) & 127);
      const float v = db * (float)((grid_row_iq2xxs(q[l]) >> (8 * jj)) & 255);
      return (signs >> jj) & 1 ? -v : v;
    }
    case DT_IQ2_XS: {
      const int g = e / 8, jj = e % 8;
      const uint q = u16_at(b + 2 + 2 * g);
      const int s = (b[66 + g / 4] >> (4 * ((g / 2) % 2))) & 15;
      const float db = half_at(b) * (0.5f + (float)s) * 0.25f;
      const float v = db * (float)((grid_row_iq2xs(q & 511) >> (8 * jj)) & 255);
      return (even_signs(q >> 9) >> jj) & 1 ? -v : v;
    }
    case DT_IQ2_S: {
      const int g = e / 8, jj = e % 8;
      const uint index = b[2 + g] | ((b[66 + g / 4] >> (2 * (g % 4))) & 3) << 8;
      const int s = (b[74 + g / 4] >> (4 * ((g / 2) % 2))) & 15;
      const float db = half_at(b) * (0.5f + (float)s) * 0.25f;
      const float v = db * (float)((grid_row_iq2s(index) >> (8 * jj)) & 255);
      return (b[34 + g] >> jj) & 1 ? -v : v;
    }
    case DT_IQ3_XXS: {
      const int ib = e / 32, l = (e % 32) / 8, jj = e % 8;
      const uint aux = u32_at(b + 66 + 4 * ib);
      const float db = half_at(b) * (0.5f + (float)(aux >> 28)) * 0.5f;
      const uint row = grid_row_iq3xxs(b[2 + 8 * ib + 2 * l + jj / 4]);
      const float v = db * (float)((row >> (8 * (jj % 4))) & 255);
      return (even_signs((aux >> (7 * l)) & 127) >> jj) & 1 ? -v : v;
    }
    case DT_IQ3_S: {
      const int ib = e / 32, l = (e % 32) / 8, jj = e % 8;
      const int s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 15;
      const float db = half_at(b) * (float)(1 + 2 * s);
      const int k = 8 * ib + 2 * l + jj / 4;
      const uint row = grid_row_iq3s(b[2 + k] | ((b[66 + k / 8] >> (k % 8)) & 1) << 8);
      const float v = db * (float)((row >> (8 * (jj % 4))) & 255);
      return (b[74 + 4 * ib + l] >> jj) & 1 ? -v : v;
    }
    case DT_IQ1_S: {
      const int ib = e / 32, l = (e % 32) / 8;
      const uint h = u16_at(b + 34 + 2 * ib);
      const float dl = half_at(b) * (float)(2 * ((h >> 12) & 7) + 1);
      const float delta = h & 0x8000 ? -0.125f : 0.125f;
      return iq1_value(dl, delta, grid_row_iq1s(b[2 + 4 * ib + l] | ((h >> (3 * l)) & 7) << 8),
                       e % 8);
    }
    case DT_IQ1_M: {
      const int g = e / 8;
      const uint s0 = u16_at(b + 48), s1 = u16_at(b + 50), s2 = u16_at(b + 52),
                 s3 = u16_at(b + 54);
      const float d = half_bits((ushort)((s0 >> 12) | ((s1 >> 8) & 0x00f0) |
                                         ((s2 >> 4) & 0x0f00) | (s3 & 0xf000)));
      const uint sc = u16_at(b + 48 + 2 * (g / 8));
      const float dl = d * (float)(2 * ((sc >> (3 * ((g / 2) % 4))) & 7) + 1);
      const int nibble = (b[32 + g / 2] >> (4 * (g % 2))) & 15;
      const float delta = nibble & 8 ? -0.125f : 0.125f;
      return iq1_value(dl, delta, grid_row_iq1s(b[g] | (nibble & 7) << 8), e % 8);
    }
  }
  return NAN;
}

// Bytes of one block of a quantised dtype (of 32 or 256 elements).
int block_bytes(int dtype) {
  switch (dtype) {
    case DT_Q8_0: return 34;
    case DT_Q4_0: return 18;
    case DT_Q4_1: return 20;
    case DT_Q5_0: return 22;
    case DT_Q5_1: return 24;
    case DT_IQ4_NL: return 18;
    case DT_Q2_K: return 84;
    case DT_Q3_K: return 110;
    case DT_Q4_K: return 144;
    case DT_Q5_K: return 176;
    case DT_Q6_K: return 210;
    case DT_IQ1_S: return 50;
    case DT_IQ1_M: return 56;
    case DT_IQ2_XXS: return 66;
    case DT_IQ2_XS: return 74;
    case DT_IQ2_S: return 82;
    case DT_IQ3_XXS: return 98;
    case DT_IQ3_S: return 110;
    case DT_IQ4_XS: return 136;
  }
  return 0;
}

// Element j of a weight row of the given dtype.
float weight_at(global const uchar* row, int dtype, int j) {
  switch (dtype) {
    case DT_Q2_K:
    case DT_Q3_K:
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_Q6_K:
    case DT_IQ1_S:
    case DT_IQ1_M:
    case DT_IQ2_XXS:
    case DT_IQ2_XS:
    case DT_IQ2_S:
    case DT_IQ3_XXS:
    case DT_IQ3_S:
    case DT_IQ4_XS:
      return super_block_at(row + block_bytes(dtype) * (j / 256), dtype, j % 256);
    case DT_MXFP4: {  // scale 2^(e - 127) halved, built from its bits; e2m1 nibbles
      global const uchar* b = row + 17 * (j / 32);
      const uint e = b[0];
      const float d = as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
      const int i = j % 32;
      return d * (float)kE2M1Doubled[i < 16 ? b[1 + i] & 15 : b[1 + i - 16] >> 4];
    }
    case DT_Q5_0: {
      global const uchar* b = row + 22 * (j / 32);
      return half_at(b) * (float)(q5_value(b + 6, u32_at(b + 2), j % 32) - 16);
    }
    case DT_Q5_1: {
      global const uchar* b = row + 24 * (j / 32);
      return half_at(b) * (float)q5_value(b + 8, u32_at(b + 4), j % 32) + half_at(b + 2);
    }
    case DT_IQ4_NL: {
      global const uchar* b = row + 18 * (j / 32);
      const int i = j % 32;
      return half_at(b) * (float)kIq4Levels[i < 16 ? b[2 + i] & 15 : b[2 + i - 16] >> 4];
    }
    case DT_F8_E4M3: return f8e4m3(row[j]);  // before its block scale
    case DT_F8_E5M2: return f8e5m2(row[j]);
    case DT_F32: return *(global const float*)(row + 4 * j);
    case DT_F16: return half_at(row + 2 * j);
    case DT_BF16: return bf16_at(row + 2 * j);
    case DT_Q8_0: {
      global const uchar* b = row + 34 * (j / 32);
      return half_at(b) * (float)((char)b[2 + j % 32]);
    }
    case DT_Q4_0: {
      global const uchar* b = row + 18 * (j / 32);
      const int i = j % 32;
      const int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
      return half_at(b) * (float)(q - 8);
    }
    case DT_Q4_1: {
      global const uchar* b = row + 20 * (j / 32);
      const int i = j % 32;
      const int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
      return half_at(b) * (float)q + half_at(b + 2);
    }
  }
  return NAN;
}

// Sum over lanes of a work-group of WG items; every lane gets the result.
float group_sum(float v, local float* red) {
  const int l = get_local_id(0);
  red[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (l < s) red[l] += red[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}
