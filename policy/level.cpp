// Security levels and trusted-author matching.
#include "policy/level.hpp"

#include <array>
#include <cctype>

namespace dhara::policy {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::string_view to_string(security_level level) {
  switch (level) {
    case security_level::paranoid: return "paranoid";
    case security_level::standard: return "standard";
    case security_level::trusted: return "trusted";
    case security_level::yolo: return "yolo";
  }
  return "paranoid";
}

result<security_level> parse_security_level(std::string_view name) {
  constexpr std::array levels{security_level::paranoid, security_level::standard,
                              security_level::trusted, security_level::yolo};
  for (auto l : levels)
    if (to_string(l) == name) return l;
  return make_error(errc::unknown_level, "unknown security level '" + std::string(name) +
                                             "': use paranoid, standard, trusted or yolo");
}

pending_action pending_rule(security_level level, bool author_is_trusted) {
  switch (level) {
    case security_level::paranoid: return pending_action::ask_each_capability;
    case security_level::standard: return pending_action::ask_package;
    case security_level::trusted:
      return author_is_trusted ? pending_action::approve_trusted_author : pending_action::ask_package;
    case security_level::yolo: return pending_action::grant_yolo;
  }
  return pending_action::ask_each_capability;
}

author_info parse_author(std::string_view text) {
  text = trim(text);
  author_info a;
  auto lt = text.find('<');
  auto gt = text.rfind('>');
  if (lt != std::string_view::npos && gt != std::string_view::npos && gt > lt) {
    a.name = std::string(trim(text.substr(0, lt)));
    a.email = std::string(trim(text.substr(lt + 1, gt - lt - 1)));
  } else {
    a.name = std::string(text);
  }
  return a;
}

bool is_trusted_author(std::span<const std::string> trusted_authors, const author_info& author,
                       std::string_view package_name) {
  std::string_view scope;
  if (package_name.starts_with('@')) {
    auto slash = package_name.find('/');
    if (slash != std::string_view::npos && slash > 1) scope = package_name.substr(1, slash - 1);
  }
  for (const std::string& raw : trusted_authors) {
    std::string_view entry = trim(raw);
    if (entry.empty()) continue;  // an empty entry must never match an empty name
    if (!author.name.empty() && iequals(entry, author.name)) return true;
    if (!author.email.empty() && iequals(entry, author.email)) return true;
    std::string_view bare = entry.starts_with('@') ? entry.substr(1) : entry;
    if (!scope.empty() && !bare.empty() && iequals(bare, scope)) return true;
  }
  return false;
}

}  // namespace dhara::policy
