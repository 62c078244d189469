// Causal attention with an online softmax over rows of a paged cache. One
// work-group per (query token, head); lanes split the dot product (reduced in
// local memory) and own every WG-th output dim. Serves both Attention (keys =
// key_rows[0 .. n_past + t]) and LatentAttention (the latent is key and value;
// with DSA, each query has its own list of rows and a count).
#define MAX_DV_PER_LANE 16  // d_v <= 1024

kernel void attention(global const float* q, ulong q_off, global const float* k, ulong k_off,
                      global const float* v, ulong v_off, global const int* rows, ulong rows_off,
                      int rows_stride, global const int* counts, ulong counts_off, int use_counts,
                      int n_past, int n_h, int group, int k_row, int v_row, int d_k, int d_v,
                      float scale, global float* out, ulong out_off) {
  local float red[WG];
  const int task = get_group_id(0), l = get_local_id(0);
  const int t = task / n_h, h = task % n_h, kvh = h / group;
  const int n_keys = use_counts ? counts[counts_off + t] : n_past + t + 1;
  global const int* r = rows + rows_off + (ulong)t * rows_stride;
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
