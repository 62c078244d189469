// Status and Expected<T>: how errors cross load, parse and request boundaries.
// No exceptions escape a public function; a failure carries one human-readable line
// that names the file, tensor, field or limit and what was wrong.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace anymoe {

// What kind of failure a Status is, for code that answers on someone else's
// behalf: the HTTP layer maps it to a status code (400, 503, 500) without
// reading the message. Most load and parse errors stay kUnknown.
enum class ErrorKind {
  kUnknown,          // untyped
  kInvalidArgument,  // the caller's input is wrong and will stay wrong (HTTP 400)
  kUnavailable,      // refused for now; the same request may succeed later (HTTP 503)
  kInternal,         // a failure on our side (HTTP 500)
};

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }
  // A typed error: `code` is a machine-readable reason ("queue_full",
  // "context_length_exceeded"), `field` the input at fault ("prompt",
  // "max_tokens"); either may be empty.
  static Status Error(std::string message, ErrorKind kind, std::string code = "",
                      std::string field = "") {
    Status s(std::move(message), true);
    s.kind_ = kind;
    s.code_ = std::move(code);
    s.field_ = std::move(field);
    return s;
  }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }
  ErrorKind kind() const { return kind_; }
  const std::string& code() const { return code_; }
  const std::string& field() const { return field_; }

  // Prefixes context ("loading model.gguf: ") to an error; no-op on success.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    Status s = *this;
    s.message_ = context + ": " + message_;
    return s;
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
  ErrorKind kind_ = ErrorKind::kUnknown;
  std::string code_, field_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                       // NOLINT: implicit by design
  Expected(Status error) : v_(std::move(error)) { CheckIsError(); }  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { CheckIsValue(); return std::get<0>(v_); }
  const T& value() const& { CheckIsValue(); return std::get<0>(v_); }
  T&& value() && { CheckIsValue(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckIsValue() const {
    if (!ok()) {
      std::fprintf(stderr, "anymoe: value() on error: %s\n", std::get<1>(v_).message().c_str());
      std::abort();
    }
  }
  void CheckIsError() const {
    if (std::get<1>(v_).ok()) {
      std::fprintf(stderr, "anymoe: Expected constructed from an OK status\n");
      std::abort();
    }
  }
  std::variant<T, Status> v_;
};

}  // namespace anymoe

#define ANYMOE_CONCAT_INNER(a, b) a##b
#define ANYMOE_CONCAT(a, b) ANYMOE_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` failed.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::anymoe::Status _st = (expr);                 \
    if (!_st.ok()) return _st;                     \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(ANYMOE_CONCAT(_expected_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
