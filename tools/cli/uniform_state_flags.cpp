#include "uniform_state_flags.h"

#include "common.h"
#include "core/error.h"
#include "io/json_file.h"
#include "model/diffusion_gemma.h"

namespace dllm::cli {

void add_uniform_state_flags(CLI::App* cmd, UniformStateFlags& f) {
  const std::string group = "DiffusionGemma (uniform-state canvas) sampling";
  auto opt = [&](const char* name, auto& field, const char* help) {
    cmd->add_option(name, field, help)->group(group);
  };
  opt("--generation-config", f.generation_config,
      "JSON object of generate() settings by the reference's names (max_new_tokens, max_denoising_steps, "
      "t_min, t_max, entropy_bound, stability_threshold, confidence_threshold, eos_token_id, pad_token_id, "
      "max_length, decoder_input_ids) over the model's generation_config.json");
  opt("--random-tape", f.random_tape,
      "JSON object with tape_randint and tape_samples (recorded torch.randint / torch.multinomial canvases, "
      "as the oracle records them): the sampler draws nothing itself");
  opt("--canvas-ids", f.canvas_ids,
      "The first canvas of a row (the reference's decoder_input_ids): canvas-length ids, comma separated; "
      "repeat per --prompt-ids row");
  opt("--max-length", f.plain.max_length,
      "Prompt + generated tokens at most (counts only with 256 new tokens)");
  opt("--max-denoising-steps", f.plain.max_denoising_steps, "Denoising steps per canvas at most (48)");
  opt("--t-min", f.plain.t_min, "Temperature at the end of the schedule (0.4)");
  opt("--t-max", f.plain.t_max, "Temperature at the first step (0.8)");
  opt("--entropy-bound", f.plain.entropy_bound,
      "Accept the lowest-entropy positions while the entropy before each stays within this (0.1)");
  opt("--stability-threshold", f.plain.stability_threshold,
      "Stop a canvas once its argmax held for this many steps ... (1)");
  opt("--confidence-threshold", f.plain.confidence_threshold,
      "... and its mean entropy is below this (0.005)");
  opt("--eos-ids", f.eos_ids, "End-of-sequence ids, comma separated (generation_config.json's)");
  opt("--pad-id", f.plain.pad_id, "The id written after EOS (0)");
}

bool uniform_state_flags_given(const UniformStateFlags& f) {
  const UniformStateParams& p = f.plain;
  return !f.generation_config.empty() || !f.random_tape.empty() || !f.canvas_ids.empty() ||
         !f.eos_ids.empty() || p.max_new_tokens || p.max_length || p.max_denoising_steps || p.t_min ||
         p.t_max || p.entropy_bound || p.stability_threshold || p.confidence_threshold || p.pad_id;
}

void apply_uniform_state_flags(const UniformStateFlags& f, GenerateParams& params) {
  UniformStateParams& u = params.uniform_state;
  if (!f.generation_config.empty()) {
    const nlohmann::json j = read_json_file(f.generation_config);
    read_uniform_state_params(j, f.generation_config, u);
    if (f.canvas_ids.empty() && j.contains("decoder_input_ids") && !j["decoder_input_ids"].is_null()) {
      const auto& rows = j["decoder_input_ids"];
      if (!rows.is_array()) fail(f.generation_config, ": decoder_input_ids must be a list of id lists");
      for (const auto& row : rows) {
        if (!row.is_array()) fail(f.generation_config, ": decoder_input_ids must be a list of id lists");
        std::vector<int32_t> ids;
        for (const auto& id : row) {
          if (!id.is_number_integer()) fail(f.generation_config, ": decoder_input_ids holds ", id.dump());
          ids.push_back(id.get<int32_t>());
        }
        params.canvas_ids.push_back(std::move(ids));
      }
    }
  }
  const UniformStateParams& p = f.plain;
  auto over = [](auto& to, const auto& from) {
    if (from) to = from;
  };
  over(u.max_new_tokens, p.max_new_tokens);
  over(u.max_length, p.max_length);
  over(u.max_denoising_steps, p.max_denoising_steps);
  over(u.t_min, p.t_min);
  over(u.t_max, p.t_max);
  over(u.entropy_bound, p.entropy_bound);
  over(u.stability_threshold, p.stability_threshold);
  over(u.confidence_threshold, p.confidence_threshold);
  over(u.pad_id, p.pad_id);
  if (!f.eos_ids.empty()) u.eos_ids = parse_ids(f.eos_ids);
  for (const auto& row : f.canvas_ids) params.canvas_ids.push_back(parse_ids(row));
  if (!f.random_tape.empty())
    params.tape = std::make_shared<const RandomTape>(read_random_tape(f.random_tape).value());
}

}  // namespace dllm::cli
