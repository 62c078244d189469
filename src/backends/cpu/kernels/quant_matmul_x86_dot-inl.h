// The int8 dot products of the x86 integer kernels, in the three forms x86
// CPUs have: vpdpbusd in its EVEX encoding (AVX-512 VNNI), the same 256-bit
// instruction in its VEX encoding (AVX-VNNI: Alder Lake and later, Zen 5), and
// vpmaddubsw + vpmaddwd (plain AVX2). Included by quant_matmul.cc inside the
// AVX2 and AVX3_DL targets' namespaces; the kernels of quant_matmul_packed-inl.h
// and quant_matmul_vnni-inl.h take one of these as their `Dot` parameter. Every
// form computes the exact integer dot, so the kernels' results do not depend on
// which one ran (the tests compare them bit for bit).

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace x86 {

HWY_INLINE __m256i Broadcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// vpdpbusd, spelt out: Highway 1.0.3 compiles AVX3_DL with "avxvnni", for which
// the compiler emits the VEX form that CPUs with only AVX512_VNNI (Zen 4, Ice
// Lake) lack, and the AVX2 target has no VNNI attribute at all.
template <bool kEvex>
struct VnniDot {
  // acc + per int32 lane: 4 unsigned bytes of u times the 4 signed bytes of s.
  static HWY_INLINE __m256i Add(__m256i acc, __m256i u, __m256i s) {
    if constexpr (kEvex) {
      asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
    } else {
      asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
    }
    return acc;
  }
  // The same with the 4 signed bytes at x in every lane.
  static HWY_INLINE __m256i AddBroadcast(__m256i acc, __m256i u, const int8_t* x) {
    if constexpr (kEvex) {
      asm("vpdpbusd %2%{1to8%}, %1, %0"
          : "+v"(acc)
          : "v"(u), "m"(*reinterpret_cast<const int32_t*>(x)));
      return acc;
    } else {
      return Add(acc, u, Broadcast4(x));
    }
  }
};
using EvexDot = VnniDot<true>;  // AVX3_DL; AVX2 kernels on an AVX-512 VNNI CPU
using VexDot = VnniDot<false>;  // AVX2 kernels on an AVX-VNNI CPU

// Plain AVX2: vpmaddubsw multiplies unsigned by signed bytes and adds each
// pair with int16 saturation, vpmaddwd by ones adds the pairs of pairs into
// the lanes vpdpbusd fills. Exact only while every pair u1 s1 + u2 s2 fits
// int16: with activations in [-127, 127] (QuantizeActivations), for u <= 128.
// So the kernels give it q4 nibbles (<= 15), q6_k values (<= 63) and |q8_0|
// (<= 128, the sign moved onto the activations), never q8_0 + 128.
struct MaddDot {
  static HWY_INLINE __m256i Pairs(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }
  static HWY_INLINE __m256i Quads(__m256i pairs) {
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
  // acc + per int32 lane: 4 unsigned bytes of u (<= 128) times 4 signed of s.
  static HWY_INLINE __m256i Add(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, Quads(Pairs(u, s)));
  }
};

template <class Dot>
inline constexpr bool kIsVnni = !std::is_same_v<Dot, MaddDot>;

// Keeps a running sum a chain: GCC otherwise reassociates the integer adds of
// an unrolled block into a tree, computing every product first and spilling
// most of them (AVX2 has 16 vector registers): q4_0 t128 ran at half speed.
HWY_INLINE void KeepChain(__m256i& v) { asm("" : "+x"(v)); }

}  // namespace x86

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
