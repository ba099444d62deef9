// Errors as values for the policy library: an error code, a sentence for the user,
// and an expected-like result<T>. No exception leaves policy/.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace dhara::policy {

/// Every kind of failure the policy library reports.
enum class errc {
  parse_error,          ///< the bytes are not valid JSON (or YAML)
  invalid_type,         ///< a value has the wrong JSON type
  invalid_value,        ///< a value has the right type but is not acceptable
  missing_field,        ///< a required field is absent
  unknown_capability,   ///< a capability name is not in the catalog
  unknown_level,        ///< a security level name is not one of the four
  unsupported_runtime,  ///< a manifest runtime type other than "subprocess"
  invalid_path,         ///< a path is empty, holds NUL, or cannot be normalized
  resolve_failed,       ///< symlink resolution failed (loop, I/O error)
  not_found,            ///< a looked-up thing does not exist
  /// a host operation refused at the moment of use, by the rules or by what changed since its
  /// check (a symlink on the way, a denied folder moved in, an address dhara did not vet):
  /// answered and audited as a denial (actors/host_api.cpp)
  refused,
};

/// The stable name of an error code, e.g. "unknown_capability".
std::string_view to_string(errc code);

/// An error: its code and one sentence saying what is wrong and what to do.
struct error {
  errc code;
  std::string message;
};

/// Either a value or an error (C++23's std::expected, for C++20).
template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  result(error err) : v_(std::move(err)) {}          // NOLINT: implicit by design

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const error& err() const { return std::get<1>(v_); }

 private:
  std::variant<T, error> v_;
};

/// Builds an error value.
inline error make_error(errc code, std::string message) { return {code, std::move(message)}; }

}  // namespace dhara::policy
