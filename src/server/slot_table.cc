// The slots of GET /slots (slot_table.h).
#include "server/slot_table.h"

namespace anymoe {

int SlotTable::Claim(int parallel, int64_t task, int64_t n_prompt, int64_t n_predict) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slots_.size() < size_t(parallel)) slots_.resize(size_t(parallel));
  for (size_t i = 0; i < size_t(parallel); ++i) {
    if (slots_[i].busy) continue;
    slots_[i] = Slot{true, task, n_prompt, n_predict, 0};
    return int(i);
  }
  return -1;
}

void SlotTable::Decoded(int slot, int64_t task) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[size_t(slot)];
  if (s.busy && s.task == task) ++s.n_decoded;
}

void SlotTable::Release(int slot, int64_t task) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[size_t(slot)];
  if (s.task == task) s.busy = false;
}

nlohmann::json SlotTable::Json(int parallel, int64_t n_ctx) const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < parallel; ++i) {
    const Slot s = size_t(i) < slots_.size() ? slots_[size_t(i)] : Slot{};
    const int64_t remain = s.busy ? s.n_predict - s.n_decoded : 0;
    out.push_back({{"id", i},
                   {"id_task", s.busy ? s.task : -1},
                   {"n_ctx", n_ctx},
                   {"speculative", false},
                   {"is_processing", s.busy},
                   {"n_prompt_tokens", s.busy ? s.n_prompt : 0},
                   {"next_token",
                    {{"has_next_token", s.busy}, {"n_remain", remain}, {"n_decoded", s.busy ? s.n_decoded : 0}}}});
  }
  return out;
}

}  // namespace anymoe
