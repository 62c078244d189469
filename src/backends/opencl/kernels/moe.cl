// MoE routing: the CPU backend's RouteToken (backends/cpu/route.cc), one
// work-item per token, with its scratch in global memory.

// Index of the largest value not yet taken; ties to the lower index.
int argmax_not_taken(global const float* v, int n, global const int* taken) {
  int best = -1;
  for (int i = 0; i < n; ++i) {
    if (taken[i]) continue;
    if (best < 0 || v[i] > v[best]) best = i;
  }
  return best;
}

// scratch: per token [E score | E sel | E taken | n_group group score | n_group taken].
kernel void route(global const float* logits, ulong logits_off, global const float* bias,
                  ulong bias_off, int has_bias, int e, int sigmoid, int k, int n_group,
                  int topk_group, int normalize, float scaling, global float* scratch,
                  ulong scratch_off, global int* ids, ulong ids_off, global float* weights,
                  ulong weights_off) {
  const int t = get_global_id(0);
  global const float* lg = logits + logits_off + (ulong)t * e;
  global float* score = scratch + scratch_off + (ulong)t * (3 * e + 2 * n_group);
  global float* sel = score + e;
  global int* taken = (global int*)(sel + e);
  global float* group_score = (global float*)(taken + e);
  global int* group_taken = (global int*)(group_score + n_group);
  if (!sigmoid) {
    float mx = lg[0];
    for (int i = 1; i < e; ++i) mx = lg[i] > mx ? lg[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < e; ++i) sum += (score[i] = exp(lg[i] - mx));
    for (int i = 0; i < e; ++i) score[i] /= sum;
  } else {
    for (int i = 0; i < e; ++i) score[i] = 1.0f / (1.0f + exp(-lg[i]));
  }
  for (int i = 0; i < e; ++i) sel[i] = score[i] + (has_bias ? bias[bias_off + i] : 0.0f);
  if (n_group > 1) {  // keep the topk_group groups with the best sum of their two best
    const int per = e / n_group;
    for (int g = 0; g < n_group; ++g) {
      float a = -INFINITY, b = -INFINITY;
      for (int i = 0; i < per; ++i) {
        const float s = sel[g * per + i];
        if (s > a) { b = a; a = s; } else if (s > b) { b = s; }
      }
      group_score[g] = a + b;
      group_taken[g] = 0;
    }
    for (int r = 0; r < topk_group; ++r) group_taken[argmax_not_taken(group_score, n_group, group_taken)] = 1;
    for (int g = 0; g < n_group; ++g) {
      if (!group_taken[g]) for (int i = 0; i < per; ++i) sel[g * per + i] = -INFINITY;
    }
  }
  for (int i = 0; i < e; ++i) taken[i] = 0;
  float total = 0.0f;
  global int* out_ids = ids + ids_off + (ulong)t * k;
  global float* out_w = weights + weights_off + (ulong)t * k;
  for (int j = 0; j < k; ++j) {
    const int x = argmax_not_taken(sel, e, taken);
    taken[x] = 1;
    out_ids[j] = x;
    out_w[j] = score[x];
    total += score[x];
  }
  const float denom = sigmoid ? total + 1e-20f : total;
  for (int j = 0; j < k; ++j) {
    if (normalize) out_w[j] /= denom;
    out_w[j] *= scaling;
  }
}

// dst[rows[i]] = src[i] (scatter) or dst[i] = src[rows[i]] (gather), in 4-byte words.
kernel void scatter_rows(global const uint* src, ulong src_off, global const int* rows,
                         ulong rows_off, global uint* dst, ulong dst_off, int row_words) {
  const int j = get_global_id(0), i = get_global_id(1);
  dst[dst_off + (ulong)rows[rows_off + i] * row_words + j] = src[src_off + (ulong)i * row_words + j];
}

kernel void gather_rows(global const uint* src, ulong src_off, global const int* rows,
                        ulong rows_off, global uint* dst, ulong dst_off, int row_words) {
  const int j = get_global_id(0), i = get_global_id(1);
  dst[dst_off + (ulong)i * row_words + j] = src[src_off + (ulong)rows[rows_off + i] * row_words + j];
}

// dst[rows[i]] += scales[i] * src[i], rows in order (a token's experts add up in
// the CPU backend's order); one work-item per column.
kernel void scatter_add_rows(global const float* src, ulong src_off, global const int* rows,
                             ulong rows_off, global const float* scales, ulong scales_off,
                             int n_rows, global float* dst, ulong dst_off, int n) {
  const int j = get_global_id(0);
  for (int i = 0; i < n_rows; ++i) {
    dst[dst_off + (ulong)rows[rows_off + i] * n + j] +=
        scales[scales_off + i] * src[src_off + (ulong)i * n + j];
  }
}
