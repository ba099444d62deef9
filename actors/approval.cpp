// The approval actor (see approval.hpp): prompts on the terminal, one key per answer.
#include "actors/approval.hpp"

#include <caf/all.hpp>

#include "io/terminal.hpp"
#include "policy/capability.hpp"

namespace dhara::actors {
namespace {

// Asks one question; the answer key is echoed with a newline.
char ask(io::terminal& tty, const std::string& question) { return tty.ask(question + "\nApprove? (y/n) "); }

approval_answer prompt(const approval_request& r, const std::string& tty_path) {
  approval_answer out;
  io::terminal tty(tty_path);
  if (!tty.ok()) {
    out.failure = "no terminal to ask on (" + tty_path + ")";
    return out;
  }
  std::string who = r.extension + " v" + r.version + (r.author.empty() ? "" : " (" + r.author + ")");
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

}  // namespace

std::string package_prompt(const approval_request& r) {
  std::string caps;
  for (const std::string& c : r.capabilities) caps += (caps.empty() ? "" : ", ") + c;
  return r.extension + " v" + r.version + (r.author.empty() ? "" : " (" + r.author + ")") + " requests " + caps;
}

approval_actor spawn_approval(caf::actor_system& sys, std::string tty_path) {
  // Detached: a prompt blocks its thread on the terminal, never a scheduler worker. Its
  // mailbox serializes prompts while other actors keep working.
  return sys.spawn<caf::detached>([](approval_actor::pointer, std::string path) -> approval_actor::behavior_type {
    return {[path](ask_atom, const approval_request& r) { return prompt(r, path); }};
  }, std::move(tty_path));
}

}  // namespace dhara::actors
