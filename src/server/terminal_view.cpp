#include "server/terminal_view.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <string>

namespace dllm::server {
namespace {

constexpr const char* kDim = "\033[2m";
constexpr const char* kNew = "\033[1;30;42m";  // black on green
constexpr const char* kReset = "\033[0m";
constexpr const char* kMaskGlyph = "\u2591";  // ░

// Terminal rows `text` takes at `columns` wide: ANSI escapes take no cells, a code point one cell.
int rows_of(const std::string& text, int columns) {
  int rows = 0, cells = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) {  // CSI ... final byte
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~' && text[i] != '[')) ++i;
      continue;
    }
    if (c == '\n') {
      rows += 1 + (cells > 0 ? (cells - 1) / columns : 0);
      cells = 0;
      continue;
    }
    if ((c & 0xC0) != 0x80) ++cells;
  }
  if (cells > 0) rows += 1 + (cells - 1) / columns;
  return rows;
}

}  // namespace

TerminalView::TerminalView(const TextCodec& codec, std::FILE* out)
    : codec_(codec), out_(out), start_(std::chrono::steady_clock::now()) {}

int TerminalView::columns() const {
  winsize ws{};
  if (ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void TerminalView::draw(const StepEvent& ev) {
  if (!ev.canvas) return;
  const auto& canvas = *ev.canvas;
  int64_t masked = 0, total = 0;
  std::string frame;
  for (size_t r = 0; r < canvas.size(); ++r) {
    const auto& row = canvas[r];
    std::vector<uint8_t> fresh(row.size(), 0);
    if (ev.committed && r < ev.committed->size())
      for (int64_t pos : (*ev.committed)[r])
        if (pos >= 0 && pos < static_cast<int64_t>(row.size())) fresh[pos] = 1;
    const TextCodec::Pieces pieces = codec_.pieces(row);
    if (canvas.size() > 1) {
      frame += '[';
      frame += std::to_string(r);
      frame += "] ";
    }
    for (size_t i = 0; i < row.size(); ++i) {
      ++total;
      if (pieces.masked[i]) {
        ++masked;
        frame += std::string(kDim) + kMaskGlyph + kReset;
      } else if (fresh[i]) {
        frame += std::string(kNew) + pieces.text[i] + kReset;
      } else {
        frame += pieces.text[i];
      }
    }
    frame += "\n";
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char status[160];
  std::snprintf(status, sizeof status,
                "%sstep %lld  block %lld  forwards %lld  committed %lld/%lld  %.1f tokens/s%s\n", kDim,
                static_cast<long long>(ev.step), static_cast<long long>(ev.block),
                static_cast<long long>(ev.forwards), static_cast<long long>(total - masked),
                static_cast<long long>(total), secs > 0 ? (total - masked) / secs : 0.0, kReset);
  frame += status;
  erase();
  std::fputs(frame.c_str(), out_);
  std::fflush(out_);
  rows_ = rows_of(frame, columns());
}

void TerminalView::erase() {
  if (rows_ > 0) std::fprintf(out_, "\033[%dF\033[J", rows_);  // up to the frame's first row, clear below
  rows_ = 0;
  std::fflush(out_);
}

}  // namespace dllm::server
