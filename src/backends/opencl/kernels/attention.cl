// Causal attention with an online softmax over rows of a paged cache. One
// work-group per (query token, head); lanes split the dot product (reduced in
// local memory) and own every WG-th output dim. `attention` serves Attention
// and a step's batched attention (keys = the query's own list of rows: at
// starts[t], or t * rows_stride; n_past + t + 1 of them, or counts[t]) and
// LatentAttention (the latent is key and value; with DSA, each query has its
// own list of rows and a count). `decode_attention` is a decode step's whole
// attention in one launch: RoPE, cache write and attention.
#define MAX_DV_PER_LANE 16  // d_v <= 1024

kernel void attention(global const float* q, ulong q_off, global const float* k, ulong k_off,
                      global const float* v, ulong v_off, global const int* rows, ulong rows_off,
                      global const int* starts, ulong starts_off, int use_starts,
                      int rows_stride, global const int* counts, ulong counts_off, int use_counts,
                      int n_past, int n_h, int group, int k_row, int v_row, int d_k, int d_v,
                      float scale, global float* out, ulong out_off) {
  local float red[WG];
  const int task = get_group_id(0), l = get_local_id(0);
  const int t = task / n_h, h = task % n_h, kvh = h / group;
  const int n_keys = use_counts ? counts[counts_off + t] : n_past + t + 1;
  global const int* r =
      rows + rows_off + (use_starts ? (ulong)starts[starts_off + t] : (ulong)t * rows_stride);
  global const float* qh = q + q_off + ((ulong)t * n_h + h) * d_k;
  float acc[MAX_DV_PER_LANE];
  for (int i = 0; i < MAX_DV_PER_LANE; ++i) acc[i] = 0.0f;
  float running_max = -INFINITY, denom = 0.0f;
  for (int j = 0; j < n_keys; ++j) {
    const ulong key = (ulong)r[j];
    global const float* kp = k + k_off + key * k_row + kvh * d_k;
    float partial = 0.0f;
    for (int d = l; d < d_k; d += WG) partial += qh[d] * kp[d];
    const float s = group_sum(partial, red) * scale;
    const float new_max = s > running_max ? s : running_max;
    const float c = exp(running_max - new_max), p = exp(s - new_max);
    denom = denom * c + p;
    global const float* vp = v + v_off + key * v_row + kvh * d_v;
    for (int i = 0, d = l; d < d_v; ++i, d += WG) acc[i] = acc[i] * c + p * vp[d];
    running_max = new_max;
  }
  const float inv = 1.0f / denom;
  global float* o = out + out_off + ((ulong)t * n_h + h) * d_v;
  for (int i = 0, d = l; d < d_v; ++i, d += WG) o[d] = acc[i] * inv;
}

// RoPE of one pair (as kernels/norm.cl's rope): rotates z[a], z[b] by the
// angle of `pos` for pair i.
void rotate_pair(local float* z, int a, int b, int pos, float inv_freq, float factor) {
  const float angle = (float)pos * inv_freq;
  const float c = cos(angle) * factor, s = sin(angle) * factor;
  const float za = z[a], zb = z[b];
  z[a] = za * c - zb * s;
  z[b] = zb * c + za * s;
}

// A decode step (one new token per sequence, row t) in one launch, one
// work-group per (t, head): q[t] and this kv head's k[t] rotated into local
// memory, the kv head's new key and value written to the sequence's cache row
// rows[starts[t] + pos] (by the first query head of the group only), then the
// online softmax over the cached keys rows[starts[t] .. + pos) and the new key
// last, in the order and arithmetic of `attention` after `rope` and
// `scatter_rows`. Nothing reads the row written here during the launch.
kernel void decode_attention(global const float* q, ulong q_off, global const float* k_new,
                             ulong k_new_off, global const float* v_new, ulong v_new_off,
                             global float* k, ulong k_off, global float* v, ulong v_off,
                             global const int* rows, ulong rows_off, global const int* starts,
                             ulong starts_off, global const int* pos, ulong pos_off,
                             global const float* inv_freq, ulong freq_off, int rotary_dims,
                             int rotary_offset, float factor, int interleaved, int n_h,
                             int group, int d_k, int d_v, float scale, global float* out,
                             ulong out_off) {
  local float red[WG];
  local float q_s[MAX_DV_PER_LANE * WG], k_s[MAX_DV_PER_LANE * WG];
  const int task = get_group_id(0), l = get_local_id(0);
  const int t = task / n_h, h = task % n_h, kvh = h / group, n_kv = n_h / group;
  const int p = pos[pos_off + t];
  global const float* qh = q + q_off + ((ulong)t * n_h + h) * d_k;
  global const float* kh = k_new + k_new_off + ((ulong)t * n_kv + kvh) * d_k;
  global const float* vh = v_new + v_new_off + ((ulong)t * n_kv + kvh) * d_v;
  for (int d = l; d < d_k; d += WG) {
    q_s[d] = qh[d];
    k_s[d] = kh[d];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int half_dims = rotary_dims / 2;
  for (int i = l; i < half_dims; i += WG) {
    const int a = rotary_offset + (interleaved ? 2 * i : i);
    const int b = rotary_offset + (interleaved ? 2 * i + 1 : i + half_dims);
    const float f = inv_freq[freq_off + i];
    rotate_pair(q_s, a, b, p, f, factor);
    rotate_pair(k_s, a, b, p, f, factor);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  global const int* r = rows + rows_off + starts[starts_off + t];
  const ulong k_row = (ulong)n_kv * d_k, v_row = (ulong)n_kv * d_v;
  if (h % group == 0) {  // one writer per kv head
    const ulong row = (ulong)r[p];
    for (int d = l; d < d_k; d += WG) k[k_off + row * k_row + kvh * d_k + d] = k_s[d];
    for (int d = l; d < d_v; d += WG) v[v_off + row * v_row + kvh * d_v + d] = vh[d];
  }
  float acc[MAX_DV_PER_LANE];
  for (int i = 0; i < MAX_DV_PER_LANE; ++i) acc[i] = 0.0f;
  float running_max = -INFINITY, denom = 0.0f;
  for (int j = 0; j <= p; ++j) {
    const int is_new = j == p;
    const ulong key = (ulong)r[j];
    global const float* kp = k + k_off + key * k_row + kvh * d_k;
    float partial = 0.0f;
    for (int d = l; d < d_k; d += WG) partial += q_s[d] * (is_new ? k_s[d] : kp[d]);
    const float s = group_sum(partial, red) * scale;
    const float new_max = s > running_max ? s : running_max;
    const float c = exp(running_max - new_max), e = exp(s - new_max);
    denom = denom * c + e;
    global const float* vp = is_new ? vh : v + v_off + key * v_row + kvh * d_v;
    for (int i = 0, d = l; d < d_v; ++i, d += WG) acc[i] = acc[i] * c + e * vp[d];
    running_max = new_max;
  }
  const float inv = 1.0f / denom;
  global float* o = out + out_off + ((ulong)t * n_h + h) * d_v;
  for (int i = 0, d = l; d < d_v; ++i, d += WG) o[d] = acc[i] * inv;
}
