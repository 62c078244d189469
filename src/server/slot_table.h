// llama-server's GET /slots: what each of the server's parallel sequences is
// doing. Slot i is the i-th sequence the scheduler decodes at once
// (--parallel); a sequence claims the lowest free slot when it is submitted
// and frees it when its response ends. Sequences queued past the last slot
// are counted by /metrics, not listed here.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

namespace anymoe {

class SlotTable {
 public:
  // The lowest free slot for a sequence of a request (`task`: a number
  // per request), or -1 when every one of `parallel` slots is taken.
  int Claim(int parallel, int64_t task, int64_t n_prompt, int64_t n_predict);
  // One more token decoded in `slot` (-1: none) by `task`'s sequence; a
  // late event of a task whose slot was released changes nothing. Called on
  // the scheduler thread.
  void Decoded(int slot, int64_t task);
  void Release(int slot, int64_t task);
  // llama-server's shape: [{id, id_task, n_ctx, speculative, is_processing,
  // n_prompt_tokens, next_token: {has_next_token, n_remain, n_decoded}}].
  nlohmann::json Json(int parallel, int64_t n_ctx) const;

 private:
  struct Slot {
    bool busy = false;
    int64_t task = -1, n_prompt = 0, n_predict = 0, n_decoded = 0;
  };
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
};

}  // namespace anymoe
