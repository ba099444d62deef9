// A fresh folder for a test's (or a bench's) files, removed with everything in it at scope exit.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace dhara::testing {

/// A fresh folder under the temporary folder, named after `pattern` (ending in XXXXXX) and
/// resolved, so that a linked /tmp does not confuse what a test expects. Removed at scope exit,
/// its owner's permissions restored first for a test that took them away. Throws
/// std::system_error when the folder cannot be made (a test reports it as its failure).
struct temp_tree {
  std::filesystem::path root;

  explicit temp_tree(const char* pattern) {
    std::string tmpl = (std::filesystem::temp_directory_path() / pattern).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "cannot make the temporary folder " + tmpl);
    root = std::filesystem::canonical(tmpl);
  }
  ~temp_tree() {
    std::error_code ec;
    std::filesystem::permissions(root, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(root, ec);
  }
  temp_tree(const temp_tree&) = delete;
  temp_tree& operator=(const temp_tree&) = delete;

  std::string str() const { return root.string(); }
  /// The path of `rel` inside the folder.
  std::string operator/(std::string_view rel) const { return (root / rel).string(); }
};

}  // namespace dhara::testing
