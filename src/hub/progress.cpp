#include "hub/progress.h"

#include <cstdio>

namespace dllm::hub {

void Report::line(const std::string& text) const {
  // On a terminal the line replaces a half-drawn bar, which the next update draws again below it.
  if (!quiet) std::fprintf(stderr, "%sdllm: %s\n", terminal ? "\r\033[K" : "", text.c_str());
}

Progress::Progress(const Report& report, std::string label, uint64_t total, uint64_t done)
    : report_(report),
      label_(std::move(label)),
      total_(total),
      done_(done),
      resumed_(done),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (report_.quiet) return;
  if (report_.terminal) {
    draw(false);
  } else {
    std::string what = "downloading " + label_ + " (" + bytes(static_cast<double>(total_));
    if (done_ > 0) what += ", resuming at " + bytes(static_cast<double>(done_));
    report_.line(what + ")");
  }
}

void Progress::add(uint64_t n) {
  done_ += n;
  if (report_.quiet || !report_.terminal) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish() {
  if (report_.quiet) return;
  if (report_.terminal) {
    draw(true);
    std::fputc('\n', stderr);
    return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  report_.line("downloaded " + label_ + " (" + bytes(static_cast<double>(done_ - resumed_)) + " in " +
               duration(secs) + ")");
}

void Progress::draw(bool last) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double speed = secs > 0 ? (done_ - resumed_) / secs : 0.0;
  const double frac = total_ ? static_cast<double>(done_) / total_ : 1.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  std::string eta = last ? duration(secs) : speed > 0 ? "ETA " + duration((total_ - done_) / speed) : "ETA ?";
  std::fprintf(stderr, "\r\033[K%s [%s] %3d%% %s/%s %s/s %s", label_.c_str(), bar.c_str(),
               static_cast<int>(frac * 100), bytes(static_cast<double>(done_)).c_str(),
               bytes(static_cast<double>(total_)).c_str(), bytes(speed).c_str(), eta.c_str());
  std::fflush(stderr);
}

std::string Progress::bytes(double n) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (n >= 1000 && u < 4) n /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

std::string Progress::duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

}  // namespace dllm::hub
