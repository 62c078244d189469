#include "runtime/step_cost.h"

#include <algorithm>
#include <cmath>

namespace anymoe {

void StepCostModel::Observe(int64_t rows, double seconds) {
  if (rows <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  constexpr double keep = 1 - 1 / kWindow;
  const double x = double(rows);
  w_ = w_ * keep + 1;
  x_ = x_ * keep + x;
  y_ = y_ * keep + seconds;
  xx_ = xx_ * keep + x * x;
  xy_ = xy_ * keep + x * seconds;
}

bool StepCostModel::valid() const {
  if (w_ < 8) return false;  // too few steps yet
  // The spread of rows must be at least a few rows, else noise decides the slope.
  const double mean = x_ / w_;
  const double var = xx_ / w_ - mean * mean;
  return var >= 4;
}

double StepCostModel::row_seconds() const {
  const double mean_x = x_ / w_, mean_y = y_ / w_;
  const double var = xx_ / w_ - mean_x * mean_x;
  const double cov = xy_ / w_ - mean_x * mean_y;
  return std::max(0.0, cov / var);
}

double StepCostModel::fixed_seconds() const {
  return std::max(0.0, y_ / w_ - row_seconds() * (x_ / w_));
}

double StepCostModel::RowShare(int64_t rows) const {
  if (!valid() || rows <= 0) return 0;
  const double per_row = row_seconds() * double(rows);
  const double total = fixed_seconds() + per_row;
  return total > 0 ? std::clamp(per_row / total, 0.0, 1.0) : 0;
}

}  // namespace anymoe
