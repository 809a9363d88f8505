#include "server/web_assets.h"

namespace dllm::server {
namespace {

constexpr char kIndexHtml[] =
#include "../../web/index.html"
    ;
constexpr char kAppJs[] =
#include "../../web/app.js"
    ;
constexpr char kStyleCss[] =
#include "../../web/style.css"
    ;

}  // namespace

std::string_view web_index_html() {
  return {kIndexHtml, sizeof kIndexHtml - 1};
}
std::string_view web_app_js() {
  return {kAppJs, sizeof kAppJs - 1};
}
std::string_view web_style_css() {
  return {kStyleCss, sizeof kStyleCss - 1};
}

}  // namespace dllm::server
