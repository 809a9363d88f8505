// A CanvasDecoder that replays the reference's decoder instead of computing one: the oracle's generation case
// default_p0_n2_s12 (tests/data/dgemma/golden/<model>/) recorded the raw logits of every decoder call
// (step_raw_logits_file, [calls, batch, L, V]), so a uniform-state loop fed this case's tapes can be run
// without the model. With `check` on, every call also checks that the loop hands the decoder what the
// reference did: the encoder's tokens and positions, each step's input canvas, its position, and the
// self-conditioning logits (none on a canvas's first step, else the previous call's logits / temperature,
// bit for bit); a mismatch is returned as the call's error. ScriptedCanvasModel is the Model around it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm::test {

class CountingCache : public EncoderCache {
 public:
  explicit CountingCache(int64_t batch) : batch_(batch) {}
  int64_t batch() const override { return batch_; }
  int64_t length() const override { return length_; }
  int64_t length_ = 0;

 private:
  int64_t batch_;
};

// generation_config.json of a tiny model, as the model's loader would read it.
inline UniformStateParams read_generation_config(const std::string& path) {
  const nlohmann::json g = read_json(path);
  UniformStateParams p;
  p.max_new_tokens = g.at("max_new_tokens").get<int64_t>();
  p.max_denoising_steps = g.at("max_denoising_steps").get<int64_t>();
  p.t_min = g.at("t_min").get<double>();
  p.t_max = g.at("t_max").get<double>();
  p.entropy_bound = g.at("sampler_config").at("entropy_bound").get<double>();
  p.stability_threshold = g.at("stability_threshold").get<int64_t>();
  p.confidence_threshold = g.at("confidence_threshold").get<double>();
  p.eos_ids = g.at("eos_token_id").get<std::vector<int32_t>>();
  p.pad_id = g.at("pad_token_id").get<int32_t>();
  return p;
}

inline std::vector<int32_t> flat(const nlohmann::json& rows) {
  std::vector<int32_t> out;
  for (const auto& row : rows)
    for (const auto& v : row) out.push_back(v.get<int32_t>());
  return out;
}

class ScriptedCanvasDecoder : public CanvasDecoder {
 public:
  // record: the case's generate.jsonl line; logits: its step_raw_logits_file.
  ScriptedCanvasDecoder(const std::string& model, nlohmann::json record, NpyArray logits, bool check)
      : record_(std::move(record)), logits_(std::move(logits)), check_(check) {
    defaults_ = read_generation_config(data_path("dgemma/models/" + model + "/generation_config.json"));
    for (const auto& canvas : record_.at("canvases"))
      for (const auto& step : canvas.at("steps")) steps_.push_back(step);
    if (logits_.shape.size() != 4 ||
        logits_.shape[1] != static_cast<int64_t>(record_.at("prompt_ids").size()))
      throw std::runtime_error(model + ": step logits are not [calls, batch, canvas, vocab]");
    length_ = logits_.shape[2];
  }

  int64_t canvas_length() const override { return length_; }
  const UniformStateParams& generation_defaults() const override { return defaults_; }
  std::unique_ptr<EncoderCache> new_cache(int64_t batch) const override {
    return std::make_unique<CountingCache>(batch);
  }

  Expected<std::vector<float>> encode(EncoderCache& cache, std::span<const int32_t> tokens, bool) override {
    auto& c = static_cast<CountingCache&>(cache);
    const size_t e = encodes_++;
    if (check_) {
      const auto& canvases = record_.at("canvases");
      if (e >= canvases.size())
        return failure("encode call " + std::to_string(e) + ": the reference made fewer");
      const auto& want = canvases[e];
      if (std::vector<int32_t>(tokens.begin(), tokens.end()) != flat(want.at("encoder_input_ids")))
        return failure("encode call " + std::to_string(e) + ": not the reference's encoder_input_ids");
      if (c.length() != want.at("encoder_position_ids")[0].get<int64_t>())
        return failure("encode call " + std::to_string(e) + ": at position " + std::to_string(c.length()));
    }
    c.length_ += static_cast<int64_t>(tokens.size()) / c.batch();
    return std::vector<float>{};
  }

  Expected<std::vector<float>> decode(const EncoderCache& cache, std::span<const int32_t> canvas,
                                      std::span<const float> sc) override {
    const int64_t calls = logits_.shape[0], n = logits_.shape[1] * logits_.shape[2] * logits_.shape[3];
    const int64_t k = calls_++;
    if (check_) {
      if (k >= calls) return failure("decode call " + std::to_string(k) + ": the reference made fewer");
      const nlohmann::json& step = steps_[static_cast<size_t>(k)];
      const std::string at = "decode call " + std::to_string(k) + ": ";
      if (std::vector<int32_t>(canvas.begin(), canvas.end()) != flat(step.at("input_canvas")))
        return failure(at + "not the reference's input_canvas");
      if (cache.length() != step.at("decoder_position_start").get<int64_t>())
        return failure(at + "at position " + std::to_string(cache.length()));
      if (sc.empty() != step.at("sc_none").get<bool>())
        return failure(at +
                       (sc.empty() ? "no self-conditioning logits" : "self-conditioning on a first step"));
      if (!sc.empty()) {
        const float T = steps_[static_cast<size_t>(k - 1)].at("temperature").get<float>();
        for (int64_t i = 0; i < n; ++i)
          if (sc[i] != logits_.data[(k - 1) * n + i] / T)
            return failure(at + "self-conditioning logits are not the previous step's logits / temperature");
      }
    }
    const int64_t from = (k % calls) * n;  // unchecked runs wrap around the recorded calls
    return std::vector<float>(logits_.data.begin() + from, logits_.data.begin() + from + n);
  }

  int64_t calls() const { return calls_; }

 private:
  static Expected<std::vector<float>> failure(const std::string& why) {
    return Expected<std::vector<float>>::failure("ScriptedCanvasDecoder: " + why);
  }

  nlohmann::json record_;
  std::vector<nlohmann::json> steps_;  // every canvas's steps, in call order
  NpyArray logits_;
  bool check_;
  int64_t length_ = 0, calls_ = 0;
  size_t encodes_ = 0;
  UniformStateParams defaults_;
};

class ScriptedCanvasModel : public Model {
 public:
  ScriptedCanvasModel(int64_t vocab, ScriptedCanvasDecoder* decoder) : decoder_(decoder) {
    info_.architecture = "diffusion_gemma";
    info_.vocab_size = vocab;
  }
  const ModelInfo& info() const override { return info_; }
  Expected<std::vector<float>> forward(const ForwardInput&) override {
    return Expected<std::vector<float>>::failure("ScriptedCanvasModel: no forward over tokens");
  }
  CanvasDecoder* canvas_decoder() override { return decoder_; }

 private:
  ModelInfo info_;
  ScriptedCanvasDecoder* decoder_;
};

}  // namespace dllm::test
