// The approval actor (see approval.hpp): prompts on the terminal, one key per answer.
#include "actors/approval.hpp"

#include <memory>

#include <caf/all.hpp>

#include "io/terminal.hpp"
#include "policy/capability.hpp"
#include "policy/text.hpp"

namespace dhara::actors {
namespace {

// Text from a manifest or an extension (names, versions, authors, tool names) reaches the
// terminal only through terminal_safe.
using policy::terminal_safe;

// Asks one question; the answer key is echoed with a newline.
char ask(io::terminal& tty, const std::string& question) { return tty.ask(question + "\nApprove? (y/n) "); }

approval_answer prompt(const approval_request& r, const std::string& tty_path) {
  approval_answer out;
  io::terminal tty(tty_path);
  if (!tty.ok()) {
    out.failure = "no terminal to ask on (" + tty_path + ")";
    return out;
  }
  std::string who = terminal_safe(r.extension) + " v" + terminal_safe(r.version) +
                    (r.author.empty() ? "" : " (" + terminal_safe(r.author) + ")");
  if (!r.per_capability) {
    char k = ask(tty, package_prompt(r));
    if (k == 0) out.failure = "the terminal closed before an answer";
    else if (k == 'q') out.quit = true;
    else (k == 'y' ? out.approved : out.denied) = r.capabilities;
    return out;
  }
  for (const std::string& cap : r.capabilities) {
    auto parsed = policy::parse_capability(cap);
    std::string meaning = parsed ? std::string(policy::meaning(*parsed)) : std::string();
    char k = ask(tty, who + " requests " + cap + (meaning.empty() ? "" : " — " + meaning));
    if (k == 0) {
      out.failure = "the terminal closed before an answer";
      return out;
    }
    if (k == 'q') {
      out.quit = true;
      return out;
    }
    (k == 'y' ? out.approved : out.denied).push_back(cap);
  }
  return out;
}

hitl_answer answer(const hitl_question& q, const std::string& tty_path) {
  io::terminal tty(tty_path);
  if (!tty.ok()) return {hitl_decision::lost, "no terminal to ask on (" + tty_path + ")"};
  switch (tty.ask(question_prompt(q))) {
    case 'y': return {hitl_decision::allow, {}};
    case 'n': return {hitl_decision::deny, {}};
    case 'q': return {hitl_decision::quit, {}};
    default: return {hitl_decision::lost, "the terminal closed before an answer"};
  }
}

}  // namespace

std::string_view to_string(question_kind k) {
  switch (k) {
    case question_kind::tool: return "tool";
    case question_kind::result: return "result";
    case question_kind::capability: return "capability";
  }
  return "tool";
}

std::string question_prompt(const hitl_question& q) {
  switch (q.kind) {
    case question_kind::tool:
      return "[" + terminal_safe(q.tool) + "]" + (q.subject.empty() ? "" : " " + terminal_safe(q.subject)) +
             "\nApprove? (y/n/q) ";
    case question_kind::result: {
      std::string text = "[" + terminal_safe(q.tool) + "]" + (q.subject.empty() ? "" : " " + terminal_safe(q.subject)) +
                         " → " + q.status + "\n" + q.shown;
      if (!text.ends_with('\n')) text += '\n';
      return text + "Continue? (y/n/q) ";
    }
    case question_kind::capability: {
      auto parsed = policy::parse_capability(q.capability);
      std::string meaning = parsed ? std::string(policy::meaning(*parsed)) : std::string();
      return terminal_safe(q.extension) + " requests " + terminal_safe(q.capability) +
             (meaning.empty() ? "" : " — " + meaning) + " for [" + terminal_safe(q.tool) + "]" +
             (q.subject.empty() ? "" : " " + terminal_safe(q.subject)) + "\nApprove? (y/n/q) ";
    }
  }
  return {};
}

std::string package_prompt(const approval_request& r) {
  std::string caps;
  for (const std::string& c : r.capabilities) caps += (caps.empty() ? "" : ", ") + c;
  return terminal_safe(r.extension) + " v" + terminal_safe(r.version) +
         (r.author.empty() ? "" : " (" + terminal_safe(r.author) + ")") + " requests " + terminal_safe(caps);
}

approval_actor spawn_approval(caf::actor_system& sys, std::string tty_path) {
  // Detached: a prompt blocks its thread on the terminal, never a scheduler worker. Its
  // mailbox serializes prompts while other actors keep working.
  return sys.spawn<caf::detached>([](approval_actor::pointer, std::string path) -> approval_actor::behavior_type {
    // After a `q` every later question is answered quit without asking: the session is ending.
    auto quit = std::make_shared<bool>(false);
    return {
        [path, quit](ask_atom, const approval_request& r) {
          if (*quit) return approval_answer{{}, {}, true, {}};
          approval_answer a = prompt(r, path);
          *quit = a.quit;
          return a;
        },
        [path, quit](question_atom, const hitl_question& q) {
          if (*quit) return hitl_answer{hitl_decision::quit, {}};
          hitl_answer a = answer(q, path);
          *quit = a.decision == hitl_decision::quit;
          return a;
        },
    };
  }, std::move(tty_path));
}

}  // namespace dhara::actors
