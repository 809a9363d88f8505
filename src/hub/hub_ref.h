// What `-m org/name[@revision][:file-or-quant]` names, and where the Hugging Face tools keep their cache
// (the same environment variables huggingface_hub reads, so both share one copy of every model).
#pragma once

#include <optional>
#include <string>

namespace dllm::hub {

struct HubRef {
  std::string repo;               // "org/name"
  std::string revision = "main";  // a branch, tag or 40-hex commit
  std::string file;               // "" | a quant tag ("Q4_K_M") | a .gguf file's name in the repository
  std::string text() const;       // back to "org/name[@rev][:file]"
};

// "org/name[@rev][:file-or-quant]" -> the parts; nullopt when the text is not of that form (then it is a
// path). Names follow the hub's rules: letters, digits, '-', '_', '.', no leading or trailing '.', no "..".
std::optional<HubRef> parse_hub_ref(const std::string& text);

// Where and how the hub is reached: from the environment, then overridden by flags.
struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT (a mirror, or a test's local server)
  std::string
      cache_dir;  // HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/...
  std::string
      token;  // HF_TOKEN, else the file `huggingface-cli login` writes ($HF_TOKEN_PATH, $HF_HOME/token)
  bool offline = false;  // HF_HUB_OFFLINE=1: never touch the network
  static HubSettings from_env();
};

// "1", "true", "yes", "on" in any case: what huggingface_hub takes as true in its boolean variables.
bool env_true(const char* name);

}  // namespace dllm::hub
