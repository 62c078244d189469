// What one more row costs in a forward step, measured as the server runs.
// A step's time is modelled as T = fixed + per_row * rows: the fixed part is
// reading the weights (and launching the step), the per-row part the
// multiply-adds of each token. A draft row pays only if its expected tokens
// outweigh what the row costs against the step's average: on a memory-bound
// step (one sequence) a row is almost free, on a compute-bound one (many
// sequences batched on a CPU) it costs as much as a plain token.
#pragma once

#include <cstdint>

namespace anymoe {

class StepCostModel {
 public:
  // One step of `rows` rows (decode, draft and prompt tokens) that took
  // `seconds`. Recent steps weigh more: each new one by 1/window.
  void Observe(int64_t rows, double seconds);

  // The share of a step of `rows` rows that its per-row part takes,
  // per_row * rows / T(rows), in [0, 1]: what a row costs as a fraction of
  // the average row of the step. 0 until the steps seen differ enough in
  // their rows to tell the two parts apart (a draft is then taken as free).
  double RowShare(int64_t rows) const;

  // The fitted parts, in seconds (for tests and logs); valid() first.
  bool valid() const;
  double fixed_seconds() const;
  double row_seconds() const;

 private:
  static constexpr double kWindow = 64;
  // Exponentially weighted sums for a least-squares line through (rows, seconds).
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;
};

}  // namespace anymoe
