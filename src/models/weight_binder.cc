#include "models/weight_binder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>

#include "formats/gguf.h"
#include "models/tensor_names.h"

namespace anymoe {

WeightBinder::WeightBinder(const ModelFile& file, Backend& backend)
    : file_(file), backend_(backend) {
  if (!is_gguf()) return;
  auto arch = file.gguf->GetString("general.architecture");
  if (arch.ok()) gguf_arch_ = *arch;
}

std::string WeightBinder::FileName(const std::string& hf_name) const {
  return is_gguf() ? GgufTensorName(gguf_arch_, hf_name) : hf_name;
}

Expected<std::optional<Tensor>> WeightBinder::Bind(const std::string& hf_name,
                                                   const std::vector<int64_t>& shape) {
  const std::string name = FileName(hf_name);
  const TensorInfo* info = file_.tensors().Find(name);
  if (info == nullptr) return std::optional<Tensor>();
  if (info->shape != shape) {
    return Status::Error(file_.tensors().description() + ": tensor '" + name + "' has shape " +
                         ShapeString(info->shape) + ", expected " + ShapeString(shape));
  }
  if (shape.size() >= 2) {
    const BoundMatrix m{info->dtype, shape.back(), in_experts_};
    if (std::find(matrices_.begin(), matrices_.end(), m) == matrices_.end()) {
      matrices_.push_back(m);
    }
  }
  if (binding_experts_) {  // a view of the file's bytes, for LocateExperts only
    Tensor t;
    t.base = const_cast<uint8_t*>(info->data);
    t.dtype = info->dtype;
    t.rank = int(shape.size());
    std::copy(shape.begin(), shape.end(), t.shape.begin());
    t.scales = info->scales;  // FP8: LocateExperts gives each expert its rows' scales
    return std::optional<Tensor>(t);
  }
  ASSIGN_OR_RETURN(Tensor t, Prepare(*info));
  bound_bytes_ += info->bytes;
  if (progress_) progress_(info->bytes, false);
  return std::optional<Tensor>(t);
}

Expected<Tensor> WeightBinder::Prepare(const TensorInfo& info) {
  if (!in_experts_ || !cpu_experts_) return backend_.PrepareWeight(info);
  cpu_bytes_ += info.bytes;
  return backend_.PrepareCpuWeight(info);
}

Expected<std::optional<Tensor>> WeightBinder::Optional(const std::string& name,
                                                       std::initializer_list<int64_t> shape) {
  return Bind(name, shape);
}

Expected<Tensor> WeightBinder::Require(const std::string& name,
                                       std::initializer_list<int64_t> shape) {
  ASSIGN_OR_RETURN(auto t, Bind(name, shape));
  if (!t) {
    return Status::Error(file_.tensors().description() + ": missing tensor '" + FileName(name) +
                         "'");
  }
  return *t;
}

Expected<Tensor> WeightBinder::Layer(int64_t i, const std::string& suffix,
                                     std::initializer_list<int64_t> shape) {
  return Require(LayerTensorName(i, suffix), shape);
}

Expected<std::optional<Tensor>> WeightBinder::OptionalLayer(int64_t i, const std::string& suffix,
                                                            std::initializer_list<int64_t> shape) {
  return Optional(LayerTensorName(i, suffix), shape);
}

std::vector<int32_t> WeightBinder::BoundExperts(int64_t i, int64_t num_experts) const {
  if (subset_ != nullptr) {
    const auto kept = subset_->layer(i);
    return std::vector<int32_t>(kept.begin(), kept.end());
  }
  std::vector<int32_t> all(static_cast<size_t>(num_experts));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

Expected<Tensor> WeightBinder::LayerExpertRows(int64_t i, const std::string& suffix,
                                               std::initializer_list<int64_t> shape,
                                               std::vector<uint8_t>& storage) {
  if (subset_ == nullptr) return Layer(i, suffix, shape);
  std::vector<int64_t> file_shape(shape);
  file_shape[0] = subset_->file_experts;
  const std::string name = FileName(LayerTensorName(i, suffix));
  const TensorInfo* info = file_.tensors().Find(name);
  if (info == nullptr) {
    return Status::Error(file_.tensors().description() + ": missing tensor '" + name + "'");
  }
  if (info->shape != file_shape) {
    return Status::Error(file_.tensors().description() + ": tensor '" + name + "' has shape " +
                         ShapeString(info->shape) + ", expected " + ShapeString(file_shape));
  }
  if (info->scales) {
    return Status::Error(file_.tensors().description() + ": tensor '" + name +
                             "': expert pruning does not slice block-scaled (FP8) router rows",
                         ErrorKind::kInvalidArgument, "prune_unsupported");
  }
  // One row per expert: of a matrix its rows (whole quantisation blocks), of a
  // vector its elements.
  const uint64_t row_bytes = info->bytes / uint64_t(file_shape[0]);
  const auto kept = subset_->layer(i);
  storage.resize(kept.size() * row_bytes);
  for (size_t j = 0; j < kept.size(); ++j) {
    std::memcpy(storage.data() + j * row_bytes, info->data + uint64_t(kept[j]) * row_bytes,
                row_bytes);
  }
  std::vector<int64_t> kept_shape(shape);
  TensorInfo rows{name + "[kept experts]", info->dtype, kept_shape, storage.data(),
                  uint64_t(storage.size()), BlockScales{}};
  if (kept_shape.size() >= 2) {
    const BoundMatrix m{info->dtype, kept_shape.back(), false};
    if (std::find(matrices_.begin(), matrices_.end(), m) == matrices_.end()) matrices_.push_back(m);
  }
  ASSIGN_OR_RETURN(Tensor t, Prepare(rows));
  bound_bytes_ += rows.bytes;
  if (progress_) progress_(rows.bytes, false);
  return t;
}

Expected<bool> WeightBinder::PerExpert(int64_t i, const std::string& prefix,
                                       std::span<const int32_t> ids, int64_t ffn, int64_t hidden,
                                       ExpertWeights& out) {
  // HF per-expert names, or Mixtral's w1 (gate), w3 (up), w2 (down).
  for (const auto& names : {std::array<const char*, 3>{"gate_proj", "up_proj", "down_proj"},
                            std::array<const char*, 3>{"w1", "w3", "w2"}}) {
    auto name = [&](int64_t e, const char* w) {
      return LayerTensorName(i, prefix + "." + std::to_string(e) + "." + w + ".weight");
    };
    if (file_.tensors().Find(FileName(name(0, names[0]))) == nullptr) continue;
    for (const int64_t e : ids) {
      auto bind = [&](const char* w, std::initializer_list<int64_t> shape) {
        return Owns(i, e) ? Require(name(e, w), shape) : Remote(name(e, w), shape);
      };
      ASSIGN_OR_RETURN(Tensor g, bind(names[0], {ffn, hidden}));
      ASSIGN_OR_RETURN(Tensor u, bind(names[1], {ffn, hidden}));
      ASSIGN_OR_RETURN(Tensor d, bind(names[2], {hidden, ffn}));
      out.gate.push_back(g);
      out.up.push_back(u);
      out.down.push_back(d);
    }
    return true;
  }
  return false;
}

Expected<bool> WeightBinder::Stacked(int64_t i, const std::string& prefix, int64_t num_experts,
                                     std::span<const int32_t> ids, int64_t ffn, int64_t hidden,
                                     ExpertWeights& out) {
  const std::string base = LayerTensorName(i, prefix);
  // Only some experts prepared (this rank's, or the kept ones): each on its own.
  if ((placement_ != nullptr || subset_ != nullptr) && !binding_experts_) {
    const bool fused = file_.tensors().Find(FileName(base + ".gate_up_proj")) != nullptr;
    if (!fused && file_.tensors().Find(FileName(base + ".gate_proj.weight")) == nullptr) return false;
    RETURN_IF_ERROR(StackedSlices(i, base, fused, num_experts, ids, ffn, hidden, out));
    return true;
  }
  ASSIGN_OR_RETURN(auto fused, Optional(base + ".gate_up_proj", {num_experts, 2 * ffn, hidden}));
  std::optional<Tensor> gate, up, down;
  if (fused) {  // transformers v5: gate rows then up rows per expert
    ASSIGN_OR_RETURN(down, Optional(base + ".down_proj", {num_experts, hidden, ffn}));
  } else {      // GGUF ffn_{gate,up,down}_exps
    ASSIGN_OR_RETURN(gate, Optional(base + ".gate_proj.weight", {num_experts, ffn, hidden}));
    if (!gate) return false;
    ASSIGN_OR_RETURN(up, Optional(base + ".up_proj.weight", {num_experts, ffn, hidden}));
    ASSIGN_OR_RETURN(down, Optional(base + ".down_proj.weight", {num_experts, hidden, ffn}));
  }
  if (!down || (!fused && !up)) {
    return Status::Error(file_.tensors().description() + ": layer " + std::to_string(i) +
                         " has only part of its stacked expert tensors");
  }
  // Views of the file's bytes (streamed: located, never prepared).
  for (const int64_t e : ids) {
    if (fused) {
      const Tensor rows = fused->Reshaped({num_experts * 2 * ffn, hidden});
      out.gate.push_back(rows.RowSlice(e * 2 * ffn, ffn));
      out.up.push_back(rows.RowSlice(e * 2 * ffn + ffn, ffn));
    } else {
      out.gate.push_back(gate->Reshaped({num_experts * ffn, hidden}).RowSlice(e * ffn, ffn));
      out.up.push_back(up->Reshaped({num_experts * ffn, hidden}).RowSlice(e * ffn, ffn));
    }
    out.down.push_back(down->Reshaped({num_experts * hidden, ffn}).RowSlice(e * hidden, hidden));
  }
  return true;
}

bool WeightBinder::Owns(int64_t i, int64_t e) const {
  if (placement_ == nullptr || binding_experts_) return true;
  const auto owners = placement_->owners(i);
  return e >= int64_t(owners.size()) || owners[size_t(e)] == rank_;
}

Expected<Tensor> WeightBinder::Remote(const std::string& hf_name,
                                      std::initializer_list<int64_t> shape) {
  const std::string name = FileName(hf_name);
  const TensorInfo* info = file_.tensors().Find(name);
  if (info == nullptr) {
    return Status::Error(file_.tensors().description() + ": missing tensor '" + name + "'");
  }
  if (info->shape != std::vector<int64_t>(shape)) {
    return Status::Error(file_.tensors().description() + ": tensor '" + name + "' has shape " +
                         ShapeString(info->shape) + ", expected " + ShapeString(shape));
  }
  remote_bytes_ += info->bytes;
  Tensor t;
  t.dtype = info->dtype;
  t.rank = int(info->shape.size());
  std::copy(info->shape.begin(), info->shape.end(), t.shape.begin());
  return t;
}

Expected<Tensor> WeightBinder::PrepareRows(const TensorInfo& info, int64_t row0, int64_t rows) {
  const uint64_t row_bytes = info.bytes / uint64_t(info.rows());
  TensorInfo slice{info.name + "[rows " + std::to_string(row0) + "+" + std::to_string(rows) + "]",
                   info.dtype, {rows, info.cols()}, info.data + uint64_t(row0) * row_bytes,
                   uint64_t(rows) * row_bytes, BlockScales{}};
  ASSIGN_OR_RETURN(Tensor t, Prepare(slice));
  bound_bytes_ += slice.bytes;
  if (progress_) progress_(slice.bytes, false);
  return t;
}

Status WeightBinder::StackedSlices(int64_t i, const std::string& base, bool fused,
                                   int64_t num_experts, std::span<const int32_t> ids, int64_t ffn,
                                   int64_t hidden, ExpertWeights& out) {
  // [E, rows_per_expert, cols] each; the fused tensor holds gate rows then up rows.
  struct Part {
    std::string name;
    int64_t rows;
    int64_t cols;
    const TensorInfo* info = nullptr;
  };
  std::vector<Part> parts;
  if (fused) {
    parts = {{base + ".gate_up_proj", 2 * ffn, hidden}, {base + ".down_proj", hidden, ffn}};
  } else {
    parts = {{base + ".gate_proj.weight", ffn, hidden},
             {base + ".up_proj.weight", ffn, hidden},
             {base + ".down_proj.weight", hidden, ffn}};
  }
  for (Part& p : parts) {
    p.info = file_.tensors().Find(FileName(p.name));
    const std::vector<int64_t> shape{num_experts, p.rows, p.cols};
    if (p.info == nullptr) {
      return Status::Error(file_.tensors().description() + ": layer " + std::to_string(i) +
                           " has only part of its stacked expert tensors");
    }
    if (p.info->shape != shape) {
      return Status::Error(file_.tensors().description() + ": tensor '" + FileName(p.name) +
                           "' has shape " + ShapeString(p.info->shape) + ", expected " +
                           ShapeString(shape));
    }
    if (p.info->scales) {
      return Status::Error(file_.tensors().description() + ": tensor '" + FileName(p.name) +
                           "': expert parallelism does not split block-scaled (FP8) stacked "
                           "experts yet");
    }
  }
  auto view = [](const TensorInfo& info, int64_t rows, int64_t cols) {
    Tensor t;
    t.dtype = info.dtype;
    t.rank = 2;
    t.shape = {rows, cols, 0, 0};
    return t;
  };
  for (const int64_t e : ids) {
    std::vector<Tensor> views;  // gate, up, down
    for (const Part& p : parts) {
      const bool gate_up = fused && &p == &parts[0];
      for (int half = 0; half < (gate_up ? 2 : 1); ++half) {
        const int64_t rows = gate_up ? ffn : p.rows;
        const int64_t row0 = e * p.rows + half * ffn;
        if (Owns(i, e)) {
          ASSIGN_OR_RETURN(Tensor t, PrepareRows(*p.info, row0, rows));
          views.push_back(t);
        } else {
          remote_bytes_ += p.info->bytes / uint64_t(p.info->rows()) * uint64_t(rows);
          views.push_back(view(*p.info, rows, p.cols));
        }
      }
    }
    out.gate.push_back(views[0]);
    out.up.push_back(views[1]);
    out.down.push_back(views[2]);
  }
  return Status::Ok();
}

Status WeightBinder::LocateExperts(ExpertWeights& w) {
  w.spans.resize(w.gate.size());
  if (w.gate[0].scales) w.scales.resize(w.gate.size());
  for (size_t e = 0; e < w.gate.size(); ++e) {
    Tensor* parts[kExpertParts] = {&w.gate[e], &w.up[e], &w.down[e]};
    for (int p = 0; p < kExpertParts; ++p) {
      Tensor& t = *parts[p];
      const uint64_t bytes = uint64_t(t.rows()) * t.row_bytes();
      ASSIGN_OR_RETURN(FileLocation at, file_.Locate(t.as<const uint8_t>(), bytes));
      w.spans[e][size_t(p)] = FileSpan{at.file, at.offset, bytes};
      streamed_bytes_ += bytes;
      if (t.scales) {
        // A cache slot holds the expert's rows from its row 0: its scales
        // start at the grid row of the expert's first row, which must begin a
        // block of rows (every release's experts do: 128-row blocks).
        CHECK(!w.scales.empty());
        const BlockScales& s = t.scales;
        const int64_t first = int64_t(t.offset / t.row_bytes());
        if (first % s.rows != 0) {
          return Status::Error(file_.tensors().description() + ": FP8 expert " + std::to_string(e) +
                               " starts at row " + std::to_string(first) + ", inside a block of " +
                               std::to_string(s.rows) +
                               " rows of scales: it cannot stream (use --expert-cache off)");
        }
        w.scales[e][size_t(p)] = BlockScales{
            static_cast<const uint8_t*>(s.data) + s.GridBytes(first, t.cols()), s.rows, s.cols};
      }
      t.base = nullptr;  // never read in place: the expert cache supplies the bytes
      t.offset = 0;
      t.scales = {};
    }
  }
  return Status::Ok();
}

Expected<ExpertWeights> WeightBinder::Experts(int64_t i, const std::string& prefix,
                                              int64_t num_experts, int64_t ffn, int64_t hidden) {
  ExpertWeights w;
  binding_experts_ = stream_experts_ && !cpu_experts_;  // --n-cpu-moe layers stay on the host
  in_experts_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{binding_experts_}, reset_in{in_experts_};
  const int64_t file_experts = FileExperts(num_experts);
  const std::vector<int32_t> ids = BoundExperts(i, num_experts);
  if (int64_t(ids.size()) != num_experts) {
    return Status::Error(file_.tensors().description() + ": layer " + std::to_string(i) +
                         ": the expert subset keeps " + std::to_string(ids.size()) +
                         " experts, the model has " + std::to_string(num_experts));
  }
  ASSIGN_OR_RETURN(bool per_expert, PerExpert(i, prefix, ids, ffn, hidden, w));
  if (!per_expert) {
    ASSIGN_OR_RETURN(bool stacked, Stacked(i, prefix, file_experts, ids, ffn, hidden, w));
    if (!stacked) w.gate.clear();
  }
  if (!w.gate.empty()) {
    if (binding_experts_) RETURN_IF_ERROR(LocateExperts(w));
    return w;
  }
  return Status::Error(file_.tensors().description() + ": layer " + std::to_string(i) +
                       " has no expert weights under '" + FileName(LayerTensorName(i, prefix)) +
                       "' (per-expert, stacked or fused gate_up)");
}

}  // namespace anymoe
