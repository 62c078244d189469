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

float half_at(global const uchar* p) { return vload_half(0, (global const half*)p); }

float bf16_at(global const uchar* p) {
  const uint bits = (uint)p[0] | ((uint)p[1] << 8);
  return as_float(bits << 16);
}

// Element j of a weight row of the given dtype.
float weight_at(global const uchar* row, int dtype, int j) {
  switch (dtype) {
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
