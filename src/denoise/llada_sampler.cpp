#include "denoise/llada_sampler.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "denoise/prediction.h"
#include "denoise/schedule.h"

namespace dllm {

namespace {

struct Shape {
  int64_t batch, prompt_len, total_len, num_blocks, block_length, steps_per_block;
};

Shape check_params(const ModelInfo& info, const std::vector<std::vector<int32_t>>& prompts, const GenerateParams& p) {
  if (prompts.empty()) fail("generate: no prompt given");
  if (p.gen_length <= 0) fail("generate: gen_length must be > 0, got ", p.gen_length);
  const int64_t block = p.block_length > 0 ? p.block_length : p.gen_length;
  if (p.gen_length % block != 0)
    fail("generate: gen_length ", p.gen_length, " is not a multiple of block_length ", block);
  const int64_t blocks = p.gen_length / block;
  const int64_t steps = p.steps > 0 ? p.steps : p.gen_length;
  if (steps % blocks != 0)
    fail("generate: steps ", steps, " is not a multiple of the number of blocks ", blocks,
         " (gen_length / block_length)");
  if (p.temperature < 0) fail("generate: temperature must be >= 0, got ", p.temperature);
  if (p.cfg_scale < 0) fail("generate: cfg_scale must be >= 0, got ", p.cfg_scale);
  int64_t prompt_len = 0;
  for (const auto& prompt : prompts) prompt_len = std::max<int64_t>(prompt_len, static_cast<int64_t>(prompt.size()));
  for (size_t r = 0; r < prompts.size(); ++r)
    for (int32_t t : prompts[r])
      if (t < 0 || t >= info.vocab_size)
        fail("generate: prompt ", r, " has token id ", t, " outside the vocabulary [0, ", info.vocab_size, ")");
  if (prompt_len + p.gen_length > info.max_seq_len)
    fail("generate: prompt (", prompt_len, ") + gen_length (", p.gen_length, ") exceeds the model's maximum of ",
         info.max_seq_len, " positions");
  return {static_cast<int64_t>(prompts.size()), prompt_len, prompt_len + p.gen_length, blocks, block, steps / blocks};
}

// A per-position random stream, so results do not depend on the thread count or the order positions are visited.
uint64_t stream_seed(uint64_t seed, int64_t forward, int64_t row, int64_t pos) {
  uint64_t z = seed ^ (static_cast<uint64_t>(forward) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(row) << 48) ^ (static_cast<uint64_t>(pos) * 0xBF58476D1CE4E5B9ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

GenerateResult generate_llada(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                              const GenerateParams& params, const StepCallback& on_step) {
  const auto start = std::chrono::steady_clock::now();
  const ModelInfo& info = model.info();
  const Shape s = check_params(info, prompts, params);
  const int32_t mask = info.mask_id;
  const int64_t vocab = info.vocab_size;

  // x = left-padded prompt (pad id, as the reference batches prompts of unequal length) + gen_length masks.
  std::vector<std::vector<int32_t>> x(s.batch, std::vector<int32_t>(s.total_len, mask));
  for (int64_t b = 0; b < s.batch; ++b) {
    const auto& prompt = prompts[b];
    const int64_t pad = s.prompt_len - static_cast<int64_t>(prompt.size());
    std::fill(x[b].begin(), x[b].begin() + pad, info.pad_id >= 0 ? info.pad_id : info.eos_id);
    std::copy(prompt.begin(), prompt.end(), x[b].begin() + pad);
  }
  // prompt_index: everything that is not a mask at the start (the cfg branch masks exactly these).
  std::vector<std::vector<uint8_t>> is_prompt(s.batch);
  int64_t logits_from = s.prompt_len;  // masks inside the prompt (infilling) need logits too
  for (int64_t b = 0; b < s.batch; ++b) {
    is_prompt[b].resize(s.total_len);
    for (int64_t i = 0; i < s.total_len; ++i) {
      is_prompt[b][i] = x[b][i] != mask;
      if (!is_prompt[b][i]) logits_from = std::min(logits_from, i);
    }
  }
  const bool cfg = params.cfg_scale > 0;
  const int64_t rows = cfg ? 2 * s.batch : s.batch;
  const int64_t span = s.total_len - logits_from;

  PredictionOptions popts;
  popts.temperature = params.temperature;
  popts.random_confidence = params.remasking == Remasking::kRandom;
  if (params.logits_eos_inf) popts.suppress_token = info.eos_id;
  if (params.confidence_eos_eot_inf) {
    // The reference writes `logits_with_noise[eos] = logits[eot] = -inf`; at temperature 0 those two tensors are
    // the same object, so EOS is excluded from the confidence softmax too.
    popts.confidence_exclude[0] = info.eot_id;
    if (params.temperature <= 0) popts.confidence_exclude[1] = info.eos_id;
  }

  GenerateResult result;
  std::vector<int32_t> tokens(rows * s.total_len);
  std::vector<std::vector<int32_t>> canvas(s.batch);
  std::vector<std::vector<int64_t>> committed(s.batch);
  std::vector<uint8_t> finished(s.batch, 0);  // stop_at_eos
  std::vector<Prediction> pred(s.batch * span);

  for (int64_t blk = 0; blk < s.num_blocks; ++blk) {
    const int64_t block_begin = s.prompt_len + blk * s.block_length;
    const int64_t block_end = block_begin + s.block_length;
    std::vector<std::vector<int64_t>> quota(s.batch);
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t masked = std::count(x[b].begin() + block_begin, x[b].begin() + block_end, mask);
      quota[b] = uniform_transfer_counts(masked, s.steps_per_block);
    }
    for (int64_t step = 0; step < s.steps_per_block; ++step) {
      if (params.stop_at_eos && std::all_of(finished.begin(), finished.end(), [](uint8_t f) { return f; })) break;
      // The batched forward: cond rows, then (cfg) uncond rows with every prompt position masked.
      for (int64_t b = 0; b < s.batch; ++b) {
        std::copy(x[b].begin(), x[b].end(), tokens.begin() + b * s.total_len);
        if (cfg)
          for (int64_t i = 0; i < s.total_len; ++i)
            tokens[(s.batch + b) * s.total_len + i] = is_prompt[b][i] ? mask : x[b][i];
      }
      ForwardInput in;
      in.tokens = tokens;
      in.batch = rows;
      in.logits_from = logits_from;
      std::vector<float> logits = model.forward(in).value();
      ++result.forwards;
      if (cfg) {
        const float scale = static_cast<float>(params.cfg_scale + 1.0);
        const size_t half = static_cast<size_t>(s.batch * span * vocab);
        for (size_t i = 0; i < half; ++i) {
          const float un = logits[half + i];
          logits[i] = un + scale * (logits[i] - un);
        }
      }

#pragma omp parallel for collapse(2) schedule(dynamic, 4)
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t i = 0; i < span; ++i) {
          const int64_t pos = logits_from + i;
          if (x[b][pos] != mask || pos >= block_end) continue;  // not eligible: keep, no need to predict
          Rng rng(stream_seed(params.seed, result.forwards, b, pos));
          pred[b * span + i] = predict_llada({logits.data() + (b * span + i) * vocab, static_cast<size_t>(vocab)},
                                             popts, rng);
        }

      for (int64_t b = 0; b < s.batch; ++b) {
        committed[b].clear();
        if (finished[b]) continue;
        // Eligible: every masked position up to the end of the current block (earlier blocks included).
        std::vector<int64_t> eligible;
        for (int64_t pos = logits_from; pos < block_end; ++pos)
          if (x[b][pos] == mask) eligible.push_back(pos);
        const int64_t k = std::min<int64_t>(quota[b][step], static_cast<int64_t>(eligible.size()));
        // topk by confidence; equal confidences go to the lower position.
        std::partial_sort(eligible.begin(), eligible.begin() + k, eligible.end(), [&](int64_t a, int64_t c) {
          const double ca = pred[b * span + a - logits_from].confidence;
          const double cc = pred[b * span + c - logits_from].confidence;
          return ca != cc ? ca > cc : a < c;
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t pos = eligible[j];
          x[b][pos] = pred[b * span + pos - logits_from].token;  // may be the mask id itself (kept masked)
          committed[b].push_back(pos - s.prompt_len);
        }
        if (params.stop_at_eos && info.eos_id >= 0) {
          // Stop once an EOS is committed with nothing masked before it: the answer is complete.
          for (int64_t pos = s.prompt_len; pos < s.total_len; ++pos) {
            if (x[b][pos] == mask) break;
            if (x[b][pos] == info.eos_id) {
              std::fill(x[b].begin() + pos, x[b].end(), info.eos_id);
              finished[b] = 1;
              break;
            }
          }
        }
      }

      if (on_step) {
        for (int64_t b = 0; b < s.batch; ++b) canvas[b].assign(x[b].begin() + s.prompt_len, x[b].end());
        StepEvent ev;
        ev.block = blk;
        ev.step = step;
        ev.forwards = result.forwards;
        ev.canvas = &canvas;
        ev.committed = &committed;
        if (!on_step(ev)) {
          result.cancelled = true;
          blk = s.num_blocks;
          break;
        }
      }
    }
  }

  for (int64_t b = 0; b < s.batch; ++b) result.outputs.emplace_back(x[b].begin() + s.prompt_len, x[b].end());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Expected<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateParams& params, const StepCallback& on_step) {
  return capture([&] { return generate_llada(model, prompts, params, on_step); });
}

}  // namespace dllm
