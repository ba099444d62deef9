// The identity keeper and the pinning resolver (see identity_keeper.hpp).
#include "io/identity_keeper.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace dhara::io {
namespace {

policy::file_id id_from(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

// What `path` names now, held: followed as stat(2) follows it, as the compile's own look does.
unique_fd open_held(const std::string& path, policy::file_id& id) {
  unique_fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return unique_fd();
  id = id_from(st);
  return fd;
}

bool linked(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && st.st_nlink > 0;
}

}  // namespace

std::optional<policy::file_id> pinning_resolver::identify(std::string_view resolved_abs) const {
  if (auto it = pins_.find(resolved_abs); it != pins_.end()) return it->second.id;
  std::string path(resolved_abs);
  policy::file_id id;
  if (pins_.size() < max_held) {
    unique_fd fd = open_held(path, id);
    if (fd.valid()) {
      pins_.emplace(std::move(path), pin{id, std::move(fd)});
      return id;
    }
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;  // nothing there: no identity
  }
  // Past the limit, or an open that failed otherwise (EMFILE, EACCES): the compile's own look.
  auto looked = real_.identify(resolved_abs);
  if (looked) ++unheld_;
  return looked;
}

unique_fd pinning_resolver::pinned(std::string_view resolved_abs, policy::file_id& id) const {
  auto it = pins_.find(resolved_abs);
  if (it == pins_.end()) return unique_fd();
  id = it->second.id;
  return unique_fd(::fcntl(it->second.fd.get(), F_DUPFD_CLOEXEC, 0));
}

std::shared_ptr<const std::vector<policy::file_id>> identity_keeper::refresh(const policy::path_rule_set& rules,
                                                                             const pinning_resolver* compiled_with) {
  auto holds = [&](const policy::file_id& id) {
    return std::any_of(held_.begin(), held_.end(), [&](const held_id& h) { return h.id == id; });
  };
  // What was deleted since is let go: no path reaches it any more.
  std::erase_if(held_, [](const held_id& h) { return !linked(h.fd.get()); });
  for (const std::string& target : rules.denied_targets) {
    if (held_.size() >= max_held) break;
    policy::file_id id;
    unique_fd fd = compiled_with ? compiled_with->pinned(target, id) : open_held(target, id);
    if (fd.valid() && !holds(id)) held_.push_back({id, std::move(fd)});
  }
  // What the compile knew but nothing holds open is kept by number, for good.
  if (rules.denied_ids)
    for (const policy::file_id& id : *rules.denied_ids)
      if (!holds(id) && std::find(bare_.begin(), bare_.end(), id) == bare_.end()) bare_.push_back(id);
  std::vector<policy::file_id> ids = bare_;
  for (const held_id& h : held_) ids.push_back(h.id);
  return std::make_shared<const std::vector<policy::file_id>>(std::move(ids));
}

}  // namespace dhara::io
