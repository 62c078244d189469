// The portable kernels' weights of the low-bit GGUF types (q5_0, q5_1, q2_k,
// q3_k, iq4_nl, iq4_xs, iq2_xxs, mxfp4): a chunk of a weight row unpacked to
// int16 values with one f32 scale (and, for q5_1, the min as the coefficient
// of the activation block sum) per block of 32, for the int16 dot of
// quant_matmul.cc (Int16Source). The k-quants' scales per 16 values fold into
// the integers. Where a target has no faster kernel (x86 without AVX2, ARM:
// all of them under qemu) these run; the x86 ones are in
// quant_matmul_x86_blocks-inl.h. Included by quant_matmul.cc inside every
// target's namespace.
//
// q2_k's mins (dmin x min per 16 values) need the activations' sums per 16,
// which the activation buffer does not hold: its second pass multiplies the
// mins, spread over their 16 values, as one more int16 row with scale -dmin.

namespace unpack {

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 16 non-linear levels of iq4_nl / iq4_xs, and MXFP4's doubled e2m1 values.
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};
constexpr int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 32 values from 16 bytes of 4-bit codes (low nibbles 0..15, high 16..31).
HWY_INLINE void Levels32(const uint8_t* qs, const int8_t* levels, int16_t* q) {
  for (int i = 0; i < 16; ++i) {
    q[i] = levels[qs[i] & 0x0f];
    q[i + 16] = levels[qs[i] >> 4];
  }
}

// q5_0 (code - 16, d) and q5_1 (code, d, min m as cw).
template <bool kMin>
void Q5(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  constexpr size_t kBytes = kMin ? 24 : 22, kHigh = kMin ? 4 : 2;
  constexpr int kOffset = kMin ? 0 : 16;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + size_t(blk0 + b) * kBytes;
    c->h[b] = LoadU16(blk);
    if constexpr (kMin) c->h2[b] = LoadU16(blk + 2);
    const uint32_t qh = LoadU32(blk + kHigh);
    const uint8_t* qs = blk + kHigh + 4;
    int16_t* q = c->q16 + kQ * b;
    for (int i = 0; i < 16; ++i) {
      q[i] = int16_t(((qs[i] & 0x0f) | ((qh >> i) & 1) << 4) - kOffset);
      q[i + 16] = int16_t(((qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) - kOffset);
    }
  }
  F16ToF32Array(c->h, c->dw, nb);
  if constexpr (kMin) F16ToF32Array(c->h2, c->cw, nb);
  c->has_cw = kMin;
}

// iq4_nl (f16 d) and mxfp4 (e8m0 exponent: 2^(e - 127), halved for the doubled
// values, subnormal for e < 2 as the reference builds it).
template <bool kE8M0>
void Levels(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  constexpr size_t kBytes = kE8M0 ? 17 : 18;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + size_t(blk0 + b) * kBytes;
    if constexpr (kE8M0) {
      const uint32_t e = blk[0];
      c->dw[b] = std::bit_cast<float>(e < 2 ? uint32_t(0x00200000) << e : (e - 1) << 23);
    } else {
      c->h[b] = LoadU16(blk);
    }
    Levels32(blk + kBytes - 16, kE8M0 ? kE2M1Doubled : kIq4Levels, c->q16 + kQ * b);
  }
  if constexpr (!kE8M0) F16ToF32Array(c->h, c->dw, nb);
  c->has_cw = false;
}

// iq4_xs: d (ls - 32) per block of 32, the levels as they are.
void Iq4Xs(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = row + size_t((blk0 + b) / 8) * 136;
    const int j = int((blk0 + b) % 8);
    const int ls = ((super[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | ((LoadU16(super + 2) >> (2 * j)) & 3) << 4;
    c->dw[b] = F16ToF32(LoadU16(super)) * float(ls - 32);
    Levels32(super + 8 + 16 * j, kIq4Levels, c->q16 + kQ * b);
  }
  c->has_cw = false;
}

// iq2_xxs: the grid values with their signs, d (0.5 + s) / 4 per block of 32.
void Iq2Xxs(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = row + size_t((blk0 + b) / 8) * 66;
    const uint8_t* q = super + 2 + 8 * ((blk0 + b) % 8);
    const uint32_t aux = LoadU32(q + 4);
    c->dw[b] = F16ToF32(LoadU16(super)) * (0.5f + float(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const uint64_t grid = kIq2xxsGrid[q[l]];
      uint32_t signs = (aux >> (7 * l)) & 127;
      signs |= uint32_t(std::popcount(signs) & 1) << 7;
      for (int i = 0; i < 8; ++i) {
        const int v = int((grid >> (8 * i)) & 0xff);
        c->q16[kQ * b + 8 * l + i] = int16_t((signs >> i) & 1 ? -v : v);
      }
    }
  }
  c->has_cw = false;
}

// The 2-bit code of value l of block j of a q2_k / q3_k super-block.
HWY_INLINE int TwoBitCode(const uint8_t* qs, int j, int l) {
  return (qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
}

// q3_k: (scale - 32) (code - 4), d per block.
void Q3_K(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = row + size_t((blk0 + b) / 8) * 110;
    const uint8_t* sc = super + 96;
    const int j = int((blk0 + b) % 8);
    for (int l = 0; l < kQ; ++l) {
      const int sub = 2 * j + l / 16;
      const int low4 = sub < 8 ? sc[sub] & 0x0f : sc[sub - 8] >> 4;
      const int scale = (low4 | ((sc[8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4) - 32;
      const int code = TwoBitCode(super + 32, j, l) | ((super[l] >> j) & 1) << 2;
      c->q16[kQ * b + l] = int16_t(scale * (code - 4));
    }
    c->dw[b] = F16ToF32(LoadU16(super + 108));
  }
  c->has_cw = false;
}

// q2_k, pass 0: scale x code with d; pass 1: the min of each value's 16 with -dmin.
void Q2_K(const uint8_t* row, int64_t blk0, int64_t nb, int pass, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = row + size_t((blk0 + b) / 8) * 84;
    const int j = int((blk0 + b) % 8);
    for (int l = 0; l < kQ; ++l) {
      const int sm = super[2 * j + l / 16];
      c->q16[kQ * b + l] = int16_t(pass == 0 ? (sm & 0x0f) * TwoBitCode(super + 16, j, l) : sm >> 4);
    }
    const float d = F16ToF32(LoadU16(super + (pass == 0 ? 80 : 82)));
    c->dw[b] = pass == 0 ? d : -d;
  }
  c->has_cw = false;
}

// How many int16 passes `type` takes here (0: not one of these types).
inline int Passes(DType type) {
  switch (type) {
    case DType::kQ2_K:
      return 2;
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ3_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kIQ2_XXS:
    case DType::kMXFP4:
      return 1;
    default:
      return 0;
  }
}

// Pass `pass` of blocks [blk0, blk0 + nb) of `row` into c.
inline void Chunk(DType type, const uint8_t* row, int64_t blk0, int64_t nb, int pass,
                  WeightChunk* c) {
  switch (type) {
    case DType::kQ5_0: return Q5<false>(row, blk0, nb, c);
    case DType::kQ5_1: return Q5<true>(row, blk0, nb, c);
    case DType::kQ2_K: return Q2_K(row, blk0, nb, pass, c);
    case DType::kQ3_K: return Q3_K(row, blk0, nb, c);
    case DType::kIQ4_NL: return Levels<false>(row, blk0, nb, c);
    case DType::kIQ4_XS: return Iq4Xs(row, blk0, nb, c);
    case DType::kIQ2_XXS: return Iq2Xxs(row, blk0, nb, c);
    case DType::kMXFP4: return Levels<true>(row, blk0, nb, c);
    default: CHECK(false && "quant matmul: unsupported weight type");
  }
}

}  // namespace unpack
