// dllm.cpp public API: load a diffusion language model and generate with it.
//
//   auto model = dllm::Model::load("path/to/LLaDA-8B-Instruct").value();
//   dllm::GenerateParams p;  p.gen_length = 64;  p.block_length = 16;  p.steps = 32;
//   auto result = dllm::generate(*model, {{prompt ids...}}, p).value();
//
// Errors are values: every call returns dllm::Expected<T>, whose error() names the file, field or value at
// fault.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dllm/error.h"

namespace dllm {

// The precision weights are held and multiplied in (--dtype). kAuto keeps the checkpoint's: f32 files run in
// f32 (the exact path), bf16 files in bf16, f16 files in f16, quantized GGUF tensors as LoadOptions::weights
// says. kF32 forces f32 weights and activations; kBF16 forces bf16 weights (f16 ones rounded to bf16) with
// bf16 activations and f32 accumulation where the CPU has AVX512_BF16, f32 products on the bf16 weights
// elsewhere; kF16 forces f16 weights (f32 and bf16 ones rounded to f16) with f32 activations and f32
// products.
enum class Precision { kAuto, kF32, kBF16, kF16 };

// How the weight matrices of a GGUF file are held at run time (docs/gguf.md, "Quantized weights at run
// time").
enum class WeightFormat {
  kAuto,  // quantized tensors (Q8_0, Q4_0, Q4_K, Q6_K) run on int8 products, plain ones (F32/F16/BF16) as
          // `precision`
  kDequantize,  // every matrix dequantised once, at load, to `precision` (f32 or bf16)
  kQ8,          // every matrix in 8 bits (Q8_0 kept, the others quantised to Q8_0 at load); GGUF files only
};

// Experts of a quantized MoE file: packed into 16-row panels as the dense matrices are (int8 products 16
// columns at a time: on the LLaDA2-mini shape with Q4_K, expert time 1.4x lower than in place, ~96% of the
// measured memory bandwidth against ~68%) or multiplied in place from the mapping. Packing keeps the resident
// size (the mapped pages are released once packed) and gives the same bits whenever it happens.
enum class ExpertPacking {
  kOnFirstUse,  // each expert packed the first time a token is routed to it: loads as fast as in place
  kAtLoad,      // every expert packed at load: the whole file is read and copied before the first forward
  kInPlace,     // never packed
};

// Plain GGUF matrices whose stored type is the compute type (f32 files in f32, bf16 files with bf16
// products): oneDNN multiplies them fastest from its blocked layout, which takes a copy and a reorder of
// every weight (3-4 s for a 0.5B f32 file on 2 cores), but it can multiply them from the mapped file as they
// are, with each product copying blocks inside (0.6-0.85x the speed). The results are the same bits either
// way.
enum class WeightLayout {
  kMappedThenBackground,  // multiplied from the mapping at once (the first token comes ~0.4 s after the
                          // load starts), reordered one matrix at a time by a background thread
  kBlockedAtLoad,         // reordered at load: full speed from the first forward
  kMapped,                // never reordered: the resident size stays the file's pages
};

// Where a model's forward runs (src/backend): the CPU, or a Vulkan device (GPUs of every vendor; Mesa's
// lavapipe on a CPU).
enum class BackendKind { kCpu, kVulkan };

struct LoadOptions {
  Precision precision = Precision::kAuto;
  int threads = 0;  // 0 = all cores
  WeightFormat weights = WeightFormat::kAuto;
  // kAuto only: how the mixture-of-experts' Q8_0 / Q4_0 / Q4_K experts are held (ExpertPacking).
  ExpertPacking experts = ExpertPacking::kOnFirstUse;
  // Plain (F32 / BF16) GGUF matrices that the compute type multiplies as stored (WeightLayout).
  WeightLayout layout = WeightLayout::kMappedThenBackground;
  BackendKind backend = BackendKind::kCpu;
  int device = 0;  // the Vulkan device's index (`dllm devices`)
};

struct ModelInfo {
  std::string path;
  std::string architecture;  // registry name: "llada", "dream", ...
  int64_t vocab_size = 0;    // logits per position
  int64_t d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_hidden = 0;
  int64_t max_seq_len = 0;
  int64_t n_params = 0;
  int32_t mask_id = -1, eos_id = -1, eot_id = -1, bos_id = -1, pad_id = -1;
  bool shift_logits = false;  // Dream: position i is predicted by the output at i-1
  // > 0: a block-diffusion family (LLaDA2.x, SDAR): generation runs block by block with block-causal
  // attention (ForwardInput::attention_block), and this is the default block length (SDAR: config.json
  // block_size).
  int64_t block_size = 0;
  int64_t n_experts = 0, n_experts_used = 0;  // mixture-of-experts families (LLaDA2); 0 = dense
  // An autoregressive model (qwen2, qwen3, llama): causal attention, one token per forward after the prompt;
  // generate() decodes it left to right with a KV cache (docs/hybrid.md). mask_id is -1.
  bool autoregressive = false;
  // Ids that end a generation (EOS, EOT and the generation_config / vocabulary's other end-of-generation
  // ids); autoregressive decoding stops at any of them unless GenerateParams::stop_ids says otherwise.
  std::vector<int32_t> eog_ids;
  Precision precision = Precision::kF32;  // as loaded: kF32, kBF16 or kF16, never kAuto
  std::string precision_reason;           // why: "the checkpoint's weights are F32", "forced by --dtype", ...
  // Per stored type of the weight matrices ("F16", "Q4_K", ...), what its matrices run as ("f16", "bf16",
  // "q4_k blocks, int8 products", ...; several joined by " + " where matrices of one type differ).
  std::map<std::string, std::string> precision_by_type;
};

class KvCache;  // per-layer keys/values of a sequence (src/cache/kv_cache.h); owned by the caller

// What a forward does with a KvCache.
enum class CacheOp {
  kNone,    // no cache
  kStore,   // tokens are whole rows: run as usual and store every position's K/V (and validity) in the cache
  kReuse,   // tokens are positions [cache_offset, cache_offset + seq_len) of the cached rows: their K/V is
            // computed, written over the cache, and their queries attend to every cached position (the rest
            // come from cache)
  kExtend,  // the exact block cache: tokens continue the cached rows (positions cache->seq_len + i); their
            // queries attend to every cached position and to this call's tokens (under attention_block); then
            // the K/V of the first `cache_append` tokens is appended to the cache. An empty cache is a
            // prefill.
};

// Per-call inputs of a forward pass: `batch` rows of equal length, row-major tokens.
struct ForwardInput {
  std::span<const int32_t> tokens;  // [batch * seq_len]
  int64_t batch = 1;
  int64_t logits_from = 0;  // logits are produced only for positions >= logits_from (saves the vocab matmul)
  int64_t logits_to = 0;  // ... and < logits_to (0 = the row's end): a block schedule needs only its block's
  // Optional: per-layer hidden states of row 0, HF convention ([L+1][seq_len * d_model]).
  std::vector<std::vector<float>>* hidden_states = nullptr;
  // Optional RoPE position of each token [batch * seq_len]; default 0..seq_len-1 per row (offset by
  // cache_offset under kReuse).
  std::span<const int64_t> positions;
  // Optional validity of each token [batch * seq_len]; 0 marks padding, which is neither attended to nor
  // attends (its attention output is 0): Dream's mask valid_i AND valid_j. Default: all valid. Under kReuse
  // the validity of the keys is the one stored by kStore.
  std::span<const uint8_t> valid;
  KvCache* cache = nullptr;
  CacheOp cache_op = CacheOp::kNone;
  int64_t cache_offset = 0;  // kReuse: position of the first token in the cached rows
  int64_t cache_append = 0;  // kExtend: leading tokens whose K/V joins the cache (0 = attend only)
  // > 0: block-causal attention (LLaDA2, SDAR): the token at sequence index i (cached positions first) sees
  // index j iff j / attention_block <= i / attention_block. 0: bidirectional.
  int64_t attention_block = 0;
};

// Where a forward's logits end in each row: logits_to, or the row's end when it is 0.
inline int64_t logits_end(const ForwardInput& in) {
  const int64_t seq = in.batch > 0 ? static_cast<int64_t>(in.tokens.size()) / in.batch : 0;
  return in.logits_to > 0 ? in.logits_to : seq;
}

// Per row of logits, what the deterministic denoising rules rank positions by: the argmax (the lowest index
// on ties, as torch.argmax) and, of softmax(row), the argmax's probability, the margin p_top1 - p_top2 and Σ
// p·log(p + 1e-10) (the negative entropy). Model::forward_stats reduces where the logits are computed, so
// that a device backend sends O(rows) numbers back per step instead of rows x vocab_size floats.
struct LogitStats {
  int32_t argmax = 0;
  float p_max = 0, margin = 0, neg_entropy = 0;
};

class CanvasDecoder;

class Model {
 public:
  static Expected<std::shared_ptr<Model>> load(const std::string& path, const LoadOptions& options = {});
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  // Raw model logits [batch, logits_end(input) - logits_from, vocab_size] (no Dream shift applied).
  virtual Expected<std::vector<float>> forward(const ForwardInput& input) = 0;
  // forward()'s logits rows reduced to LogitStats, one per row in the same order. The default reduces
  // forward()'s logits on the host (in double); a model on a device backend reduces them there (in f32).
  virtual Expected<std::vector<LogitStats>> forward_stats(const ForwardInput& input);
  // Whether forward_stats saves the logits' trip back from a device: the denoising loops then rank positions
  // from it wherever their rule needs nothing else of the logits (DenoiseLoop::takes_stats).
  virtual bool reduces_on_device() const { return false; }
  // The fraction of the weights (by bytes) already in their run-time layout: below 1 while a background
  // thread still reorders mapped weights (WeightLayout::kMappedThenBackground). Forwards run meanwhile.
  virtual double weights_prepared() const { return 1.0; }
  // The encoder / decoder pair of a uniform-state canvas model (DiffusionGemma), or nullptr: such a model has
  // no single forward over tokens (forward() is an error) and generate() runs its own sampler on this.
  virtual CanvasDecoder* canvas_decoder() { return nullptr; }
};

// DiffusionGemma's sampler settings (docs/diffusion-gemma.md), by the reference's generate() names. An unset
// field takes the model's generation_config.json value (CanvasDecoder::generation_defaults).
struct UniformStateParams {
  std::optional<int64_t> max_new_tokens;  // canvases = ceil(max_new_tokens / canvas_length)
  std::optional<int64_t> max_length;      // counts only when max_new_tokens is 256 (the reference's rule)
  std::optional<int64_t> max_denoising_steps;  // steps per canvas at most
  std::optional<double> t_min, t_max;          // temperature schedule, t_max at the first step
  std::optional<double> entropy_bound;  // accept the lowest-entropy positions while their sum stays below
  std::optional<int64_t> stability_threshold;  // stop: argmax canvas unchanged over this many steps ...
  std::optional<double> confidence_threshold;  // ... and mean entropy below this
  std::optional<std::vector<int32_t>> eos_ids;
  std::optional<int32_t> pad_id;
};

// Random draws recorded from the reference (the oracle's tape_randint / tape_samples): every uniform canvas
// (the initial canvas and one renoise canvas per step) and every multinomial sample canvas, in call order,
// each [batch][canvas_length]. A loop fed a tape draws nothing itself; running out is an error.
struct RandomTape {
  std::vector<std::vector<std::vector<int32_t>>> randint, samples;
};
// A JSON object with the keys tape_randint and tape_samples; the error names the file and key.
Expected<RandomTape> read_random_tape(const std::string& path);

// What a CanvasDecoder's encoder has seen of each row: its keys and values, per layer (opaque to callers).
class EncoderCache {
 public:
  virtual ~EncoderCache() = default;
  virtual int64_t batch() const = 0;
  virtual int64_t length() const = 0;  // tokens encoded per row: the next token's position
};

// A causal encoder over the prompt and committed canvases and a bidirectional decoder over a canvas that
// reads the encoder's cache without writing it; both share one set of weights (DiffusionGemma).
class CanvasDecoder {
 public:
  virtual ~CanvasDecoder() = default;
  virtual int64_t canvas_length() const = 0;
  // generation_config.json's settings, every field set.
  virtual const UniformStateParams& generation_defaults() const = 0;
  virtual std::unique_ptr<EncoderCache> new_cache(int64_t batch) const = 0;
  // Encodes tokens [batch * n] at positions cache.length() .. + n - 1 and appends them to the cache. Returns
  // the encoder's last hidden states [batch * n, d_model] (after the final norm) when `hidden` is true.
  virtual Expected<std::vector<float>> encode(EncoderCache& cache, std::span<const int32_t> tokens,
                                              bool hidden = false) = 0;
  // Logits [batch * canvas, vocab] (softcapped) of the canvas [batch * canvas] at positions cache.length()
  // onwards. self_conditioning: the previous step's temperature-scaled logits, same shape, or empty (zeros).
  virtual Expected<std::vector<float>> decode(const EncoderCache& cache, std::span<const int32_t> canvas,
                                              std::span<const float> self_conditioning) = 0;
};

// LLaDA's `remasking` names for the "which positions" axis (see Unmask).
enum class Remasking { kLowConfidence, kRandom };

// Which masked positions are revealed first (docs/denoising.md). kDefault: the family's (LLaDA: `remasking`;
// Dream: `alg`); under Transfer::kLlamaCli kSequential (llama-diffusion-cli's deterministic --top-k 1).
// kSequential: left to right (SDAR's remasking, and llama-diffusion-cli with --top-k 1, where every
// confidence is 1). SDAR's other strategies (block-diffusion loops only): kLowConfidenceStatic the most
// confident, a fixed count per step; kLowConfidenceDynamic all above the threshold, else the most confident.
enum class Unmask {
  kDefault,
  kConfidence,
  kMargin,
  kEntropy,
  kRandom,
  kSequential,
  kLowConfidenceStatic,
  kLowConfidenceDynamic,
};
// How many positions are revealed per step. kDefault: the family's (LLaDA: kUniform; Dream: kTimestep, or
// kTimestepBernoulli for alg=origin).
enum class Transfer {
  kDefault,
  kUniform,   // LLaDA get_num_transfer_tokens: masked // steps per step of a block, remainder first
  kTimestep,  // Dream: k = int(masked * (1 - s/t)), t = linspace(1, eps, steps+1) in f32; all on the last
  kTimestepBernoulli,  // Dream alg=origin: each masked position independently with probability 1 - s/t
  kThreshold,          // Fast-dLLM: the best position plus every one with confidence >= threshold
  kFactor,             // Fast-dLLM: the largest n with (n+1)(1 - c_n) < factor (at least one)
  // llama.cpp's llama-diffusion-cli. With block_length > 0: blocks of block_length counted over prompt +
  // gen_length (which must be a multiple of it) but starting at the prompt's end, so the last may be short
  // and trailing ones empty; steps / ((prompt + gen_length) / block_length) per block, masked // steps per
  // step, the remainder first; only the block's masks are candidates. With block_length 0: every mask is a
  // candidate, k = (int)(masked * (1 - s/t)), t = 1 - step/steps * (1 - eps) in f32, all on the last step.
  // Every step is a forward, also one that finds its block without a mask (which then ends the block).
  kLlamaCli,
};
// Which token a masked position takes (the token rule). kDefault: the family's.
enum class Sampler {
  kDefault,
  kGumbel,  // LLaDA: argmax of the logits, Gumbel-max in float64 when temperature > 0; confidence from the
            // raw softmax
  kCategorical,  // Dream: logits / T, top-p / top-k filters, a categorical draw when temperature > 0
};
// What a step recomputes (Fast-dLLM). kNone is exact; the others are approximations by design.
enum class CacheMode {
  kDefault,  // the family's: kBlock for block-diffusion families (LLaDA2, SDAR), kNone for the others
  kNone,
  kPrefix,  // K/V of everything before the current block computed once per block
  kDual,    // K/V of the prefix and of the suffix after the current block kept; only the block is recomputed
  kBlock,   // block-diffusion families: finished blocks' K/V computed once (exact: block-causal attention)
};

// The official generation loop of a block-diffusion family (docs/denoising.md "Block diffusion"). kDefault:
// the family's own (llada2: kLlada21, sdar: kSdar). The three run on either family (both are block-causal
// models).
enum class BlockLoop {
  kDefault,
  kLlada20,  // LLaDA2.0 generate(): threshold commits with a top-k fallback, EOS stop after each block
  kLlada21,  // LLaDA2.1 generate(): the same mask-to-token rule plus token-to-token editing and post steps
  kSdar,     // SDAR block_diffusion_generate(): sequential / low_confidence_static / low_confidence_dynamic
};

// Generation settings. Defaults reproduce the official LLaDA generate() / Dream diffusion_generate(); the
// options that depart from the references are off by default so that exact mode stays exact.
struct GenerateParams {
  int64_t gen_length = 128;  // Dream: max_new_tokens
  int64_t block_length = 0;  // 0 = gen_length (one block)
  int64_t steps = 0;         // 0 = gen_length (one token per step); with kThreshold / kFactor, ignored
  Remasking remasking = Remasking::kLowConfidence;
  double temperature = 0.0;  // LLaDA: > 0 Gumbel-max in float64; Dream: > 0 samples from softmax(logits / T)
  double cfg_scale =
      0.0;  // > 0: classifier-free guidance, cond and uncond rows in one batched forward (LLaDA)
  uint64_t seed = 0;
  bool logits_eos_inf = false;          // never predict EOS
  bool confidence_eos_eot_inf = false;  // zero the probability of EOT (and EOS at T=0) in the confidence
  bool stop_at_eos = false;  // once EOS is committed, fill the rest with EOS and skip remaining steps

  // Strategy axes (docs/denoising.md).
  Unmask unmask = Unmask::kDefault;
  Transfer transfer = Transfer::kDefault;
  Sampler sampler = Sampler::kDefault;
  double threshold = 0.9;  // kThreshold
  double factor = 1.0;     // kFactor
  // Dream sampling. top_k < 0 means the reference's effective default: 50 for Dream (transformers 4.46 leaks
  // PretrainedConfig's top_k=50 into the generation config), none for LLaDA; 0 = no top-k filter.
  int64_t top_k = -1;
  double top_p = 1.0;     // < 1 keeps the smallest set of tokens whose probability reaches top_p
  double alg_temp = 0.0;  // > 0: positions drawn by multinomial(softmax(score / alg_temp)) instead of top-k
  double eps = 1e-3;      // kTimestep: the last timestep

  CacheMode cache = CacheMode::kDefault;
  int64_t cache_refresh = 0;  // > 0: also recompute the whole sequence every this many steps inside a block

  // Block-diffusion loops (model.info().block_size > 0; docs/denoising.md "Block diffusion"). There,
  // block_length 0 = the model's block_size, steps = denoising steps per block (0 = the loop's default:
  // LLaDA2 32, capped at gen_length / minimal_topk; SDAR block_length), temperature 0 = greedy, top_k 0 / -1
  // = none.
  BlockLoop block_loop = BlockLoop::kDefault;
  double block_threshold = 0;      // confidence threshold; 0 = the loop's default (LLaDA2 0.95, SDAR 0.85)
  int64_t minimal_topk = 1;        // LLaDA2: steps = min(steps, gen_length / minimal_topk)
  bool eos_early_stop = false;     // LLaDA2: stop once an EOS is committed with nothing masked before it
  double editing_threshold = 0.9;  // LLaDA2.1: a decoded token is replaced when p(new) > this
  int64_t max_post_steps = 16;     // LLaDA2.1: editing passes over a block once its masks are gone
  int64_t num_to_transfer = 1;     // LLaDA2.1: fewest masks committed per step
  // SDAR stopping_criteria_idx: stop after a block that holds one of them. nullopt = the model's EOS / EOT;
  // empty = never (the reference's default None).
  std::optional<std::vector<int32_t>> stop_ids;
  // The official generate() functions take the [MASK] and EOS ids as arguments (LLaDA2: mask_id, eos_id); -1
  // = the model's (ModelInfo). A model whose files do not name its mask id (ModelInfo::mask_id == -1) needs
  // one here.
  int32_t mask_id = -1, eos_id = -1;

  // Uniform-state canvas models (DiffusionGemma: Model::canvas_decoder()). gen_length and steps do not apply
  // there: its settings are these, by the reference's names. The seed draws the random canvases and samples
  // unless a tape gives them.
  UniformStateParams uniform_state;
  std::shared_ptr<const RandomTape> tape;
  std::vector<std::vector<int32_t>>
      canvas_ids;  // per row, the first canvas (decoder_input_ids); empty: random
};

// What a step callback sees after each denoising step.
struct StepEvent {
  int64_t block = 0, step = 0, forwards = 0;
  const std::vector<std::vector<int32_t>>* canvas = nullptr;  // generated region of each row, masks included
  const std::vector<std::vector<int64_t>>* committed =
      nullptr;  // positions (in the generated region) set this step
  // Bidirectional loops: per committed position (same order), the score it was chosen on (the token's
  // probability for --unmask confidence; margin / negative entropy for the others): how sure the model was
  // when it wrote it. nullptr where a loop does not report it (block loops, autoregressive decoding).
  const std::vector<std::vector<double>>* committed_scores = nullptr;
  // Block loops: positions (in the generated region) whose decoded token T2T editing replaced (LLaDA2.1).
  const std::vector<std::vector<int64_t>>* edited = nullptr;
  int64_t row = 0;  // block loops run the prompts one after another: this event's prompt (canvas has one row)
  // Per row of `canvas`: positions [0, final_prefix[r]) will not change any more (a streamed text may show
  // them). Bidirectional loops never change a committed token; LLaDA2.1 edits decoded tokens of the current
  // block, so its final prefix ends where that block starts (earlier blocks are frozen). nullptr: every
  // committed token is final (DenoiseLoop fills it in for every loop).
  const std::vector<int64_t>* final_prefix = nullptr;
};
// Return false to cancel the generation.
using StepCallback = std::function<bool(const StepEvent&)>;

struct GenerateResult {
  std::vector<std::vector<int32_t>> outputs;  // generated part of each row (block loops: ending at the stop)
  // Block loops: each row's whole final canvas as the official loop leaves it (prompt included, whole blocks,
  // mask ids where nothing was decoded).
  std::vector<std::vector<int32_t>> canvases;
  int64_t forwards = 0;        // model calls (a cfg call counts once)
  int64_t forward_tokens = 0;  // tokens run through the model over all calls (cache savings)
  double seconds = 0;
  bool cancelled = false;
  // Uniform-state loops: per row, generated tokens other than pad over the decoder calls made while the row
  // was unfinished (the reference's tokens_per_forward), and the canvases run.
  std::vector<double> tokens_per_forward;
  int64_t canvases_run = 0;
};

Expected<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateParams& params, const StepCallback& on_step = {});

// Speculative decoding with a diffusion drafter (docs/hybrid.md): the diffusion model denoises `tokens`
// masked positions after the current text in `steps` denoising steps (each step commits the most confident
// masked positions, the last step all); the autoregressive model scores the drafted block in one forward and
// keeps the longest prefix it agrees with, plus one token of its own. Greedy (temperature 0): the output is
// the autoregressive model's own greedy output. Sampling: each drafted token is accepted with probability
// min(1, p/q) and a rejected one replaced by a draw from max(0, p - q) renormalised, so the output follows
// the autoregressive model's distribution; this needs drafts drawn in one step (steps = 1).
struct DraftParams {
  int64_t tokens = 8;  // k: positions drafted per round
  int64_t steps = 1;   // denoising steps per draft
  // The drafter keeps the keys/values of the text between rounds and runs only the new tokens and the masks
  // (like Fast-dLLM's prefix cache: approximate for a bidirectional model, whose cached keys were computed
  // beside earlier drafts). Only the drafts change, never the output. false: every round runs the whole text.
  bool cache = true;
};
struct SpeculativeStats {
  int64_t rounds = 0, drafted = 0, accepted = 0;  // accepted: drafted tokens the verifier kept
  int64_t draft_forwards = 0, verify_forwards = 0;
  int64_t draft_positions = 0;  // token positions the drafter ran, over all its forwards
  double draft_seconds = 0, verify_seconds = 0;
  double mean_accepted() const {
    return rounds ? static_cast<double>(accepted) / static_cast<double>(rounds) : 0;
  }
};
// `verifier` is autoregressive, `drafter` a (non-block) diffusion model with the same vocabulary size; params
// as for generate() on the verifier (gen_length, temperature, top_k, top_p, seed, stop_ids). The caller
// checks that the two tokenizers agree (the CLI and server compare the vocabularies). StepEvents as for
// autoregressive generate(), one per accepted token.
Expected<GenerateResult> generate_speculative(Model& verifier, Model& drafter,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              const GenerateParams& params, const DraftParams& draft,
                                              const StepCallback& on_step = {},
                                              SpeculativeStats* stats = nullptr);

// Infilling (docs/denoising.md "Infilling"): each row is a whole canvas, e.g. prefix + N mask ids + suffix,
// with any number of masked spans anywhere; every position attends to both sides, and only the masked
// positions are denoised. params.gen_length is ignored: it is the number of mask ids, which must be equal in
// every row (rows must also have equal length: no padding). block_length / steps / the strategy axes / caches
// apply to the masked positions taken in order (blocks = runs of block_length masked positions, left to
// right; block_length 0 = one block). stop_at_eos is not supported. outputs (and StepEvent.canvas /
// committed) are the whole filled canvas of each row and canvas positions; a prompt-then-masks canvas gives
// the same tokens as generate().
Expected<GenerateResult> infill(Model& model, const std::vector<std::vector<int32_t>>& canvases,
                                const GenerateParams& params, const StepCallback& on_step = {});

}  // namespace dllm
