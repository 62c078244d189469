#include "models/experts/streamed_experts.h"

namespace anymoe {

StreamedExperts::StreamedExperts(std::vector<Tensor> gate, std::vector<Tensor> up,
                                 std::vector<Tensor> down, int64_t layer, ExpertCache* cache)
    : gate_(std::move(gate)),
      up_(std::move(up)),
      down_(std::move(down)),
      layer_(layer),
      cache_(cache) {
  const size_t e = gate_.size();
  active_.reserve(e);
  slot_.reserve(e);
  state_.reserve(e);
  pending_slots_.reserve(e);
  pending_ready_.reserve(e);
  pending_index_.reserve(e);
}

void StreamedExperts::RunReady(Backend& be, const Tensor& xe, std::span<const int32_t> offsets,
                               const Tensor& g, const Tensor& u, const Tensor& ye, size_t begin,
                               size_t end) {
  size_t i = begin;
  while (i < end) {
    if (state_[i] != 1) {
      ++i;
      continue;
    }
    size_t j = i;  // the run active_[i..j]: experts between them have no rows
    while (j + 1 < end && state_[j + 1] == 1) ++j;
    const int32_t first = active_[i], last = active_[j];
    const size_t n = size_t(last - first + 1);
    // Absolute row offsets: the grouped ops read rows [offsets[g], offsets[g+1]) of
    // the whole xe / g / u / ye, so a run needs no copies.
    const auto run_offsets = offsets.subspan(size_t(first), n + 1);
    const GroupedProjection gate_up[] = {
        {std::span<const Tensor>(gate_).subspan(size_t(first), n), g},
        {std::span<const Tensor>(up_).subspan(size_t(first), n), u}};
    be.MultiGroupedMatmul(xe, gate_up, run_offsets);
    const int64_t r0 = offsets[size_t(first)], rows = offsets[size_t(last) + 1] - r0;
    be.SwiGluLimited(g.RowSlice(r0, rows), u.RowSlice(r0, rows), swiglu_limit_,
                     g.RowSlice(r0, rows));
    be.GroupedMatmul(g, std::span<const Tensor>(down_).subspan(size_t(first), n), run_offsets, ye);
    for (size_t k = i; k <= j; ++k) state_[k] = 2;
    i = j + 1;
  }
}

Status StreamedExperts::Run(Backend& be, const Tensor& xe, std::span<const int32_t> offsets,
                            const Tensor& g, const Tensor& u, const Tensor& ye,
                            FunctionRef<void()> after_first_acquire) {
  active_.clear();
  for (int32_t e = 0; e + 1 < int32_t(offsets.size()); ++e) {
    if (offsets[size_t(e) + 1] > offsets[size_t(e)]) active_.push_back(e);
  }
  slot_.assign(active_.size(), -1);
  state_.assign(active_.size(), 0);
  bool first = true;
  Status status = Status::Ok();
  size_t next = 0;
  while (next < active_.size() && status.ok()) {
    // A wave: as many of the remaining experts as the cache can pin.
    const size_t begin = next;
    while (next < active_.size()) {
      const int32_t s = cache_->Acquire(layer_, active_[next]);
      if (s < 0) break;
      slot_[next++] = s;
    }
    if (first) {
      cache_->ReleasePrefetch(layer_);  // what was kept for this layer is now pinned or free
      after_first_acquire();
      first = false;
      if (next == begin) continue;  // those pins held every slot: try again
    }
    if (next == begin) {
      status = Status::Error("expert cache: no slot free for layer " + std::to_string(layer_));
      break;
    }
    // Run experts as they come in.
    for (;;) {
      pending_slots_.clear();
      pending_index_.clear();
      for (size_t i = begin; i < next; ++i) {
        if (state_[i] == 0) pending_slots_.push_back(slot_[i]), pending_index_.push_back(i);
      }
      if (pending_slots_.empty()) break;
      pending_ready_.assign(pending_slots_.size(), 0);
      status = cache_->WaitAny(pending_slots_, pending_ready_);
      if (!status.ok()) break;
      for (size_t p = 0; p < pending_slots_.size(); ++p) {
        if (!pending_ready_[p]) continue;
        const size_t i = pending_index_[p];
        const ExpertCache::Views& v = cache_->View(slot_[i]);
        gate_[size_t(active_[i])] = v[0];
        up_[size_t(active_[i])] = v[1];
        down_[size_t(active_[i])] = v[2];
        state_[i] = 1;
      }
      RunReady(be, xe, offsets, g, u, ye, begin, next);
    }
    for (size_t i = begin; i < next; ++i) cache_->Release(slot_[i]);
  }
  if (first) {
    cache_->ReleasePrefetch(layer_);
    after_first_acquire();
  }
  return status;
}

}  // namespace anymoe
