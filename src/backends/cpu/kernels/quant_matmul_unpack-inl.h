// The portable kernels' weights of the low-bit GGUF types (q5_0, q5_1, q2_k,
// q3_k, q5_k, iq4_nl, iq4_xs, the codebook i-quants iq1_s / iq1_m / iq2_xxs /
// iq2_xs / iq2_s / iq3_xxs / iq3_s, mxfp4): a chunk of a weight row unpacked to
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

// The 8 signs of a group from a 7-bit pattern, the eighth making the count of
// negatives even (iq2_xxs, iq2_xs, iq3_xxs): bit i set where value i is negative.
inline uint32_t EvenSigns(uint32_t pattern7) {
  return pattern7 | uint32_t(std::popcount(pattern7) & 1) << 7;
}

// The 8 magnitudes of a codebook row (value i in byte i) times `scale`, with
// value i negated where bit i of `signs` is set.
HWY_INLINE void SignedGroup8(uint64_t row, uint32_t signs, int scale, int16_t* q) {
  for (int i = 0; i < 8; ++i) {
    const int v = int((row >> (8 * i)) & 0xff) * scale;
    q[i] = int16_t((signs >> i) & 1 ? -v : v);
  }
}

// The super-block of `bytes` bytes that holds block blk (of 32) of a row.
HWY_INLINE const uint8_t* SuperOf(const uint8_t* row, int64_t blk, size_t bytes) {
  return row + size_t(blk / 8) * bytes;
}

// iq2_xxs: the grid values with their signs, d (0.5 + s) / 4 per block of 32.
void Iq2Xxs(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 66);
    const uint8_t* q = super + 2 + 8 * ((blk0 + b) % 8);
    const uint32_t aux = LoadU32(q + 4);
    c->dw[b] = F16ToF32(LoadU16(super)) * (0.5f + float(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      SignedGroup8(kIq2xxsGrid[q[l]], EvenSigns((aux >> (7 * l)) & 127), 1,
                   c->q16 + kQ * b + 8 * l);
    }
  }
  c->has_cw = false;
}

// The 4-bit scale s of group g (of 8) of an iq2_xs / iq2_s super-block, one
// per 16 values: the value is d (0.5 + s) / 4 x grid, here the integer
// (2 s + 1) x grid with d / 8 per block.
HWY_INLINE int Iq2OddScale(const uint8_t* scales, int g) {
  return 2 * ((scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0f) + 1;
}

// iq2_xs: u16 per group of a 9-bit codebook index and a 7-bit sign pattern.
void Iq2Xs(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 74);
    const int j = int((blk0 + b) % 8);
    c->dw[b] = F16ToF32(LoadU16(super)) * 0.125f;
    for (int l = 0; l < 4; ++l) {
      const int g = 4 * j + l;
      const uint32_t q = LoadU16(super + 2 + 2 * g);
      SignedGroup8(kIq2xsGrid[q & 511], EvenSigns(q >> 9), Iq2OddScale(super + 66, g),
                   c->q16 + kQ * b + 8 * l);
    }
  }
  c->has_cw = false;
}

// iq2_s: low index bytes, sign bytes, 2 high index bits per group.
void Iq2S(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 82);
    const int j = int((blk0 + b) % 8);
    c->dw[b] = F16ToF32(LoadU16(super)) * 0.125f;
    for (int l = 0; l < 4; ++l) {
      const int g = 4 * j + l;
      const int index = super[2 + g] | ((super[66 + j] >> (2 * l)) & 3) << 8;
      SignedGroup8(kIq2sGrid[index], super[34 + g], Iq2OddScale(super + 74, g),
                   c->q16 + kQ * b + 8 * l);
    }
  }
  c->has_cw = false;
}

// iq3_xxs: two 4-value codebook rows per group, 7-bit sign patterns and a
// 4-bit scale per block: d (0.5 + s) / 2.
void Iq3Xxs(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 98);
    const int j = int((blk0 + b) % 8);
    const uint32_t aux = LoadU32(super + 66 + 4 * j);
    c->dw[b] = F16ToF32(LoadU16(super)) * (0.5f + float(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t* q = super + 2 + 8 * j + 2 * l;
      SignedGroup8(uint64_t(kIq3xxsGrid[q[0]]) | uint64_t(kIq3xxsGrid[q[1]]) << 32,
                   EvenSigns((aux >> (7 * l)) & 127), 1, c->q16 + kQ * b + 8 * l);
    }
  }
  c->has_cw = false;
}

// iq3_s: 9-bit indices of 4-value rows, sign bytes, d (1 + 2 s) per block.
void Iq3S(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 110);
    const int j = int((blk0 + b) % 8);
    const int s = (super[106 + j / 2] >> (4 * (j % 2))) & 0x0f;
    c->dw[b] = F16ToF32(LoadU16(super)) * float(1 + 2 * s);
    const auto grid_row = [&](int m) {
      return uint64_t(kIq3sGrid[super[2 + 8 * j + m] | ((super[66 + j] >> m) & 1) << 8]);
    };
    for (int l = 0; l < 4; ++l) {
      SignedGroup8(grid_row(2 * l) | grid_row(2 * l + 1) << 32, super[74 + 4 * j + l], 1,
                   c->q16 + kQ * b + 8 * l);
    }
  }
  c->has_cw = false;
}

// iq1's value g + delta (g in {-1, 0, 1} from the codebook, delta = +-1/8 per
// group) as the exact integer scale x (8 g + sigma), sigma = +-1; the 1/8
// goes into dw.
HWY_INLINE void Iq1Group8(uint64_t row, int sigma, int scale, int16_t* q) {
  for (int i = 0; i < 8; ++i) q[i] = int16_t(scale * (8 * int(int8_t(row >> (8 * i))) + sigma));
}

// iq1_s: per block a u16 of 4 x 3 high index bits, the 3-bit scale s
// (d (2 s + 1)) and the delta's sign.
void Iq1S(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 50);
    const int j = int((blk0 + b) % 8);
    const uint32_t h = LoadU16(super + 34 + 2 * j);
    c->dw[b] = F16ToF32(LoadU16(super)) * float(2 * ((h >> 12) & 7) + 1) * 0.125f;
    for (int l = 0; l < 4; ++l) {
      const uint32_t index = super[2 + 4 * j + l] | ((h >> (3 * l)) & 7) << 8;
      Iq1Group8(kIq1sGrid[index], h & 0x8000 ? -1 : 1, 1, c->q16 + kQ * b + 8 * l);
    }
  }
  c->has_cw = false;
}

// iq1_m: per group a nibble of 3 high index bits and the delta's sign; 3-bit
// scales per 16 values, folded into the integers; d from the scales' top
// nibbles.
void Iq1M(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, 56);
    const int j = int((blk0 + b) % 8);
    uint16_t sc[4];
    std::memcpy(sc, super + 48, 8);
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    c->dw[b] = F16ToF32(d_bits) * 0.125f;
    for (int l = 0; l < 4; ++l) {
      const int g = 4 * j + l;
      const int scale = 2 * ((sc[g / 8] >> (3 * ((g / 2) % 4))) & 7) + 1;
      const int nibble = (super[32 + g / 2] >> (4 * (g % 2))) & 0x0f;
      Iq1Group8(kIq1sGrid[super[g] | (nibble & 7) << 8], nibble & 8 ? -1 : 1, scale,
                c->q16 + kQ * b + 8 * l);
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

// q5_k: q4_k's scales and mins per 32 (Q4_KScales), 5-bit codes: nibble
// j % 2 of qs[32 (j / 2) + l] and bit j of qh[l] for value l of block j.
void Q5_K(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  constexpr size_t kBytes = 176;
  Q4_KScales(row, blk0, nb, c, kBytes);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* super = SuperOf(row, blk0 + b, kBytes);
    const int j = int((blk0 + b) % 8);
    const uint8_t *qh = super + 16, *qs = super + 48 + 32 * (j / 2);
    for (int l = 0; l < kQ; ++l) {
      c->q16[kQ * b + l] = int16_t(((qs[l] >> (4 * (j % 2))) & 0x0f) | ((qh[l] >> j) & 1) << 4);
    }
  }
}

// How many int16 passes `type` takes here (0: not one of these types).
inline int Passes(DType type) {
  switch (type) {
    case DType::kQ2_K:
      return 2;
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kIQ2_XXS:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ1_S:
    case DType::kIQ1_M:
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
    case DType::kQ5_K: return Q5_K(row, blk0, nb, c);
    case DType::kIQ4_NL: return Levels<false>(row, blk0, nb, c);
    case DType::kIQ4_XS: return Iq4Xs(row, blk0, nb, c);
    case DType::kIQ2_XXS: return Iq2Xxs(row, blk0, nb, c);
    case DType::kIQ2_XS: return Iq2Xs(row, blk0, nb, c);
    case DType::kIQ2_S: return Iq2S(row, blk0, nb, c);
    case DType::kIQ3_XXS: return Iq3Xxs(row, blk0, nb, c);
    case DType::kIQ3_S: return Iq3S(row, blk0, nb, c);
    case DType::kIQ1_S: return Iq1S(row, blk0, nb, c);
    case DType::kIQ1_M: return Iq1M(row, blk0, nb, c);
    case DType::kMXFP4: return Levels<true>(row, blk0, nb, c);
    default: CHECK(false && "quant matmul: unsupported weight type");
  }
}

}  // namespace unpack
