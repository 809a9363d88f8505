// The uniform-state sampler (denoise/uniform_state.h). References are to the reference generate() and the
// oracle README (tests/data/dgemma/README.md §6 items 16-24).
#include "denoise/uniform_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "denoise/random_tape.h"

namespace dllm {

namespace {

// The call's settings, else the model's generation_config.json (every field but max_length is needed).
struct Settings {
  int64_t max_new_tokens = 0, steps = 0, stability = 0;
  std::optional<int64_t> max_length;
  double t_min = 0, t_max = 0, bound = 0, confidence = 0;
  std::vector<int32_t> eos;
  int32_t pad = 0;
};

template <class T>
T pick(const std::optional<T>& given, const std::optional<T>& fallback, const char* name) {
  if (given) return *given;
  if (!fallback)
    fail("uniform-state generation: ", name, " is set neither here nor in generation_config.json");
  return *fallback;
}

// Resolves and checks the settings as the reference's DiffusionGemmaGenerationConfig.validate() does.
Settings resolve(const UniformStateParams& p, const UniformStateParams& d) {
  Settings s;
  s.max_new_tokens = pick(p.max_new_tokens, d.max_new_tokens, "max_new_tokens");
  s.max_length = p.max_length ? p.max_length : d.max_length;
  s.steps = pick(p.max_denoising_steps, d.max_denoising_steps, "max_denoising_steps");
  s.t_min = pick(p.t_min, d.t_min, "t_min");
  s.t_max = pick(p.t_max, d.t_max, "t_max");
  s.bound = pick(p.entropy_bound, d.entropy_bound, "entropy_bound");
  s.stability = pick(p.stability_threshold, d.stability_threshold, "stability_threshold");
  s.confidence = pick(p.confidence_threshold, d.confidence_threshold, "confidence_threshold");
  s.eos = pick(p.eos_ids, d.eos_ids, "eos_token_id");
  s.pad = pick(p.pad_id, d.pad_id, "pad_token_id");
  if (s.max_new_tokens <= 0) fail("max_new_tokens must be > 0, got ", s.max_new_tokens);
  if (s.max_length && *s.max_length <= 0) fail("max_length must be > 0, got ", *s.max_length);
  if (s.steps <= 0) fail("max_denoising_steps must be > 0, got ", s.steps);
  if (!(s.t_min >= 0) || !(s.t_max > s.t_min))
    fail("the temperatures need 0 <= t_min < t_max, got t_min ", s.t_min, ", t_max ", s.t_max);
  if (!(s.bound > 0)) fail("entropy_bound must be > 0, got ", s.bound);
  if (s.stability < 0) fail("stability_threshold must be >= 0, got ", s.stability);
  if (!(s.confidence > 0)) fail("confidence_threshold must be > 0, got ", s.confidence);
  return s;
}

void check_ids(std::span<const int32_t> ids, int64_t vocab, const char* what, size_t row) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      fail("uniform-state generation: ", what, " row ", row, " holds id ", id,
           ", outside the vocabulary [0, ", vocab, ")");
}

struct RowStats {
  int32_t argmax = 0;  // the lowest index on ties, as torch.argmax
  float entropy = 0;   // of softmax(x), as Categorical(logits=x).entropy()
  double max = 0, sum = 0;
};

RowStats row_stats(std::span<const float> x) {
  RowStats r;
  for (size_t v = 1; v < x.size(); ++v)
    if (x[v] > x[r.argmax]) r.argmax = static_cast<int32_t>(v);
  r.max = x[r.argmax];
  double weighted = 0;  // sum e_v (x_v - max); H = log(sum) - weighted / sum
  for (float xv : x) {
    const double d = xv - r.max, e = std::exp(d);
    r.sum += e;
    if (e > 0) weighted += e * d;
  }
  r.entropy = static_cast<float>(std::log(r.sum) - weighted / r.sum);
  return r;
}

// torch's CPU multinomial(p, 1): p = softmax in f32, then argmax of p / q in f32 (the first index on ties).
int32_t sample_row(std::span<const float> x, const RowStats& r, std::span<const float> q) {
  int32_t best = 0;
  float best_ratio = -1;
  for (size_t v = 0; v < x.size(); ++v) {
    const float ratio = static_cast<float>(std::exp(x[v] - r.max) / r.sum) / q[v];
    if (ratio > best_ratio) best = static_cast<int32_t>(v), best_ratio = ratio;
  }
  return best;
}

class UniformLoop {
 public:
  UniformLoop(Model& model, CanvasDecoder& decoder, const std::vector<std::vector<int32_t>>& prompts,
              const GenerateParams& params, const StepCallback& on_step, const UniformStateHooks& hooks)
      : decoder_(decoder),
        prompts_(prompts),
        params_(params),
        on_step_(on_step),
        hooks_(hooks),
        B_(static_cast<int64_t>(prompts.size())),
        L_(decoder.canvas_length()),
        V_(model.info().vocab_size),
        s_(resolve(params.uniform_state, decoder.generation_defaults())),
        draws_(params.tape.get(), params.seed, B_, L_, V_) {}

  GenerateResult run() {
    const int64_t P = static_cast<int64_t>(prompts_[0].size());
    // max_length counts only when max_new_tokens is the default 256 (G:888).
    const int64_t new_tokens =
        s_.max_length && s_.max_new_tokens == 256 ? *s_.max_length - P : s_.max_new_tokens;
    const int64_t canvases = new_tokens > 0 ? (new_tokens + L_ - 1) / L_ : 0;
    out_.assign(static_cast<size_t>(B_), {});
    done_.assign(static_cast<size_t>(B_), 0);
    passes_.assign(static_cast<size_t>(B_), 0);
    auto cache = decoder_.new_cache(B_);
    std::vector<int32_t> encode;  // the prompt, then each committed canvas
    for (const auto& p : prompts_) encode.insert(encode.end(), p.begin(), p.end());
    for (int64_t c = 0; c < canvases && !result_.cancelled; ++c) {
      decoder_.encode(*cache, encode).value();
      result_.forward_tokens += static_cast<int64_t>(encode.size());
      std::vector<int32_t> argmax = denoise(*cache, c);
      if (result_.cancelled) break;
      encode = finalize(argmax, P + (c + 1) * L_);
      ++result_.canvases_run;
      if (std::all_of(done_.begin(), done_.end(), [](uint8_t d) { return d; })) break;
    }
    result_.outputs = out_;
    for (int64_t b = 0; b < B_; ++b) {
      const auto& row = out_[b];
      const auto valid = std::count_if(row.begin(), row.end(), [&](int32_t t) { return t != s_.pad; });
      // num_valid / passes in float32, as the reference divides the two tensors (G:852-855).
      result_.tokens_per_forward.push_back(
          passes_[b] ? static_cast<double>(static_cast<float>(valid) / static_cast<float>(passes_[b])) : 0.0);
    }
    return result_;
  }

 private:
  // One canvas's denoising loop (G:758-791); returns the last step's argmax canvas [B * L].
  std::vector<int32_t> denoise(const EncoderCache& cache, int64_t c) {
    const size_t n = static_cast<size_t>(B_ * L_), V = static_cast<size_t>(V_);
    std::vector<int32_t> current = draws_.uniform_canvas();
    if (c == 0 && !params_.canvas_ids.empty()) {  // the draw above is still made (G:985-987)
      current.clear();
      for (const auto& row : params_.canvas_ids) current.insert(current.end(), row.begin(), row.end());
    }
    std::vector<int32_t> argmax = current, new_argmax(n), samples(n), next(n);
    std::vector<float> sc, entropy(n), q(V);  // sc: the previous step's processed logits (none at first)
    std::vector<uint8_t> accepted(n), stopped(static_cast<size_t>(B_), 0), frozen;
    std::vector<RowStats> stats(n);
    // The last `stability` argmax canvases, oldest first; -1 so that the first step is never stable.
    std::vector<int32_t> history(static_cast<size_t>(s_.stability) * n, -1);
    for (int64_t cur = s_.steps; cur >= 1; --cur) {
      frozen = stopped;
      for (int64_t b = 0; b < B_; ++b) passes_[b] += !(frozen[b] || done_[b]);
      std::vector<float> logits = decoder_.decode(cache, current, sc).value();
      if (logits.size() != n * V)
        fail("uniform-state generation: the decoder returned ", logits.size(), " logits, expected ", B_, "x",
             L_, "x", V_);
      ++result_.forwards;
      result_.forward_tokens += static_cast<int64_t>(n);
      const float T = uniform_state_temperature(s_.t_min, s_.t_max, cur, s_.steps);
      for (float& x : logits) x /= T;  // the processed logits, f32 as torch's scores / temperature
#pragma omp parallel for schedule(static) if (n * V >= (1 << 16))
      for (size_t i = 0; i < n; ++i) {
        stats[i] = row_stats(std::span<const float>(logits).subspan(i * V, V));
        new_argmax[i] = stats[i].argmax;
        entropy[i] = stats[i].entropy;
      }
      if (!hooks_.exponential && draws_.samples_on_tape()) {
        samples = draws_.sample_canvas();
      } else {
        for (size_t i = 0; i < n; ++i) {
          if (hooks_.exponential)
            hooks_.exponential(static_cast<int64_t>(i), q);
          else
            draws_.exponential(q);
          samples[i] = sample_row(std::span<const float>(logits).subspan(i * V, V), stats[i], q);
        }
      }
      for (int64_t b = 0; b < B_; ++b)
        entropy_bound_mask(std::span<const float>(entropy).subspan(b * L_, L_), s_.bound,
                           std::span<uint8_t>(accepted).subspan(b * L_, L_));
      const std::vector<int32_t> noise = draws_.uniform_canvas();  // renoise every unaccepted position
      for (size_t i = 0; i < n; ++i) next[i] = accepted[i] ? samples[i] : noise[i];
      // Rows done with this canvas keep their argmax, canvas and self-conditioning logits (G:1056-1065).
      for (int64_t b = 0; b < B_; ++b) {
        if (!frozen[b]) continue;
        const size_t at = static_cast<size_t>(b * L_);
        std::copy_n(argmax.begin() + at, L_, new_argmax.begin() + at);
        std::copy_n(current.begin() + at, L_, next.begin() + at);
        std::copy_n(sc.begin() + at * V, L_ * V_, logits.begin() + at * V);
      }
      update_stopped(new_argmax, entropy, history, stopped);
      sc = std::move(logits);
      current = next;
      argmax = new_argmax;
      if (hooks_.trace) hooks_.trace({c, s_.steps - cur, cur, T, samples, entropy, accepted, stopped});
      if (on_step_ && !on_step_(event(c, s_.steps - cur, current, accepted, frozen))) {
        result_.cancelled = true;
        break;
      }
      if (std::all_of(stopped.begin(), stopped.end(), [](uint8_t d) { return d; })) break;
    }
    return argmax;
  }

  // StableAndConfidentStoppingCriteria (G:519-537): the argmax equals each of the last `stability` argmax
  // canvases, and the mean entropy is below the confidence threshold.
  void update_stopped(const std::vector<int32_t>& argmax, const std::vector<float>& entropy,
                      std::vector<int32_t>& history, std::vector<uint8_t>& stopped) const {
    const size_t n = argmax.size();
    for (int64_t b = 0; b < B_; ++b) {
      const size_t at = static_cast<size_t>(b * L_);
      bool stable = true;
      for (size_t h = 0; h < history.size() && stable; h += n)
        stable = std::equal(argmax.begin() + at, argmax.begin() + at + L_, history.begin() + h + at);
      const double sum = std::accumulate(entropy.begin() + at, entropy.begin() + at + L_, 0.0);
      const bool confident =
          static_cast<float>(sum / static_cast<double>(L_)) < static_cast<float>(s_.confidence);
      stopped[b] |= stable && confident;
    }
    if (!history.empty()) {
      history.erase(history.begin(), history.begin() + n);
      history.insert(history.end(), argmax.begin(), argmax.end());
    }
  }

  // _finalize_canvas (G:1203): a row with an EOS id anywhere in the canvas is done and gets pad after its
  // first EOS; rows done before get a whole canvas of pad; every row is done once `length` reaches
  // max_length. Appends the canvas to the outputs and returns it (the next encoder input).
  std::vector<int32_t> finalize(const std::vector<int32_t>& argmax, int64_t length) {
    const bool at_max_length = s_.max_length && length >= *s_.max_length;
    std::vector<int32_t> canvas;
    for (int64_t b = 0; b < B_; ++b) {
      std::vector<int32_t> row(argmax.begin() + b * L_, argmax.begin() + (b + 1) * L_);
      const auto eos = std::find_if(row.begin(), row.end(), [&](int32_t t) {
        return std::find(s_.eos.begin(), s_.eos.end(), t) != s_.eos.end();
      });
      if (done_[b])
        std::fill(row.begin(), row.end(), s_.pad);
      else if (eos != row.end())
        std::fill(eos + 1, row.end(), s_.pad);
      done_[b] |= eos != row.end() || at_max_length;
      out_[b].insert(out_[b].end(), row.begin(), row.end());
      canvas.insert(canvas.end(), row.begin(), row.end());
    }
    return canvas;
  }

  // Each row's generated region: the committed canvases, then this canvas as it goes into the next step (pad
  // for a row already done); committed = its accepted positions.
  const StepEvent& event(int64_t c, int64_t step, const std::vector<int32_t>& current,
                         const std::vector<uint8_t>& accepted, const std::vector<uint8_t>& frozen) {
    event_canvas_ = out_;
    event_committed_.assign(static_cast<size_t>(B_), {});
    event_final_.assign(static_cast<size_t>(B_), c * L_);
    for (int64_t b = 0; b < B_; ++b) {
      auto& row = event_canvas_[b];
      if (done_[b]) {
        row.insert(row.end(), static_cast<size_t>(L_), s_.pad);
        event_final_[b] = static_cast<int64_t>(row.size());
        continue;
      }
      row.insert(row.end(), current.begin() + b * L_, current.begin() + (b + 1) * L_);
      for (int64_t i = 0; i < L_ && !frozen[b]; ++i)
        if (accepted[b * L_ + i]) event_committed_[b].push_back(c * L_ + i);
    }
    event_ = StepEvent{};
    event_.block = c;
    event_.step = step;
    event_.forwards = result_.forwards;
    event_.canvas = &event_canvas_;
    event_.committed = &event_committed_;
    event_.final_prefix = &event_final_;
    return event_;
  }

  CanvasDecoder& decoder_;
  const std::vector<std::vector<int32_t>>& prompts_;
  const GenerateParams& params_;
  const StepCallback& on_step_;
  const UniformStateHooks& hooks_;
  const int64_t B_, L_, V_;
  const Settings s_;
  UniformDraws draws_;
  GenerateResult result_;
  std::vector<std::vector<int32_t>> out_;  // per row, the committed canvases (pad after EOS)
  std::vector<uint8_t> done_;              // rows finished (EOS or max_length)
  std::vector<int64_t> passes_;            // per row, decoder calls while the row was unfinished
  std::vector<std::vector<int32_t>> event_canvas_;
  std::vector<std::vector<int64_t>> event_committed_;
  std::vector<int64_t> event_final_;
  StepEvent event_;
};

}  // namespace

float uniform_state_temperature(double t_min, double t_max, int64_t cur_step, int64_t steps) {
  const float frac = static_cast<float>(cur_step) / static_cast<float>(steps);
  // volatile: the product is rounded on its own as torch does; a fused multiply-add would differ in the last
  // bit.
  volatile float scaled = static_cast<float>(t_max - t_min) * frac;
  return static_cast<float>(t_min) + scaled;
}

void entropy_bound_mask(std::span<const float> entropy, double bound, std::span<uint8_t> accepted) {
  std::vector<size_t> order(entropy.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entropy[a] < entropy[b]; });
  const float limit = static_cast<float>(bound);
  double cumsum = 0;
  for (size_t i : order) {
    cumsum += entropy[i];
    accepted[i] = static_cast<float>(cumsum) - entropy[i] <= limit;
  }
}

Expected<GenerateResult> generate_uniform_state(Model& model, CanvasDecoder& decoder,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                const GenerateParams& params, const StepCallback& on_step,
                                                const UniformStateHooks& hooks) {
  return capture([&] {
    const auto start = std::chrono::steady_clock::now();
    if (prompts.empty()) fail("uniform-state generation: no prompt");
    const int64_t V = model.info().vocab_size, L = decoder.canvas_length();
    for (size_t r = 0; r < prompts.size(); ++r) {
      if (prompts[r].size() != prompts[0].size())
        fail("uniform-state generation: the prompts must have equal length (row 0 has ", prompts[0].size(),
             " tokens, row ", r, " has ", prompts[r].size(),
             "): left padding is not supported, as the reference crashes on it");
      check_ids(prompts[r], V, "prompt", r);
    }
    if (prompts[0].empty()) fail("uniform-state generation: the prompt is empty (it needs at least BOS)");
    if (!params.canvas_ids.empty()) {
      if (params.canvas_ids.size() != prompts.size())
        fail("uniform-state generation: canvas_ids has ", params.canvas_ids.size(), " rows for ",
             prompts.size(), " prompts");
      for (size_t r = 0; r < prompts.size(); ++r) {
        if (static_cast<int64_t>(params.canvas_ids[r].size()) != L)
          fail("uniform-state generation: canvas_ids row ", r, " has ", params.canvas_ids[r].size(),
               " ids, the canvas is ", L);
        check_ids(params.canvas_ids[r], V, "canvas_ids", r);
      }
    }
    UniformLoop loop(model, decoder, prompts, params, on_step, hooks);
    GenerateResult r = loop.run();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  });
}

}  // namespace dllm
