// read_random_tape (dllm.h) and the uniform-state loop's draws (denoise/random_tape.h).
#include "denoise/random_tape.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.h"

namespace dllm {

namespace {

using Entries = std::vector<std::vector<std::vector<int32_t>>>;

Entries read_entries(const nlohmann::json& doc, const std::string& path, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end()) fail(path, ": random tape: no key '", key, "'");
  if (!it->is_array()) fail(path, ": random tape: '", key, "' is not a list");
  Entries out;
  for (size_t e = 0; e < it->size(); ++e) {
    const nlohmann::json& entry = (*it)[e];
    bool ok = entry.is_array();
    std::vector<std::vector<int32_t>> rows;
    for (size_t r = 0; ok && r < entry.size(); ++r) {
      ok = entry[r].is_array();
      std::vector<int32_t> row;
      for (size_t i = 0; ok && i < entry[r].size(); ++i) {
        const nlohmann::json& v = entry[r][i];
        ok = v.is_number_integer() && v.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
             v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
        if (ok) row.push_back(static_cast<int32_t>(v.get<int64_t>()));
      }
      rows.push_back(std::move(row));
    }
    if (!ok)
      fail(path, ": random tape: ", key, " entry ", e, " is not a [batch][canvas] list of integer ids");
    out.push_back(std::move(rows));
  }
  return out;
}

// "2x16", or how the rows differ.
std::string shape_of(const std::vector<std::vector<int32_t>>& entry) {
  std::ostringstream os;
  os << entry.size() << "x";
  if (entry.empty()) return os.str() + "0";
  for (const auto& row : entry)
    if (row.size() != entry[0].size()) return std::to_string(entry.size()) + " rows of unequal length";
  os << entry[0].size();
  return os.str();
}

}  // namespace

Expected<RandomTape> read_random_tape(const std::string& path) {
  return capture([&] {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, ": cannot open the random tape");
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail(path, ": random tape: not one JSON object (", e.what(), ")");
    }
    if (!doc.is_object()) fail(path, ": random tape: not a JSON object");
    RandomTape tape;
    tape.randint = read_entries(doc, path, "tape_randint");
    tape.samples = read_entries(doc, path, "tape_samples");
    return tape;
  });
}

UniformDraws::UniformDraws(const RandomTape* tape, uint64_t seed, int64_t batch, int64_t length,
                           int64_t vocab)
    : tape_(tape), rng_(seed), batch_(batch), length_(length), vocab_(vocab) {}

std::vector<int32_t> UniformDraws::take(const std::vector<std::vector<std::vector<int32_t>>>& entries,
                                        size_t& next, const char* key) {
  if (next >= entries.size()) fail("random tape ran out of ", key, " after ", next, " draws");
  const size_t e = next++;
  const auto& entry = entries[e];
  const bool fits = static_cast<int64_t>(entry.size()) == batch_ &&
                    std::all_of(entry.begin(), entry.end(),
                                [&](const auto& row) { return static_cast<int64_t>(row.size()) == length_; });
  if (!fits)
    fail("random tape: ", key, " entry ", e, " is ", shape_of(entry), ", the loop needs ", batch_, "x",
         length_);
  std::vector<int32_t> flat;
  flat.reserve(static_cast<size_t>(batch_ * length_));
  for (const auto& row : entry)
    for (int32_t id : row) {
      if (id < 0 || id >= vocab_)
        fail("random tape: ", key, " entry ", e, " holds id ", id, ", outside the vocabulary [0, ", vocab_,
             ")");
      flat.push_back(id);
    }
  return flat;
}

std::vector<int32_t> UniformDraws::uniform_canvas() {
  if (tape_) return take(tape_->randint, next_randint_, "tape_randint");
  std::vector<int32_t> canvas(static_cast<size_t>(batch_ * length_));
  for (auto& id : canvas)
    id = static_cast<int32_t>(
        std::min<int64_t>(static_cast<int64_t>(rng_.uniform() * static_cast<double>(vocab_)), vocab_ - 1));
  return canvas;
}

std::vector<int32_t> UniformDraws::sample_canvas() {
  if (!tape_) fail("UniformDraws: no tape to take samples from");
  return take(tape_->samples, next_sample_, "tape_samples");
}

void UniformDraws::exponential(std::span<float> q) {
  // -log(u), u in [0, 1): u = 0 gives +inf, whose ratio p / q is 0 (never drawn), not a division by zero.
  for (float& x : q) x = static_cast<float>(-std::log(rng_.uniform()));
}

}  // namespace dllm
