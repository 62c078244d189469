// Element-wise ops; one work-item per element.

kernel void swiglu(global const float* g, ulong g_off, global const float* u, ulong u_off,
                   global float* out, ulong out_off) {
  const ulong i = get_global_id(0);
  const float x = g[g_off + i];
  out[out_off + i] = x / (1.0f + exp(-x)) * u[u_off + i];
}

kernel void add(global const float* a, ulong a_off, global const float* b, ulong b_off,
                global float* out, ulong out_off) {
  const ulong i = get_global_id(0);
  out[out_off + i] = a[a_off + i] + b[b_off + i];
}

kernel void copy_columns(global const float* src, ulong src_off, int src_cols, int src_col,
                         global float* dst, ulong dst_off, int dst_cols, int dst_col) {
  const int j = get_global_id(0), r = get_global_id(1);
  dst[dst_off + (ulong)r * dst_cols + dst_col + j] = src[src_off + (ulong)r * src_cols + src_col + j];
}
