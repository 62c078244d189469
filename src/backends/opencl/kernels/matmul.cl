// y = x . W^T (+ bias) for f32/f16/bf16/q8_0/q4_0/q4_1 weights in file layout.
// One work-group of WG lanes per (output column, token row); quantised rows are
// walked block by block (scale read once per block), plain rows element-wise.

// Dot of x[0..k) with weight row `row`, this lane's share of it.
float lane_dot(global const uchar* row, int dtype, global const float* x, int k) {
  const int l = get_local_id(0);
  float acc = 0.0f;
  if (dtype == DT_Q8_0 || dtype == DT_Q4_0 || dtype == DT_Q4_1) {
    const int block_bytes = dtype == DT_Q8_0 ? 34 : (dtype == DT_Q4_0 ? 18 : 20);
    for (int blk = l; blk < k / 32; blk += WG) {
      global const uchar* b = row + block_bytes * blk;
      global const float* xb = x + 32 * blk;
      const float d = half_at(b);
      float s = 0.0f;
      if (dtype == DT_Q8_0) {
        for (int i = 0; i < 32; ++i) s += (float)((char)b[2 + i]) * xb[i];
        acc += d * s;
      } else if (dtype == DT_Q4_0) {
        for (int i = 0; i < 16; ++i) {
          s += (float)((b[2 + i] & 15) - 8) * xb[i] + (float)((b[2 + i] >> 4) - 8) * xb[i + 16];
        }
        acc += d * s;
      } else {
        float xsum = 0.0f;
        for (int i = 0; i < 16; ++i) {
          s += (float)(b[4 + i] & 15) * xb[i] + (float)(b[4 + i] >> 4) * xb[i + 16];
          xsum += xb[i] + xb[i + 16];
        }
        acc += d * s + half_at(b + 2) * xsum;
      }
    }
  } else {
    for (int j = l; j < k; j += WG) acc += weight_at(row, dtype, j) * x[j];
  }
  return acc;
}

kernel void matmul(global const float* x, ulong x_off, global const uchar* w, ulong w_off,
                   ulong w_row_bytes, int dtype, global const float* bias, ulong bias_off,
                   int has_bias, global float* y, ulong y_off, int k, int n) {
  local float red[WG];
  const int o = get_group_id(0), t = get_global_id(1);
  const float dot = group_sum(lane_dot(w + w_off + o * w_row_bytes, dtype, x + x_off + (ulong)t * k, k), red);
  if (get_local_id(0) == 0) y[y_off + (ulong)t * n + o] = dot + (has_bias ? bias[bias_off + o] : 0.0f);
}

// MoE experts in one launch: row m of x belongs to the group g with
// offsets[g] <= m < offsets[g+1], whose weight starts at w_offs[g] bytes.
kernel void grouped_matmul(global const float* x, ulong x_off, global const uchar* w,
                           global const ulong* w_offs, ulong w_offs_off, ulong w_row_bytes,
                           int dtype, global const int* offsets, ulong offsets_off, int groups,
                           global float* y, ulong y_off, int k, int n) {
  local float red[WG];
  const int o = get_group_id(0), m = get_global_id(1);
  global const int* off = offsets + offsets_off;
  int g = 0;
  while (g + 1 < groups && off[g + 1] <= m) ++g;
  global const uchar* row = w + w_offs[w_offs_off + g] + o * w_row_bytes;
  const float dot = group_sum(lane_dot(row, dtype, x + x_off + (ulong)m * k, k), red);
  if (get_local_id(0) == 0) y[y_off + (ulong)m * n + o] = dot;
}

// y[t, h, o] = W[h] (d_out x d_in, f32) . x[t, h], with strided head slots.
kernel void head_matmul(global const float* x, ulong x_off, int x_stride, global const float* w,
                        ulong w_off, global float* y, ulong y_off, int y_stride, int n_h,
                        int d_out, int d_in) {
  const int o = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
  global const float* xr = x + x_off + ((ulong)t * n_h + h) * x_stride;
  global const float* wr = w + w_off + ((ulong)h * d_out + o) * d_in;
  float acc = 0.0f;
  for (int i = 0; i < d_in; ++i) acc += wr[i] * xr[i];
  y[y_off + ((ulong)t * n_h + h) * y_stride + o] = acc;
}

// out[t] = dequantised table[ids[t]].
kernel void embedding(global const uchar* table, ulong table_off, ulong row_bytes, int dtype,
                      global const int* ids, ulong ids_off, global float* out, ulong out_off,
                      int h) {
  const int j = get_global_id(0), t = get_global_id(1);
  out[out_off + (ulong)t * h + j] =
      weight_at(table + table_off + ids[ids_off + t] * row_bytes, dtype, j);
}
