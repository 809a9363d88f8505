// Errors inside the engine are thrown as dllm::Error with a message that names the file, field or value;
// the public API (include/dllm/dllm.h) and the server turn them into values / HTTP 4xx.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "dllm/error.h"

namespace dllm {

// Builds the message from streamable parts: fail("config.json: field 'n_heads' must be > 0, got ", n).
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

}  // namespace dllm
