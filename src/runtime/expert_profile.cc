#include "runtime/expert_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace anymoe {
namespace {

constexpr char kFormat[] = "anymoe-expert-profile";
constexpr int kVersion = 1;
constexpr uint64_t kMaxProfileBytes = uint64_t(256) << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxExperts = int64_t(1) << 16;

Status Malformed(const std::string& name, const std::string& what) {
  return Status::Error(name + ": profile_malformed: not an expert profile: " + what,
                       ErrorKind::kInvalidArgument, "profile_malformed");
}

// `j[key]` as a vector of `n` finite non-negative numbers.
template <typename T>
Expected<std::vector<T>> ReadCounts(const nlohmann::json& j, const char* key, int64_t n,
                                    const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array() || int64_t(it->size()) != n) {
    return Status::Error(where + "." + key + " is not an array of " + std::to_string(n) +
                         " numbers");
  }
  std::vector<T> out;
  out.reserve(size_t(n));
  for (const auto& v : *it) {
    if (!v.is_number()) return Status::Error(where + "." + key + " holds a non-number");
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || d > 9e18) {
      return Status::Error(where + "." + key + " holds " + v.dump() +
                           " (values are finite and non-negative)");
    }
    if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) return Status::Error(where + "." + key + " holds a fraction");
      out.push_back(v.get<T>());
    } else {
      out.push_back(T(d));
    }
  }
  return out;
}

}  // namespace

std::string ExpertProfile::ToJson() const {
  nlohmann::ordered_json out;
  out["format"] = kFormat;
  out["version"] = kVersion;
  out["model"] = {{"name", model_name}, {"fingerprint", fingerprint}};
  out["source"] = source;
  out["num_experts"] = num_experts;
  out["experts_per_token"] = experts_per_token;
  out["tokens"] = tokens;
  nlohmann::ordered_json ls = nlohmann::ordered_json::array();
  for (const LayerProfile& l : layers) {
    ls.push_back({{"layer", l.layer},
                  {"tokens_routed", l.tokens_routed},
                  {"probability_mass", l.probability_mass},
                  {"saliency", l.saliency}});
  }
  out["layers"] = std::move(ls);
  return out.dump(1) + "\n";
}

Status ExpertProfile::Write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::Error(tmp + ": cannot open for writing");
    const std::string text = ToJson();
    f.write(text.data(), std::streamsize(text.size()));
    f.close();
    if (!f) return Status::Error(tmp + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error(path + ": cannot replace: " + ec.message());
  return Status::Ok();
}

Expected<ExpertProfile> ExpertProfile::Parse(std::string_view text, const std::string& name) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Malformed(name, "not a JSON object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"] != kFormat) {
    return Malformed(name, "\"format\" is not \"" + std::string(kFormat) + "\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != kVersion) {
    return Malformed(name, "\"version\" is not " + std::to_string(kVersion));
  }
  ExpertProfile p;
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || !model->contains("fingerprint") ||
      !(*model)["fingerprint"].is_string()) {
    return Malformed(name, "\"model\".\"fingerprint\" is missing");
  }
  p.fingerprint = (*model)["fingerprint"].get<std::string>();
  if (model->contains("name") && (*model)["name"].is_string()) {
    p.model_name = (*model)["name"].get<std::string>();
  }
  if (j.contains("source") && j["source"].is_string()) p.source = j["source"].get<std::string>();
  for (const char* key : {"num_experts", "experts_per_token", "tokens"}) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
      return Malformed(name, std::string("\"") + key + "\" is not a non-negative integer");
    }
  }
  p.num_experts = j["num_experts"].get<int64_t>();
  p.experts_per_token = j["experts_per_token"].get<int64_t>();
  p.tokens = j["tokens"].get<int64_t>();
  if (p.num_experts < 1 || p.num_experts > kMaxExperts || p.experts_per_token < 1 ||
      p.experts_per_token > p.num_experts) {
    return Malformed(name, "num_experts " + std::to_string(p.num_experts) +
                               " / experts_per_token " + std::to_string(p.experts_per_token) +
                               " out of range");
  }
  const auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array() || int64_t(layers->size()) > kMaxLayers) {
    return Malformed(
        name, "\"layers\" is not an array of at most " + std::to_string(kMaxLayers) + " layers");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    const nlohmann::json& l = (*layers)[i];
    const std::string where = "layers[" + std::to_string(i) + "]";
    if (!l.is_object() || !l.contains("layer") || !l["layer"].is_number_integer() ||
        l["layer"].get<int64_t>() < 0 || l["layer"].get<int64_t>() >= kMaxLayers) {
      return Malformed(name, where + ".layer is not a layer index");
    }
    LayerProfile lp;
    lp.layer = l["layer"].get<int64_t>();
    if (!p.layers.empty() && lp.layer <= p.layers.back().layer) {
      return Malformed(name, where + ".layer is not after the layer before it");
    }
    auto counts = ReadCounts<int64_t>(l, "tokens_routed", p.num_experts, where);
    if (!counts.ok()) return Malformed(name, counts.status().message());
    auto mass = ReadCounts<double>(l, "probability_mass", p.num_experts, where);
    if (!mass.ok()) return Malformed(name, mass.status().message());
    auto saliency = ReadCounts<double>(l, "saliency", p.num_experts, where);
    if (!saliency.ok()) return Malformed(name, saliency.status().message());
    lp.tokens_routed = std::move(counts).value();
    lp.probability_mass = std::move(mass).value();
    lp.saliency = std::move(saliency).value();
    p.layers.push_back(std::move(lp));
  }
  return p;
}

Expected<ExpertProfile> ExpertProfile::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::Error(path + ": cannot open", ErrorKind::kInvalidArgument, "profile_unreadable");
  }
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0 || uint64_t(size) > kMaxProfileBytes) {
    return Malformed(path, "larger than 256 MiB");
  }
  in.seekg(0);
  std::string text(size_t(size), '\0');
  in.read(text.data(), size);
  if (!in)
    return Status::Error(path + ": read failed", ErrorKind::kInvalidArgument, "profile_unreadable");
  return Parse(text, path);
}

Status ExpertProfile::CheckModel(const std::string& model_fingerprint,
                                 const ModelConfig& config) const {
  const auto mismatch = [&](const std::string& what) {
    return Status::Error(
        "profile_model_mismatch: the expert profile was measured on another "
        "model (" +
            what + ")",
        ErrorKind::kInvalidArgument, "profile_model_mismatch");
  };
  if (fingerprint != model_fingerprint) {
    return mismatch("fingerprint " + fingerprint + " of " +
                    (model_name.empty() ? std::string("?") : model_name) + ", this model's is " +
                    model_fingerprint);
  }
  if (num_experts != config.moe.num_experts || experts_per_token != config.moe.experts_per_token) {
    return mismatch(std::to_string(num_experts) + " experts, top-" +
                    std::to_string(experts_per_token));
  }
  // A profile holds every MoE layer of its model, in order.
  std::vector<int64_t> moe_layers, profiled;
  for (size_t i = 0; i < config.ffn_kinds.size(); ++i) {
    if (config.ffn_kinds[i] == FfnKind::kMoe) moe_layers.push_back(int64_t(i));
  }
  for (const LayerProfile& l : layers) profiled.push_back(l.layer);
  if (profiled != moe_layers) {
    return mismatch(std::to_string(profiled.size()) + " MoE layers from " +
                    (profiled.empty() ? std::string("none") : std::to_string(profiled[0])) +
                    ", this model has " + std::to_string(moe_layers.size()) + " from " +
                    (moe_layers.empty() ? std::string("none") : std::to_string(moe_layers[0])));
  }
  return Status::Ok();
}

std::vector<ExpertRef> ExpertProfile::Ranked(ExpertRanking ranking) const {
  struct Entry {
    double key, mass;
    ExpertRef e;
  };
  std::vector<Entry> all;
  for (const LayerProfile& l : layers) {
    for (int64_t x = 0; x < num_experts; ++x) {
      const double key = ranking == ExpertRanking::kFrequency ? double(l.tokens_routed[size_t(x)])
                                                              : l.saliency[size_t(x)];
      all.push_back({key, l.probability_mass[size_t(x)], {l.layer, int32_t(x)}});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) {
    if (a.key != b.key) return a.key > b.key;
    return a.mass > b.mass;  // stable: layer, then expert, ascending
  });
  std::vector<ExpertRef> out;
  out.reserve(all.size());
  for (const Entry& e : all) out.push_back(e.e);
  return out;
}

ExpertProfiler::ExpertProfiler(const ModelConfig& config, std::string model_name,
                               std::string fingerprint, std::string source)
    : hidden_(config.hidden_size) {
  profile_.model_name = std::move(model_name);
  profile_.fingerprint = std::move(fingerprint);
  profile_.source = std::move(source);
  profile_.num_experts = config.moe.num_experts;
  profile_.experts_per_token = config.moe.experts_per_token;
  layer_index_.assign(config.ffn_kinds.size(), -1);
  for (size_t i = 0; i < config.ffn_kinds.size(); ++i) {
    if (config.ffn_kinds[i] != FfnKind::kMoe) continue;
    if (first_moe_layer_ < 0) first_moe_layer_ = int64_t(i);
    layer_index_[i] = int64_t(profile_.layers.size());
    LayerProfile l;
    l.layer = int64_t(i);
    const size_t e = size_t(config.moe.num_experts);
    l.tokens_routed.assign(e, 0);
    l.probability_mass.assign(e, 0.0);
    l.saliency.assign(e, 0.0);
    profile_.layers.push_back(std::move(l));
  }
  observer_.on_expert_outputs = [this](const RoutedExpertOutputs& r) { Record(r); };
}

void ExpertProfiler::Record(const RoutedExpertOutputs& r) {
  const int64_t e = profile_.num_experts, t = r.tokens;
  if (r.layer < 0 || r.layer >= int64_t(layer_index_.size()) || layer_index_[size_t(r.layer)] < 0) {
    return;
  }
  logits_.resize(size_t(r.logits.elements()));
  r.backend.ReadF32(r.logits, logits_);
  outputs_.resize(size_t(r.outputs.elements()));
  r.backend.ReadF32(r.outputs, outputs_);
  probs_.resize(size_t(e));
  std::lock_guard<std::mutex> lock(mu_);
  LayerProfile& l = profile_.layers[size_t(layer_index_[size_t(r.layer)])];
  if (r.layer == first_moe_layer_) profile_.tokens += t;
  for (int64_t i = 0; i < t; ++i) {
    const float* row = logits_.data() + i * e;
    double sum = 0;
    if (r.scoring == RouterSpec::Scoring::kSoftmax) {
      const float mx = *std::max_element(row, row + e);
      for (int64_t x = 0; x < e; ++x) sum += probs_[size_t(x)] = std::exp(double(row[x]) - mx);
    } else {
      for (int64_t x = 0; x < e; ++x)
        sum += probs_[size_t(x)] = 1.0 / (1.0 + std::exp(-double(row[x])));
    }
    for (int64_t x = 0; x < e; ++x) l.probability_mass[size_t(x)] += probs_[size_t(x)] / sum;
  }
  const int64_t h = hidden_;
  for (int64_t x = 0; x < e; ++x) {
    const int32_t begin = r.offsets[size_t(x)], end = r.offsets[size_t(x) + 1];
    l.tokens_routed[size_t(x)] += end - begin;
    for (int32_t s = begin; s < end; ++s) {
      const float* y = outputs_.data() + int64_t(s) * h;
      double sq = 0;
      for (int64_t c = 0; c < h; ++c) sq += double(y[c]) * y[c];
      l.saliency[size_t(x)] += double(r.weights[size_t(s)]) * std::sqrt(sq);
    }
  }
}

ExpertProfile ExpertProfiler::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  ExpertProfile p = profile_;
  for (LayerProfile& l : p.layers) {
    for (size_t x = 0; x < l.saliency.size(); ++x) {
      l.saliency[x] = l.tokens_routed[x] > 0 ? l.saliency[x] / double(l.tokens_routed[x]) : 0.0;
    }
  }
  return p;
}

}  // namespace anymoe
