// The x86 integer kernels by weight type, one table per dot form
// (quant_matmul_x86_dot-inl.h), and which form runs: AVX3_DL always has EVEX
// vpdpbusd; the AVX2 target takes vpdpbusd where the selected CPU target allows
// it ("avx2-vnni": VEX, or EVEX on an AVX-512 VNNI CPU) and vpmaddubsw +
// vpmaddwd otherwise. Included by quant_matmul.cc inside the AVX2 and AVX3_DL
// targets' namespaces after the kernels. A new type's kernels slot in as a row
// of the table.

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace x86 {

// Rows [n0, n1) of y for every activation row (QuantMatmulRows' contract).
using RowsFn = void (*)(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x,
                        int64_t n0, int64_t n1, float* y, int64_t ldy);

struct TypeKernels {
  DType type;
  RowsFn file_rows;    // weights in the file's layout
  RowsFn panel_rows;   // weights stored as panels (panel_layout.h); null: no panel kernel
  bool any_row_count;  // fast for every row count: prefill too (IntegerMatmulMaxRows)
};

// From this many activation rows on, q8_0 / q4_0 / q4_1 in the file's layout
// take the packed-panel kernels: below it, packing costs more than it saves
// (kernel_bench, k576_n1536 hot, one thread, AVX3_DL: q8_0 t2 38-43 us packed
// vs 41 per row, t4 43-50 vs 75; q4_0 t2 44 vs 34, t4 48-52 vs 52).
template <class Format>
constexpr int64_t kPackedMinRows = std::is_same_v<Format, packed::Q8_0Format> ? 3 : 4;

// q8_0 / q4_0 / q4_1 in the file's layout: whole panels of 8 rows packed per
// call, the few rows left row by row, with the same arithmetic (same results).
template <class Format, class Dot>
void FileRows(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x, int64_t n0,
              int64_t n1, float* y, int64_t ldy) {
  if (x.t >= kPackedMinRows<Format> && n1 - n0 >= kPanelRows) {
    const int64_t mid = n0 + (n1 - n0) / kPanelRows * kPanelRows;
    packed::MatmulRows<Format, Dot>(w, row_bytes, x, n0, mid, y, ldy);
    n0 = mid;
  }
  packed::RowMatmulRows<Format, Dot>(w, row_bytes, x, n0, n1, y, ldy);
}

// q8_0 / q4_0 / q4_1 stored as panels: on AVX3_DL the 512-bit prefill GEMM
// (quant_matmul_gemm-inl.h) from gemm::kGemmMinRows activation rows on, the
// 256-bit kernels below it; both compute each output the same way.
template <class Format, class Dot>
void StoredRows(const uint8_t* panels, size_t row_bytes, const QuantizedActivations& x,
                int64_t n0, int64_t n1, float* y, int64_t ldy) {
#if HWY_TARGET == HWY_AVX3_DL
  if (x.t >= gemm::kGemmMinRows) {
    return gemm::StoredGemmRows<Format, Dot>(panels, row_bytes, x, n0, n1, y, ldy);
  }
#endif
  packed::StoredMatmulRows<Format, Dot>(panels, row_bytes, x, n0, n1, y, ldy);
}

template <class Dot>
const TypeKernels* Lookup(DType type) {
  using packed::Q4_0Format, packed::Q4_1Format, packed::Q8_0Format;
  static constexpr TypeKernels kTable[] = {
      {DType::kQ8_0, &FileRows<Q8_0Format, Dot>, &StoredRows<Q8_0Format, Dot>, true},
      {DType::kQ4_0, &FileRows<Q4_0Format, Dot>, &StoredRows<Q4_0Format, Dot>, true},
      {DType::kQ4_1, &FileRows<Q4_1Format, Dot>, &StoredRows<Q4_1Format, Dot>, true},
      {DType::kQ6_K, &vnni::MatmulRows<vnni::Q6_KBlock<Dot>>, nullptr, false},
      {DType::kQ5_0, &FileRows<packed::Q5_0Format, Dot>, nullptr, true},
      {DType::kQ5_1, &FileRows<packed::Q5_1Format, Dot>, nullptr, true},
      {DType::kIQ4_NL, &FileRows<packed::Iq4NlFormat, Dot>, nullptr, true},
      {DType::kQ2_K, &vnni::MatmulRows<vnni::Q2_KBlock<Dot>>, nullptr, false},
      {DType::kQ3_K, &vnni::MatmulRows<vnni::Q3_KBlock<Dot>>, nullptr, false},
      {DType::kIQ4_XS, &vnni::MatmulRows<vnni::Iq4XsBlock<Dot>>, nullptr, false},
      {DType::kIQ2_XXS, &vnni::MatmulRows<iq2xxs::Block<Dot>>, nullptr, false},
      {DType::kIQ2_XS, &vnni::MatmulRows<vnni::Iq2XsBlock<Dot>>, nullptr, false},
      {DType::kIQ2_S, &vnni::MatmulRows<vnni::Iq2SBlock<Dot>>, nullptr, false},
      {DType::kIQ3_XXS, &vnni::MatmulRows<vnni::Iq3XxsBlock<Dot>>, nullptr, false},
      {DType::kIQ3_S, &vnni::MatmulRows<vnni::Iq3SBlock<Dot>>, nullptr, false},
      {DType::kIQ1_S, &vnni::MatmulRows<vnni::Iq1SBlock<Dot>>, nullptr, false},
      {DType::kIQ1_M, &vnni::MatmulRows<vnni::Iq1MBlock<Dot>>, nullptr, false},
      {DType::kMXFP4, &vnni::MatmulRows<vnni::Mxfp4Block<Dot>>, nullptr, false},
  };
  for (const TypeKernels& k : kTable) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

// The kernels of `type` in the dot form the selected CPU target runs; null
// where this file has none (the portable kernels of quant_matmul.cc run).
inline const TypeKernels* KernelsFor(DType type) {
#if HWY_TARGET == HWY_AVX3_DL
  return Lookup<EvexDot>(type);
#else
  if (!CpuExtensionActive(CpuExtension::kAvxVnni)) return Lookup<MaddDot>(type);
  if (CpuExtensionActive(CpuExtension::kAvxVnniEvex)) return Lookup<EvexDot>(type);
  return Lookup<VexDot>(type);
#endif
}

}  // namespace x86

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
