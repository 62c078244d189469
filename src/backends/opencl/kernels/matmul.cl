// y = x . W^T (+ bias) for f32/f16/bf16/q8_0/q4_0/q4_1 weights in file layout.
// One work-group of WG lanes per (output column, token row); quantised rows are
// walked block by block (scale read once per block), plain rows element-wise.
// The matmul kernel fuses what a decoder layer does around its projections:
// RMSNorm of x first, up to three projections of the same x in one launch
// (q/k/v), SwiGLU of a gate/up pair, or the residual add after.

// Element j of the input row: x itself, or its RMSNorm (x * inv) * weight,
// computed as the rms_norm kernel computes it, so fused and separate calls
// give the same bits.
float x_at(global const float* x, int j, global const float* nw, float inv, int has_norm) {
  return has_norm ? (x[j] * inv) * nw[j] : x[j];
}

// Dot of x[0..k) (normed when has_norm) with weight row `row`, this lane's share
// of it. An FP8 row's values take their block scales from srow (one per s_cols
// columns; s_cols 0: none), multiplied in before x as DequantizeWeightRows does.
float lane_dot(global const uchar* row, int dtype, global const float* srow, int s_cols,
               global const float* x, int k, global const float* nw, float inv, int has_norm) {
  const int l = get_local_id(0);
  float acc = 0.0f;
  if (dtype == DT_Q8_0 || dtype == DT_Q4_0 || dtype == DT_Q4_1) {
    const int bb = block_bytes(dtype);
    for (int blk = l; blk < k / 32; blk += WG) {
      global const uchar* b = row + bb * blk;
      const int j0 = 32 * blk;
      const float d = half_at(b);
      float s = 0.0f;
      if (dtype == DT_Q8_0) {
        for (int i = 0; i < 32; ++i) s += (float)((char)b[2 + i]) * x_at(x, j0 + i, nw, inv, has_norm);
        acc += d * s;
      } else if (dtype == DT_Q4_0) {
        for (int i = 0; i < 16; ++i) {
          s += (float)((b[2 + i] & 15) - 8) * x_at(x, j0 + i, nw, inv, has_norm) +
               (float)((b[2 + i] >> 4) - 8) * x_at(x, j0 + i + 16, nw, inv, has_norm);
        }
        acc += d * s;
      } else {
        float xsum = 0.0f;
        for (int i = 0; i < 16; ++i) {
          const float lo = x_at(x, j0 + i, nw, inv, has_norm);
          const float hi = x_at(x, j0 + i + 16, nw, inv, has_norm);
          s += (float)(b[4 + i] & 15) * lo + (float)(b[4 + i] >> 4) * hi;
          xsum += lo + hi;
        }
        acc += d * s + half_at(b + 2) * xsum;
      }
    }
  } else if (s_cols > 0) {
    for (int j = l; j < k; j += WG) {
      acc += weight_at(row, dtype, j) * srow[j / s_cols] * x_at(x, j, nw, inv, has_norm);
    }
  } else {
    for (int j = l; j < k; j += WG) acc += weight_at(row, dtype, j) * x_at(x, j, nw, inv, has_norm);
  }
  return acc;
}

// 1 / rms of row xr (k floats), summed as the rms_norm kernel sums it.
float inv_rms(global const float* xr, int k, float eps, local float* red) {
  float s = 0.0f;
  for (int i = get_local_id(0); i < k; i += WG) s += xr[i] * xr[i];
  return 1.0f / sqrt(group_sum(s, red) / (float)k + eps);
}

// Up to three projections p of the same x: y_p[t, o] = x[t] . W_p[o] (+ b_p[o]),
// work-groups over the projections' columns in order. epilogue 1 (SwiGLU):
// groups over p0's columns only, y0 = silu(p0) * p1; epilogue 2 (residual):
// y0 += p0. FP8 weights bring their block scales (s, see scale_row; s_cols 0: none).
#define PROJECTION(i)                                                                    \
  global const uchar *w##i, ulong w##i##_off, ulong w##i##_row_bytes, int w##i##_dtype,  \
      global const float *s##i, ulong s##i##_off, int s##i##_rows, int s##i##_cols,      \
      int s##i##_stride, int s##i##_first, global const float *b##i, ulong b##i##_off,   \
      int has_b##i, global float *y##i, ulong y##i##_off, int n##i

kernel void matmul(global const float* x, ulong x_off, int k, global const float* nw,
                   ulong nw_off, float eps, int has_norm, PROJECTION(0), PROJECTION(1),
                   PROJECTION(2), int epilogue) {
  local float red[WG];
  int o = get_group_id(0);
  const int t = get_global_id(1);
  global const float* xr = x + x_off + (ulong)t * k;
  global const float* nwr = nw + nw_off;
  const float inv = has_norm ? inv_rms(xr, k, eps, red) : 1.0f;
  // This group's projection and column.
  int p = 0;
  if (epilogue == 0 && o >= n0) {
    o -= n0;
    p = 1;
    if (o >= n1) {
      o -= n1;
      p = 2;
    }
  }
  global const uchar* w = p == 0 ? w0 + w0_off : (p == 1 ? w1 + w1_off : w2 + w2_off);
  const ulong row_bytes = p == 0 ? w0_row_bytes : (p == 1 ? w1_row_bytes : w2_row_bytes);
  const int dtype = p == 0 ? w0_dtype : (p == 1 ? w1_dtype : w2_dtype);
  global const float* srow =
      p == 0 ? scale_row(s0 + s0_off, s0_rows, s0_stride, s0_first, o)
             : (p == 1 ? scale_row(s1 + s1_off, s1_rows, s1_stride, s1_first, o)
                       : scale_row(s2 + s2_off, s2_rows, s2_stride, s2_first, o));
  const int s_cols = p == 0 ? s0_cols : (p == 1 ? s1_cols : s2_cols);
  const float dot =
      group_sum(lane_dot(w + o * row_bytes, dtype, srow, s_cols, xr, k, nwr, inv, has_norm), red);
  if (epilogue == 1) {  // the up projection's column o, then silu(gate) * up
    const float up = group_sum(lane_dot(w1 + w1_off + o * w1_row_bytes, w1_dtype,
                                        scale_row(s1 + s1_off, s1_rows, s1_stride, s1_first, o), s1_cols,
                                        xr, k, nwr, inv, has_norm),
                               red);
    if (get_local_id(0) == 0) {
      const float g = dot + (has_b0 ? b0[b0_off + o] : 0.0f);
      const float u = up + (has_b1 ? b1[b1_off + o] : 0.0f);
      y0[y0_off + (ulong)t * n0 + o] = g / (1.0f + exp(-g)) * u;
    }
    return;
  }
  if (get_local_id(0) != 0) return;
  if (p == 0) {
    const float v = dot + (has_b0 ? b0[b0_off + o] : 0.0f);
    global float* out = y0 + y0_off + (ulong)t * n0 + o;
    *out = epilogue == 2 ? *out + v : v;
  } else if (p == 1) {
    y1[y1_off + (ulong)t * n1 + o] = dot + (has_b1 ? b1[b1_off + o] : 0.0f);
  } else {
    y2[y2_off + (ulong)t * n2 + o] = dot + (has_b2 ? b2[b2_off + o] : 0.0f);
  }
}

// MoE experts in one launch: row m of x belongs to the group g with
// offsets[g] <= m < offsets[g+1], whose weight starts at w_offs[g] bytes.
// Weights with block scales never come here (one matmul per expert instead).
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
  global const float* xr = x + x_off + (ulong)m * k;
  const float dot = group_sum(lane_dot(row, dtype, xr, 0, xr, k, xr, 1.0f, 0), red);
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

// out[t] = dequantised table[ids[t]] (FP8: times its block scale, s_cols > 0).
kernel void embedding(global const uchar* table, ulong table_off, ulong row_bytes, int dtype,
                      global const float* s, ulong s_off, int s_rows, int s_cols, int s_stride,
                      int s_first,
                      global const int* ids, ulong ids_off, global float* out, ulong out_off,
                      int h) {
  const int j = get_global_id(0), t = get_global_id(1);
  const int r = ids[ids_off + t];
  float v = weight_at(table + table_off + r * row_bytes, dtype, j);
  if (s_cols > 0) v = v * scale_row(s + s_off, s_rows, s_stride, s_first, r)[j / s_cols];
  out[out_off + (ulong)t * h + j] = v;
}
