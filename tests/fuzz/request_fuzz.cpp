// libFuzzer target: the HTTP request body -> a generation request (src/server/request.cpp), for every
// endpoint, on a bidirectional, a block-diffusion and an autoregressive model. The server answers malformed
// JSON itself; a body that parses must give a request or an ApiError.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "server/request.h"
#include "server/text_codec.h"

namespace {

using namespace dllm;
using namespace dllm::server;

struct Served {
  ModelInfo info;
  TextCodec codec;
  RequestPolicy policy;
};

Served make(const char* architecture, int64_t block_size, bool autoregressive) {
  ModelInfo i;
  i.architecture = architecture;
  i.vocab_size = 512;
  i.max_seq_len = 256;
  i.mask_id = autoregressive ? -1 : 500;
  i.eos_id = 481;
  i.block_size = block_size;
  i.autoregressive = autoregressive;
  if (autoregressive) i.eog_ids = {481, 482};
  RequestPolicy p;
  p.model_id = "tiny";
  p.defaults.gen_length = 32;
  p.max_tokens = 128;
  return {i, TextCodec::load("", i), p};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Served models[] = {make("llada", 0, false), make("llada2", 32, false), make("qwen2", 0, true)};
  const auto body = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  for (const Served& m : models)
    for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChat, Endpoint::kCanvas}) {
      GenRequest r;
      (void)parse_request(body, e, m.codec, m.info, m.policy, r);
    }
  return 0;
}
