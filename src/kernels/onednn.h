// The process-wide oneDNN CPU engine and stream.
#pragma once

#include <dnnl.hpp>

namespace dllm {

dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();

}  // namespace dllm
