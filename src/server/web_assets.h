// The web page served at / (web/index.html, web/app.js, web/style.css), compiled into the binary: each file
// in web/ is wrapped in a C++ raw string literal (its first and last lines) and #included by web_assets.cpp,
// so the build tracks them like headers.
#pragma once

#include <string_view>

namespace dllm::server {

std::string_view web_index_html();
std::string_view web_app_js();
std::string_view web_style_css();

}  // namespace dllm::server
