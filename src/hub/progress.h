// What a download says on stderr: on a terminal one bar per file, redrawn in place (bytes, speed, ETA);
// elsewhere a line when a file starts and one when it ends; nothing at all when quiet (--json, -q).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dllm::hub {

struct Report {
  bool quiet = false;                        // no output
  bool terminal = false;                     // stderr is a terminal: draw bars
  void line(const std::string& text) const;  // "dllm: <text>\n" unless quiet
};

class Progress {
 public:
  // `done` bytes are already there (a resumed partial file).
  Progress(const Report& report, std::string label, uint64_t total, uint64_t done);
  void add(uint64_t n);
  void finish();  // the last redraw and a newline (a bar), or the closing line

  // "1.5 MB", "12.0 GB"; "4s", "3m12s".
  static std::string bytes(double n);
  static std::string duration(double seconds);

 private:
  void draw(bool last);
  const Report& report_;
  std::string label_;
  uint64_t total_, done_, resumed_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace dllm::hub
