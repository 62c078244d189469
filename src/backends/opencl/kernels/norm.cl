// Row normalisations and rotary embedding; one work-group per row for norms.

kernel void rms_norm(global const float* x, ulong x_off, global const float* w, ulong w_off,
                     float eps, int n, global float* out, ulong out_off) {
  local float red[WG];
  const int r = get_group_id(0), l = get_local_id(0);
  global const float* xr = x + x_off + (ulong)r * n;
  float s = 0.0f;
  for (int i = l; i < n; i += WG) s += xr[i] * xr[i];
  const float inv = 1.0f / sqrt(group_sum(s, red) / (float)n + eps);
  for (int i = l; i < n; i += WG) out[out_off + (ulong)r * n + i] = (xr[i] * inv) * w[w_off + i];
}

kernel void layer_norm(global const float* x, ulong x_off, global const float* w, ulong w_off,
                       global const float* b, ulong b_off, float eps, int n, global float* out,
                       ulong out_off) {
  local float red[WG];
  const int r = get_group_id(0), l = get_local_id(0);
  global const float* xr = x + x_off + (ulong)r * n;
  float s = 0.0f;
  for (int i = l; i < n; i += WG) s += xr[i];
  const float mean = group_sum(s, red) / (float)n;
  float v = 0.0f;
  for (int i = l; i < n; i += WG) v += (xr[i] - mean) * (xr[i] - mean);
  const float inv = 1.0f / sqrt(group_sum(v, red) / (float)n + eps);
  for (int i = l; i < n; i += WG) {
    out[out_off + (ulong)r * n + i] = (xr[i] - mean) * inv * w[w_off + i] + b[b_off + i];
  }
}

// In place on x [T, heads, head_dim]; pairing 0 = half split, 1 = interleaved.
kernel void rope(global float* x, ulong x_off, int heads, int head_dim, global const int* pos,
                 ulong pos_off, global const float* inv_freq, ulong freq_off, int rotary_dims,
                 int rotary_offset, float factor, int interleaved) {
  const int i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
  const int half_dims = rotary_dims / 2;
  const float angle = (float)pos[pos_off + t] * inv_freq[freq_off + i];
  const float c = cos(angle) * factor, s = sin(angle) * factor;
  global float* z = x + x_off + ((ulong)t * heads + h) * head_dim + rotary_offset;
  const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half_dims;
  const float za = z[a], zb = z[b];
  z[a] = za * c - zb * s;
  z[b] = zb * c + za * s;
}
