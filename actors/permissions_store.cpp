// The permissions store actor (see permissions_store.hpp).
#include "actors/permissions_store.hpp"

#include <chrono>
#include <string_view>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "io/permissions_file.hpp"

namespace dhara::actors {
namespace {

struct store_state {
  permissions_store_config cfg;
  std::uint64_t generation = 1;
  policy::snapshot_ptr current;
  bool reload_scheduled = false;
  kept_identities kept;
  std::vector<caf::actor> followers;  // sent each snapshot as the checkers are (join_atom)
  static inline const char* name = "permissions_store";
};

using self_ptr = permissions_store_actor::stateful_pointer<store_state>;

void reload(self_ptr self) {
  auto& st = self->state;
  st.reload_scheduled = false;
  auto read = io::read_permissions(io::permissions_path(st.cfg.inputs.dhara_home));
  std::string error = read ? std::string() : read.err().message;
  policy::permissions perms = read ? std::move(read->value) : policy::permissions{};
  if (!error.empty()) spdlog::error("{}; every check is denied until it is fixed", error);
  auto snap = compile_for(st.cfg, perms, error, ++st.generation, st.kept);
  st.current = snap;
  spdlog::debug("permissions reloaded: snapshot generation {}", st.generation);
  auto to_checkers = [self, snap] {
    for (const checker_actor& c : self->state.cfg.checkers) self->send(c, snapshot_atom::value, snap);
  };
  if (st.followers.empty()) return to_checkers();
  // The followers first (the kernel follower): a call the checkers allow under the new rules
  // reaches its extension after the extension's new profile is on its way to it, never in
  // the profile before (a review). Then the checkers, whatever the followers answered.
  auto left = std::make_shared<std::size_t>(st.followers.size());
  for (const caf::actor& f : st.followers)
    self->request(f, std::chrono::seconds(5), snapshot_atom::value, snap)
        .then([left, to_checkers](bool) { if (--*left == 0) to_checkers(); },
              [left, to_checkers](caf::error&) { if (--*left == 0) to_checkers(); });
}

}  // namespace

policy::snapshot_ptr compile_for(const permissions_store_config& cfg, const policy::permissions& perms,
                                 const std::string& read_error, std::uint64_t generation, kept_identities& kept) {
  if (!read_error.empty())
    return std::make_shared<const policy::policy_snapshot>(policy::failed_snapshot(read_error, generation));
  io::pinning_resolver resolver;  // what it identifies stays open until the keepers hold it
  auto snap = policy::compile_session(cfg.inputs, perms, generation, resolver);
  if (!snap)
    return std::make_shared<const policy::policy_snapshot>(policy::failed_snapshot(snap.err().message, generation));
  // A failed snapshot denies everything, so what is kept only changes with one that compiled.
  snap->paths.denied_ids = kept.paths.refresh(snap->paths, &resolver);
  snap->state_files.denied_ids = kept.state_files.refresh(snap->state_files, &resolver);
  if (resolver.unheld() > 0)
    spdlog::debug("{} denied entries are known by device and inode alone, not held open (more than {}, or "
                  "they could not be opened): their numbers are kept for the session",
                  resolver.unheld(), io::max_held);
  return std::make_shared<const policy::policy_snapshot>(std::move(*snap));
}

permissions_store_actor spawn_permissions_store(caf::actor_system& sys, std::shared_ptr<io::event_loop> loop,
                                                permissions_store_config config) {
  std::string dir = config.inputs.dhara_home;
  auto store = sys.spawn([](self_ptr self, permissions_store_config cfg) -> permissions_store_actor::behavior_type {
    self->state.cfg = std::move(cfg);
    self->state.generation = self->state.cfg.first_generation;
    self->state.current = self->state.cfg.first;
    // The checkers hold the first rules as they are (compiled when the session loaded). What
    // they name is held from now on, and what their compile saw but is no longer found is
    // kept by number.
    if (const policy::snapshot_ptr& first = self->state.cfg.first) {
      self->state.kept.paths.refresh(first->paths, nullptr);
      self->state.kept.state_files.refresh(first->state_files, nullptr);
    }
    return {
        [=](changed_atom) {
          if (self->state.reload_scheduled) return;
          self->state.reload_scheduled = true;
          self->delayed_send(self, std::chrono::milliseconds(50), reload_atom::value);
        },
        [=](reload_atom) { reload(self); },
        [=](caf::get_atom) { return self->state.generation; },
        [=](caf::put_atom) {
          reload(self);
          return self->state.generation;
        },
        [=](snapshot_atom) { return self->state.current; },
        [=](caf::join_atom, caf::actor& follower) {
          caf::anon_send(follower, snapshot_atom::value, self->state.current);
          self->state.followers.push_back(std::move(follower));
        },
    };
  }, std::move(config));
  // The watch runs on the loop thread; it reaches the store only through its mailbox.
  loop->watch_directory(dir, [store](std::string filename) {
    // "": events were lost or the folder went away, so the file may have changed.
    if (filename.empty() || std::string_view(filename).starts_with("permissions.json"))
      caf::anon_send(store, changed_atom::value);
  });
  return store;
}

}  // namespace dhara::actors
