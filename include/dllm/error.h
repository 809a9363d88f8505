// Error values of the public API.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace dllm {

// Every failure the engine reports (malformed file, bad request, ...). The message names the file, field or value.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value or an error message: what the public API returns instead of throwing.
template <class T>
class Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  static Expected failure(std::string message) { return Expected(ErrorTag{std::move(message)}); }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return std::get<ErrorTag>(state_).message; }

  // Throws dllm::Error when there is no value.
  T& value() {
    if (!ok()) throw Error(error());
    return std::get<T>(state_);
  }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }

 private:
  struct ErrorTag {
    std::string message;
  };
  explicit Expected(ErrorTag e) : state_(std::move(e)) {}
  std::variant<T, ErrorTag> state_;
};

// Runs fn and converts a thrown dllm::Error (or std::exception) into an Expected failure.
template <class Fn>
auto capture(Fn&& fn) -> Expected<decltype(fn())> {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Expected<decltype(fn())>::failure(e.what());
  }
}

}  // namespace dllm
