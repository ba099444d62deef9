// The approval actor: the single owner of the terminal for capability prompts (DESIGN §4,
// §9 "Interactive or not"). Standard asks once per package, paranoid once per capability
// with its meaning; a single key answers (Enter optional); `n` to a package prompt denies
// every pending capability; `q` quits. A terminal that cannot be read is a lost prompt, and
// lost prompts deny.
#pragma once

#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace dhara::actors {

using ask_atom = caf::atom_constant<caf::atom("ask")>;  ///< prompt for one extension

/// What to ask about one extension.
struct approval_request {
  std::string extension;
  std::string version;
  std::string author;                     ///< shown in parentheses when not empty
  std::vector<std::string> capabilities;  ///< the pending ones, catalog order
  bool per_capability = false;            ///< paranoid: one prompt each, with its meaning
};

/// The user's answers.
struct approval_answer {
  std::vector<std::string> approved;
  std::vector<std::string> denied;
  bool quit = false;                      ///< `q`: the session ends (exit 130)
  std::string failure;                    ///< non-empty: no answer could be read (deny all)
};

/// The approval actor's interface: one prompt at a time, in arrival order.
using approval_actor = caf::typed_actor<caf::replies_to<ask_atom, approval_request>::with<approval_answer>>;

/// Spawns the approval actor on its own thread (it blocks on the terminal), reading keys from
/// and writing prompts to `tty_path` (normally /dev/tty).
approval_actor spawn_approval(caf::actor_system& sys, std::string tty_path = "/dev/tty");

/// The prompt text for a package (standard): "web-tools v1.0.0 (zosmaai) requests
/// network:fetch, network:dns".
std::string package_prompt(const approval_request& r);

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::approval_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::approval_answer)
