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
#include <nlohmann/json.hpp>

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

using question_atom = caf::atom_constant<caf::atom("question")>;  ///< one human-in-the-loop question

/// A question about one call (DESIGN §6 "Human in the loop"): before it runs (approve mode),
/// about its result (review mode), or about a pending capability it needs (serve mode).
enum class question_kind { tool, result, capability };
std::string_view to_string(question_kind k);

struct hitl_question {
  question_kind kind = question_kind::tool;
  std::string extension;
  std::string tool;
  std::string tool_call_id;
  std::string capability;  ///< kind capability: the pending one
  std::string subject;     ///< what approve mode shows: `src/auth.ts (42 lines)`
  std::string shown;       ///< kind result: the result text, already truncated to a screenful
  std::string status;      ///< kind result: ok / error
  nlohmann::json result;   ///< kind result: the whole result object (serve sends it to the client)
};

/// The human's decision. `always` (serve clients) also records the capability as approved.
enum class hitl_decision { allow, deny, always, quit, lost };

struct hitl_answer {
  hitl_decision decision = hitl_decision::lost;
  std::string failure;     ///< for lost: why no answer could be read; for a yes given without asking: why
};

/// Anything that can answer questions: the terminal approval actor, or a serve client.
using hitl_actor = caf::typed_actor<caf::replies_to<question_atom, hitl_question>::with<hitl_answer>>;

/// The approval actor's interface: one prompt at a time, in arrival order.
using approval_actor = caf::typed_actor<caf::replies_to<ask_atom, approval_request>::with<approval_answer>,
                                        caf::replies_to<question_atom, hitl_question>::with<hitl_answer>>;

/// Spawns the approval actor on its own thread (it blocks on the terminal), reading keys from
/// and writing prompts to `tty_path` (normally /dev/tty).
approval_actor spawn_approval(caf::actor_system& sys, std::string tty_path = "/dev/tty");

/// The prompt text for a package (standard): "web-tools v1.0.0 (zosmaai) requests
/// network:fetch, network:dns".
std::string package_prompt(const approval_request& r);

/// The prompt text for a question: `[read] src/auth.ts (42 lines)` + `Approve? (y/n/q) `;
/// a result with `Continue? (y/n/q) `.
std::string question_prompt(const hitl_question& q);

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::approval_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::approval_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::hitl_question)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::hitl_answer)
