// The identity keeper (see identity_keeper.hpp).
#include "io/identity_keeper.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

namespace dhara::io {
namespace {

policy::file_id id_from(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

template <typename List>
bool holds(const List& list, const policy::file_id& id) {
  return std::any_of(list.begin(), list.end(), [&](const auto& h) { return h.id == id; });
}

}  // namespace

std::shared_ptr<const std::vector<policy::file_id>> identity_keeper::refresh(const policy::path_rule_set& rules) {
  decltype(by_entry_) next;
  struct stat st;
  for (const policy::path_rule_set::denied_target& t : rules.denied_targets) {
    std::vector<held_id>& now = next[t.written];
    // What the entry names now. O_NOFOLLOW: a resolved path ends in no link, unless one was
    // put there since, and then the link is what the entry names, not where it points.
    unique_fd fd(::open(t.resolved.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() >= 0 && ::fstat(fd.get(), &st) == 0 && !holds(now, id_from(st)))
      now.push_back({id_from(st), std::move(fd)});
    // What it named before, while that is still linked somewhere.
    auto before = by_entry_.find(t.written);
    if (before == by_entry_.end()) continue;
    for (held_id& h : before->second)
      if (h.fd.get() >= 0 && !holds(now, h.id) && ::fstat(h.fd.get(), &st) == 0 && st.st_nlink > 0)
        now.push_back(std::move(h));
  }
  by_entry_ = std::move(next);  // entries the rules no longer have are forgotten here

  std::vector<policy::file_id> ids = rules.denied_ids ? *rules.denied_ids : std::vector<policy::file_id>();
  for (const auto& [entry, list] : by_entry_)
    for (const held_id& h : list)
      if (std::find(ids.begin(), ids.end(), h.id) == ids.end()) ids.push_back(h.id);
  return std::make_shared<const std::vector<policy::file_id>>(std::move(ids));
}

std::size_t identity_keeper::held() const {
  std::size_t n = 0;
  for (const auto& [entry, list] : by_entry_) n += list.size();
  return n;
}

}  // namespace dhara::io
