// DSA lightning indexer top-k, in three passes over [T, max_keys] scratch:
// scores (summed in the CPU backend's order, so ties break identically), a rank
// test per key (selected when fewer than topk keys beat it; ties to the lower
// position), and an ascending compaction per query.

kernel void indexer_scores(global const float* q, ulong q_off, global const float* keys,
                           ulong keys_off, global const int* key_rows, ulong rows_off,
                           global const float* hw, ulong hw_off, int n_heads, int dim,
                           int n_past, float scale, global float* scores, ulong scores_off,
                           int max_keys) {
  const int u = get_global_id(0), t = get_global_id(1);
  if (u > n_past + t) return;
  global const float* k = keys + keys_off + (ulong)key_rows[rows_off + u] * dim;
  float total = 0.0f;
  for (int h = 0; h < n_heads; ++h) {
    global const float* qh = q + q_off + ((ulong)t * n_heads + h) * dim;
    float dot = 0.0f;
    for (int d = 0; d < dim; ++d) dot += qh[d] * k[d];
    total += hw[hw_off + (ulong)t * n_heads + h] * fmax(0.0f, dot * scale);
  }
  scores[scores_off + (ulong)t * max_keys + u] = total;
}

kernel void indexer_rank(global const float* scores, ulong scores_off, int n_past, int topk,
                         int max_keys, global int* keep, ulong keep_off) {
  const int u = get_global_id(0), t = get_global_id(1);
  const int n = n_past + t + 1;
  if (u >= n) return;
  global const float* s = scores + scores_off + (ulong)t * max_keys;
  int better = 0;
  for (int v = 0; v < n && better < topk; ++v) {
    if (s[v] > s[u] || (s[v] == s[u] && v < u)) ++better;
  }
  keep[keep_off + (ulong)t * max_keys + u] = n <= topk || better < topk;
}

kernel void indexer_compact(global const int* keep, ulong keep_off, int n_past, int topk,
                            int max_keys, global int* selection, ulong sel_off, global int* counts,
                            ulong counts_off) {
  const int t = get_global_id(0);
  const int n = n_past + t + 1;
  int c = 0;
  for (int u = 0; u < n && c < topk; ++u) {
    if (keep[keep_off + (ulong)t * max_keys + u]) selection[sel_off + (ulong)t * topk + c++] = u;
  }
  counts[counts_off + t] = c;
}
