// The capability checker actor (see checker.hpp).
#include "actors/checker.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <span>

#include <caf/all.hpp>

#include "actors/ticketed_promise.hpp"
#include "io/files.hpp"
#include "io/name_lookup.hpp"
#include "io/path_resolver.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::policy::host_addresses)

namespace dhara::actors {
namespace {

// Said when a check's answer is dropped undelivered: the checker ended (the session stops)
// while the check waited for the audit writer or a human.
constexpr const char* checker_stopped = "the checker stopped before the decision was audited (dhara is shutting down)";

// check_outcome's move constructor names every member: a structured binding needs exactly as
// many names as the class has members, so one added without the constructor fails here.
[[maybe_unused]] void check_outcome_has_these_members(check_outcome& o) {
  auto& [allowed, capability, reason, decided_by, allowed_root, checked_path, denied_ids, ticket] = o;
  (void)allowed, (void)capability, (void)reason, (void)decided_by, (void)allowed_root, (void)checked_path,
      (void)denied_ids, (void)ticket;
}

struct waiting_reply;
check_outcome audit_failed(const waiting_reply& w, const std::string& why);

// A decided check waiting for its audit entries. Whoever asked always gets an answer: a reply
// dropped undelivered (the checker ends while the writer still holds its entries) is a denial,
// so a caller never waits forever on a checker that is gone (CAF 0.17 answers nothing for a
// promise that is dropped). Move-only: a copy would answer twice.
struct waiting_reply {
  ticketed_promise<check_outcome> rp;
  check_outcome outcome;
  std::string_view first_capability;  // named when the audit fails: the denial says what was
                                      // refused (a catalog name: static storage)

  waiting_reply(ticketed_promise<check_outcome>&& p, check_outcome&& o, std::string_view first)
      : rp(std::move(p)), outcome(std::move(o)), first_capability(first) {}
  waiting_reply(waiting_reply&&) = default;
  waiting_reply& operator=(waiting_reply&&) = default;
  waiting_reply(const waiting_reply&) = delete;
  waiting_reply& operator=(const waiting_reply&) = delete;
  ~waiting_reply() {
    if (rp.pending()) rp.deliver(audit_failed(*this, checker_stopped));
  }
};

// The denial that replaces an outcome whose entries could not be written.
check_outcome audit_failed(const waiting_reply& w, const std::string& why) {
  return {false, w.outcome.allowed ? std::string(w.first_capability) : w.outcome.capability, why,
          policy::decider::failure, {}};
}

struct pending_batch;

using lookup_atom = caf::atom_constant<caf::atom("lookup")>;

// Looks one host name up on a detached thread of its own (getaddrinfo blocks), then ends. The
// name comes as the spawn's argument: CAF 0.17 trips UBSan on a function actor spawned without
// one (../shared/CAF017.md).
using lookup_worker_actor = caf::typed_actor<caf::replies_to<lookup_atom>::with<policy::host_addresses>>;

lookup_worker_actor::behavior_type lookup_worker(lookup_worker_actor::pointer self, std::string host) {
  return {[=](lookup_atom) {
    policy::host_addresses answer = io::look_up_host(host);
    self->quit();
    return answer;
  }};
}

// How long an answer about a host name is used before the name is looked up again (the
// resolver's own TTL is not known through getaddrinfo). A failed lookup is kept as long: the
// host is refused meanwhile.
constexpr auto host_answer_lifetime = std::chrono::seconds(30);
// At most this many host names are looked up at once, each on a thread of its own; others
// wait their turn.
constexpr std::size_t max_lookups = 8;
// A lookup that has not answered by then fails: the checks waiting for it are refused (its
// thread ends when the resolver gives up).
constexpr auto lookup_timeout = std::chrono::seconds(10);
// At most this many answers are kept; when full, expired ones go, and if none had, all.
constexpr std::size_t max_host_answers = 4096;

// The answers about host names the checker looked up, each used for host_answer_lifetime.
class host_answers final : public policy::host_lookup {
 public:
  using clock = std::chrono::steady_clock;

  const policy::host_addresses* find(std::string_view host) const override {
    auto it = answers_.find(host);
    if (it == answers_.end() || it->second.until < clock::now()) return nullptr;
    return &it->second.answer;
  }

  void keep(const std::string& host, policy::host_addresses answer) {
    const clock::time_point now = clock::now();
    if (answers_.size() >= max_host_answers) {
      std::erase_if(answers_, [now](const auto& kv) { return kv.second.until < now; });
      if (answers_.size() >= max_host_answers) answers_.clear();
    }
    answers_.insert_or_assign(host, kept{std::move(answer), now + host_answer_lifetime});
  }

 private:
  struct kept {
    policy::host_addresses answer;
    clock::time_point until;
  };
  std::map<std::string, kept, std::less<>> answers_;
};

// Answers the `n` replies `at(i)` names in one message for each asker: each its outcome when
// `why` is empty (the lines are written), otherwise refused for `why`.
template <class At>
void answer_each(answers_together<check_outcome, check_outcomes>& answers, std::size_t n, At at,
                 const std::string& why) {
  for (std::size_t i = 0; i < n; ++i) answers.expect(at(i).rp);
  for (std::size_t i = 0; i < n; ++i) {
    waiting_reply& w = at(i);
    if (why.empty()) answers.add(w.rp, std::move(w.outcome));
    else answers.add(w.rp, audit_failed(w, why));
  }
}

// At most this many answers of an append are released by the writer itself: for a few, the
// message back to the checker costs more than the answers; for many, the writer, which every
// checker's appends go through, would take on their work (measured: docs/performance.md, "The
// writer releases a few answers itself").
constexpr std::size_t max_answers_released_by_writer = 8;

// The answers of one append, handed to the writer with its lines: the writer releases them
// once the lines are durable, or refuses them (audit_release). Used when every answer goes
// by ticket: such an answer is sent with whichever execution unit is at hand, while a request's
// CAF promise would read the checker's own from the writer's thread. Held in place, not in a
// vector: the checker's list keeps its room, and nothing is freed on the writer's thread but
// this object.
struct released_answers final : audit_release {
  std::array<std::optional<waiting_reply>, max_answers_released_by_writer> replies;
  std::size_t count = 0;
  caf::actor_addr checker;  // ended when its answers cannot be sent (below)

  explicit released_answers(caf::actor_addr c) : checker(std::move(c)) {}
  released_answers(const released_answers&) = delete;
  released_answers& operator=(const released_answers&) = delete;
  // Dropped unanswered: the append never reached the writer (it is gone).
  ~released_answers() override {
    if (claim()) answer("the audit writer is gone", nullptr);
  }

  void answer(const std::string& why, caf::execution_unit* ctx) override {
    try {
      answers_together<check_outcome, check_outcomes> answers;  // one message for each asker
      answers.context(ctx);
      answer_each(answers, count, [this](std::size_t i) -> waiting_reply& { return *replies[i]; }, why);
    } catch (...) {
      // Some answers may not have been sent (memory is short). The checker is ended: its askers
      // watch it and fail every call still waiting on it (closed), as when the checker itself
      // fails to send. What was not sent is forgotten here: answering it from this thread
      // would read the checker's execution unit, which only its own run may.
      for (std::size_t i = 0; i < count; ++i) replies[i]->rp.forget();
      try {
        caf::anon_send_exit(checker, caf::exit_reason::unhandled_exception);
      } catch (...) {
        std::terminate();  // no way left to tell the askers: end rather than leave them waiting
      }
    }
  }
};

struct checker_state {
  policy::snapshot_ptr snapshot;
  audit_sink_actor audit;
  policy::audit_lines lines;                 // decided, not yet sent to the writer
  std::vector<waiting_reply> replies;        // released once those lines are durable
  std::vector<waiting_reply> spare_replies;  // an answered append's, emptied: the next round's
  std::vector<std::string> ignore_patterns;  // auditIgnorePatterns
  bool flush_scheduled = false;
  std::vector<pending_batch> deferred;       // arrived with more in the mailbox: decided together
  std::vector<std::string> paths_ahead;      // their paths, whose first looks are taken at once
  io::real_path_resolver resolver;
  std::unique_ptr<io::path_executable_locator> locator;
  host_answers hosts;                        // what host names looked up resolved to
  // The host names being looked up, or waiting their turn, with the batches waiting for each.
  std::map<std::string, std::vector<std::shared_ptr<pending_batch>>> lookups;
  std::deque<std::string> lookups_queued;    // names waiting for a thread (max_lookups)
  std::size_t lookups_running = 0;
  hitl_actor approver;                       // asked about pending capabilities; none: denied
  // The answers handed to the writer (send_lines), until it releases them: should the checker
  // end first, it refuses those still waiting, as it does the replies it holds itself.
  std::vector<std::weak_ptr<released_answers>> handed_over;
  static inline const char* name = "checker";

  checker_state() = default;
  checker_state(const checker_state&) = delete;
  checker_state& operator=(const checker_state&) = delete;
  ~checker_state() {
    for (auto& h : handed_over) {
      if (auto r = h.lock(); r && r->claim()) r->answer(checker_stopped, nullptr);
    }
  }
};

// An argv as one line a reader can take apart again: a word holding a space, a quote, a
// backslash or a control character, or an empty one, is written in single quotes (a quote
// inside as '\''). Joined bare, ["sh","-c","a b"] and ["sh","-c","a","b"] read alike (a review).
std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && std::none_of(a.begin(), a.end(), [](char c) {
      return static_cast<unsigned char>(c) <= ' ' || c == '\'' || c == '"' || c == '\\' || c == 0x7f;
    });
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

// Serializes the audit line of one decided check into `out` (timestamp now), unless
// auditIgnorePatterns drop it (never a denial). Reads the batch's own strings: no entry is built.
void add_audit_line(policy::audit_lines& out, const check_batch& batch, const policy::gate_check& check,
                    const policy::decision& d, const std::vector<std::string>& ignore_patterns) {
  std::string argv;
  policy::audit_detail detail;
  std::size_t details = 1;
  switch (check.kind) {
    case policy::subject_kind::none:
      // The capability alone; a name it is about (host/env/get's variable) is recorded.
      if (check.subject.empty() || check.input_key.empty()) details = 0;
      else detail = {check.input_key, check.subject};
      break;
    case policy::subject_kind::path: detail = {"path", check.subject}; break;
    case policy::subject_kind::url: detail = {"url", check.subject}; break;
    case policy::subject_kind::command_string: detail = {"command", check.subject}; break;
    case policy::subject_kind::argv:
      argv = joined(check.argv);
      detail = {"command", argv};
      break;
  }
  policy::audit_entry_view e;
  e.timestamp_ms = io::wall_clock_ms();
  e.extension = batch.extension;
  e.capability = policy::to_string(check.cap);
  e.action = d.allowed() ? policy::audit_action::allowed : policy::audit_action::denied;
  // What a path check resolved to, when that is not the path as given (relative, with `..`,
  // or through a link): the line names the file a check was about, not only the words it
  // came in (a relative path's line did not say which folder it was in).
  policy::audit_detail all[3] = {detail};
  if (check.kind == policy::subject_kind::path && !d.resolved.empty() && d.resolved != check.subject)
    all[details++] = {"resolved", d.resolved};
  if (!check.also_key.empty()) all[details++] = {check.also_key, check.also};
  e.details = {all, details};
  e.reason = d.reason;
  e.decided_by = d.decided_by;
  e.tool = batch.tool;
  e.tool_call_id = batch.tool_call_id;
  e.session = batch.session;
  if (!policy::is_ignored(e, ignore_patterns, check.kind == policy::subject_kind::path ? std::string_view(d.resolved) : std::string_view()))
    out.add(e);
}

using checker_ptr = checker_actor::stateful_pointer<checker_state>;

// What a batch's outcome is until a check denies: allowed, by the rules. Made in place (the
// five-argument constructor would move three empty strings, each a call to memcpy).
check_outcome allowed_so_far() {
  check_outcome o;
  o.allowed = true;
  o.decided_by = policy::decider::rule;
  return o;
}

// A check batch being decided: where it stands, so a question to the human can resume it.
// Decided without a question (the common case), it lives on the handler's stack and its lines
// go straight into the checker's; a question moves it to the heap with the lines it wrote.
struct pending_batch {
  check_batch batch;
  std::size_t next = 0;
  policy::audit_lines lines;          // of the checks decided so far, while a human is asked
  std::string_view first_capability;  // of the first of them, named if the audit fails
  check_outcome outcome = allowed_so_far();
  ticketed_promise<check_outcome> rp;
  std::string host;                   // the host name a lookup is waited for, while it is

  pending_batch(check_batch&& b, ticketed_promise<check_outcome>&& p) : batch(std::move(b)), rp(std::move(p)) {}
  pending_batch(pending_batch&&) = default;
  pending_batch& operator=(pending_batch&&) = delete;
  pending_batch(const pending_batch&) = delete;
  pending_batch& operator=(const pending_batch&) = delete;
  // Dropped undelivered (the checker ended while a human was asked or a host looked up): a
  // denial, as above, naming the capability of the check it waited on.
  ~pending_batch() {
    if (!rp.pending()) return;
    const std::size_t waited_on = host.empty() ? next - 1 : next;  // a lookup's check is at next
    std::string cap = waited_on < batch.checks.size() ? std::string(policy::to_string(batch.checks[waited_on].cap)) : "";
    rp.deliver(check_outcome{false, std::move(cap), checker_stopped, policy::decider::failure, {}});
  }
};

// The user's answer to a pending capability, as the decision that is audited.
policy::decision user_decision(const hitl_answer& a, const std::string& cap, const std::string& extension) {
  switch (a.decision) {
    case hitl_decision::allow:
    case hitl_decision::always: return {policy::verdict_kind::allow, a.failure, policy::decider::user, {}};  // "not asked: …"
    case hitl_decision::deny:
      return {policy::verdict_kind::deny, cap + " was denied by the user for '" + extension + "'", policy::decider::user, {}};
    case hitl_decision::quit:
      return {policy::verdict_kind::deny, "the user quit before answering about " + cap, policy::decider::user, {}};
    case hitl_decision::lost: break;
  }
  return {policy::verdict_kind::deny, "no answer about " + cap + " could be had (" + a.failure + ")", policy::decider::failure, {}};
}

// Records one decided check, its audit line into `lines`; false when the batch is decided (the
// first denial decides).
bool record(pending_batch& p, policy::audit_lines& lines, const policy::gate_check& c, policy::decision&& d,
            const checker_state& s) {
  if (p.first_capability.empty()) p.first_capability = policy::to_string(c.cap);
  add_audit_line(lines, p.batch, c, d, s.ignore_patterns);
  if (d.allowed() && c.kind == policy::subject_kind::path && p.batch.opens_paths) {
    p.outcome.allowed_root = std::string(d.matched_rule);
    p.outcome.checked_path = std::move(d.resolved);
    if (s.snapshot) {  // the denials of the rules that allowed it: at yolo, dhara's own files only
      const policy::policy_snapshot& rules = *s.snapshot;
      p.outcome.denied_ids =
          (rules.level == policy::security_level::yolo ? rules.state_files : rules.paths).denied_ids;
    }
  }
  if (d.allowed()) return true;
  p.outcome = {false, std::string(policy::to_string(c.cap)), d.reason, d.decided_by, {}};
  return false;
}

// What a batch not yet decided waits for.
enum class waits {
  nothing,  // decided
  human,    // the answer to a question about the check before p.next
  lookup,   // the answer about p.host, which the check at p.next names
};

// Decides the checks of `p` from p.next on, their lines into `lines`, until one needs a human
// (an approver is set: p.next is past it) or a host name looked up (p.next is at it, decided
// again once the answer is in), or the batch is decided.
waits decide_from(checker_ptr self, pending_batch& p, policy::audit_lines& lines) {
  auto& s = self->state;
  policy::check_environment env{&s.resolver, s.locator.get(), &s.hosts};
  while (p.next < p.batch.checks.size()) {
    const policy::gate_check& c = p.batch.checks[p.next++];
    policy::decision d = policy::decide(*s.snapshot, c.request(p.batch.extension), env);
    if (d.verdict == policy::verdict_kind::lookup) {
      --p.next;
      p.host = std::move(d.resolved);
      return waits::lookup;
    }
    if (d.verdict == policy::verdict_kind::ask) {
      if (s.approver) return waits::human;
      // Nobody can be asked (a batch without a terminal): refused, with the approve command.
      d = {policy::verdict_kind::deny,
           std::string(policy::to_string(c.cap)) + " is not approved for '" + p.batch.extension + "'; run '" +
               policy::approve_command(p.batch.extension, c.cap) + "'",
           policy::decider::rule, {}};
    }
    if (!record(p, lines, c, std::move(d), s)) break;
  }
  return waits::nothing;
}

// With more checks than this in the mailbox, their lines go to the writer in appends of this
// many answers: the writer writes and hashes one append while the checker decides the next,
// and the first answers are released before the last check is decided. One append for all
// of them left a core idle while the writer worked (docs/performance.md, "Appends of 128").
constexpr std::size_t max_answers_per_append = 128;

// The lines decided so far, taken for an append; the checker's list gets room for a next
// round as large (not a regrowth per doubling).
policy::audit_lines take_lines(checker_state& s) {
  policy::audit_lines batch;
  std::swap(batch, s.lines);
  s.lines.reserve(batch.size(), batch.bytes());
  return batch;
}

// Sends the lines decided so far to the writer in one append (nothing when there are none);
// their decisions are released once it has written them (refused if it cannot). A few answers
// that all go by ticket the writer releases itself (released_answers); otherwise it answers
// the append, and the checker releases them.
void send_lines(checker_ptr self) {
  auto& s = self->state;
  if (s.replies.empty() && s.lines.empty()) return;
  if (s.replies.size() <= max_answers_released_by_writer &&
      std::all_of(s.replies.begin(), s.replies.end(), [](const waiting_reply& w) { return w.rp.ticketed(); })) {
    auto release = std::make_shared<released_answers>(self->address());
    for (waiting_reply& w : s.replies) release->replies[release->count++].emplace(std::move(w));
    s.replies.clear();
    policy::audit_lines batch = take_lines(s);
    // Those the writer released already are forgotten here.
    std::erase_if(s.handed_over, [](const std::weak_ptr<released_answers>& h) { return h.expired(); });
    s.handed_over.push_back(release);
    self->send(s.audit, append_atom::value, std::move(batch), audit_release_ptr(std::move(release)));
    return;
  }
  auto replies = std::make_shared<std::vector<waiting_reply>>(std::move(s.replies));
  s.replies.clear();
  policy::audit_lines batch = take_lines(s);
  // The next round is likely as large: room for it now, not a regrowth per doubling (none in
  // the steady state: the spare of an answered round has it).
  s.replies.swap(s.spare_replies);
  s.replies.reserve(replies->size());
  self->request(s.audit, caf::infinite, append_atom::value, std::move(batch))
      .then(
          [self, replies](audit_ack& ack) {
            {
              answers_together<check_outcome, check_outcomes> answers;  // one message for each asker
              auto& rs = *replies;
              answer_each(answers, rs.size(), [&rs](std::size_t i) -> waiting_reply& { return rs[i]; }, ack.error);
            }
            replies->clear();  // every one answered
            auto& spare = self->state.spare_replies;
            if (replies->capacity() > spare.capacity()) spare.swap(*replies);
          },
          [replies](caf::error&) {
            answers_together<check_outcome, check_outcomes> answers;
            for (auto& w : *replies) answers.add(w.rp, audit_failed(w, "the audit writer is gone"));
          });
}

// Makes sure the lines decided so far reach the writer: at once with nothing else in the
// mailbox, otherwise through a flush queued behind what is there, so they go together.
void flush_soon(checker_ptr self) {
  auto& s = self->state;
  if (s.flush_scheduled) return;
  if (self->mailbox().empty()) return send_lines(self);
  s.flush_scheduled = true;
  self->send(self, flush_atom::value);
}

// The decision is released only once its lines are as durable as configured (they are in
// the checker's lines already); the lines of all checks in the mailbox go to the writer
// together, up to max_answers_per_append. With nothing else in the mailbox they go at once,
// not through a message to self. `in_round`: one of the deferred batches being decided
// together, whose flush is already queued.
void finish(checker_ptr self, pending_batch& p, bool in_round = false) {
  auto& s = self->state;
  s.replies.emplace_back(std::move(p.rp), std::move(p.outcome), p.first_capability);
  if (s.replies.size() >= max_answers_per_append) return send_lines(self);
  if (!in_round) flush_soon(self);
}

void ask_human(checker_ptr self, std::shared_ptr<pending_batch> p);
void look_up(checker_ptr self, std::shared_ptr<pending_batch> p);

// A batch that waited is decided: its lines join the checker's, its answer waits for them.
void release(checker_ptr self, pending_batch& p) {
  self->state.lines.add(p.lines);
  finish(self, p);
}

// Goes on with a batch held on the heap once decide_from says what it waits for.
void wait_for(checker_ptr self, std::shared_ptr<pending_batch> p, waits w) {
  switch (w) {
    case waits::human: return ask_human(self, std::move(p));
    case waits::lookup: return look_up(self, std::move(p));
    case waits::nothing: return release(self, *p);
  }
}

// Asks the approver about the check before p->next (its decision was `ask`), decides it again
// under the rules in force when the answer comes, then goes on with the batch; its lines stay
// with it until it is decided.
void ask_human(checker_ptr self, std::shared_ptr<pending_batch> p) {
  const policy::gate_check& question_check = p->batch.checks[p->next - 1];
  hitl_question q;
  q.kind = question_kind::capability;
  q.extension = p->batch.extension;
  q.tool = p->batch.tool;
  q.tool_call_id = p->batch.tool_call_id;
  q.capability = std::string(policy::to_string(question_check.cap));
  q.subject = question_check.kind == policy::subject_kind::argv
                  ? policy::approval_subject({{"argv", question_check.argv}}).text
                  : question_check.subject;
  auto done = [self, p] { release(self, *p); };
  self->request(self->state.approver, caf::infinite, question_atom::value, std::move(q))
      .then(
          [self, p, done](hitl_answer& a) {
            auto& s = self->state;
            const policy::gate_check& c = p->batch.checks[p->next - 1];
            if (!s.snapshot) {  // the store never sends none, but fail closed
              record(*p, p->lines, c, policy::failure_decision("no policy is loaded"), s);
              return done();
            }
            policy::decision answer = user_decision(a, std::string(policy::to_string(c.cap)), p->batch.extension);
            if (answer.allowed()) {
              // The rules may have changed while the human thought: the check is decided again
              // under the snapshot in force now. A denial stands; otherwise the user's answer does,
              // with what this decision matched (for a path, the root and the resolution a host
              // file operation opens, as of now).
              // A host name the check named was vetted before the question (an answer about it
              // that has expired since reads `lookup` here): that vetting stands.
              policy::check_environment env{&s.resolver, s.locator.get(), &s.hosts};
              policy::decision now = policy::decide(*s.snapshot, c.request(p->batch.extension), env);
              if (now.verdict == policy::verdict_kind::deny) {
                now.reason = "checked again when the user answered: " + now.reason;
                answer = std::move(now);
              } else if (now.verdict != policy::verdict_kind::lookup) {
                answer.matched_rule = now.matched_rule;
                answer.resolved = std::move(now.resolved);
              }
            }
            if (!record(*p, p->lines, c, std::move(answer), s)) return done();
            wait_for(self, p, decide_from(self, *p, p->lines));
          },
          [self, p, done](caf::error& e) {
            const policy::gate_check& c = p->batch.checks[p->next - 1];
            record(*p, p->lines, c,
                   user_decision({hitl_decision::lost, self->system().render(e)}, std::string(policy::to_string(c.cap)),
                                 p->batch.extension),
                   self->state);
            done();
          });
}

void start_lookup(checker_ptr self, const std::string& host);

// The answer about `host` is in: it is kept, and the batches waiting for it go on.
void looked_up(checker_ptr self, const std::string& host, policy::host_addresses answer) {
  auto& s = self->state;
  s.hosts.keep(host, std::move(answer));
  if (auto waiting = s.lookups.extract(host); !waiting.empty())
    for (std::shared_ptr<pending_batch>& p : waiting.mapped()) {
      p->host.clear();
      if (!s.snapshot) {  // the store never sends none, but fail closed
        record(*p, p->lines, p->batch.checks[p->next], policy::failure_decision("no policy is loaded"), s);
        release(self, *p);
        continue;
      }
      wait_for(self, p, decide_from(self, *p, p->lines));
    }
  while (!s.lookups_queued.empty() && s.lookups_running < max_lookups) {
    std::string next = std::move(s.lookups_queued.front());
    s.lookups_queued.pop_front();
    start_lookup(self, next);
  }
}

// Looks `host` up on a thread of its own.
void start_lookup(checker_ptr self, const std::string& host) {
  lookup_worker_actor worker;
  try {
    worker = self->spawn<caf::detached>(lookup_worker, host);
  } catch (const std::exception& e) {  // no thread to be had (a process limit): refused, not lost
    return looked_up(self, host, {{}, std::string("no thread could look it up: ") + e.what()});
  }
  ++self->state.lookups_running;
  self->request(worker, lookup_timeout, lookup_atom::value)
      .then(
          [self, host](policy::host_addresses& answer) {
            --self->state.lookups_running;
            looked_up(self, host, std::move(answer));
          },
          [self, host](caf::error& e) {
            --self->state.lookups_running;
            looked_up(self, host,
                      {{},
                       e == caf::sec::request_timeout
                           ? "no answer within " + std::to_string(lookup_timeout.count()) + " s"
                           : "the lookup failed: " + self->system().render(e)});
          });
}

// Waits for the answer about p->host (a URL's host that is not listed, DESIGN §4): one lookup
// a name, however many batches wait for it.
void look_up(checker_ptr self, std::shared_ptr<pending_batch> p) {
  auto& s = self->state;
  const std::string host = p->host;
  auto& waiting = s.lookups[host];
  waiting.push_back(std::move(p));
  if (waiting.size() > 1) return;  // looked up already, or waiting its turn
  if (s.lookups_running >= max_lookups) {
    s.lookups_queued.push_back(host);
    return;
  }
  start_lookup(self, host);
}

// A new batch: decided here and now unless a human must be asked or a host name looked up.
void check(checker_ptr self, pending_batch& p, bool in_round = false) {
  auto& s = self->state;
  if (!s.snapshot) {
    p.rp.deliver(check_outcome{false, "", "no policy is loaded", policy::decider::failure, {}});
    return;
  }
  const std::size_t first_line = s.lines.size();
  if (waits w = decide_from(self, p, s.lines); w != waits::nothing) {
    auto held = std::make_shared<pending_batch>(std::move(p));
    // Its lines so far go with it: they must reach the writer in the append its answer waits
    // for, not in an earlier one whose failure would leave it released without them.
    s.lines.move_tail(first_line, held->lines);
    return wait_for(self, std::move(held), w);
  }
  finish(self, p, in_round);
}

// At most this many batches are deferred before they are decided. A round's first looks go to
// the kernel 128 at a time (io/open_batch.hpp); a tool call can hold a few paths.
constexpr std::size_t max_deferred = 128;

// Ends the round's look-ahead however the round ends, an exception included: a look never
// answers for a check outside the round it was taken for.
struct look_ahead_round {
  explicit look_ahead_round(std::span<const std::string> paths) { io::real_path_resolver::look_ahead(paths); }
  ~look_ahead_round() { io::real_path_resolver::end_look_ahead(); }
  look_ahead_round(const look_ahead_round&) = delete;
  look_ahead_round& operator=(const look_ahead_round&) = delete;
};

// Decides the batches that arrived while more waited in the mailbox, in the order they came.
// The first looks of all their paths are taken together first (real_path_resolver::look_ahead:
// one system call for up to 128 of them instead of one a path); every path is still resolved
// by decide(), which takes its look from the round's. The round's flush is queued already
// (`deferred` is never left without one).
void decide_deferred(checker_ptr self) {
  auto& s = self->state;
  if (s.deferred.empty()) return;
  std::size_t n = 0;
  if (s.snapshot) {
    for (const pending_batch& p : s.deferred) {
      for (const policy::gate_check& c : p.batch.checks) {
        if (c.kind != policy::subject_kind::path) continue;
        if (n == s.paths_ahead.size()) s.paths_ahead.emplace_back();
        if (policy::path_to_resolve(c.subject, s.snapshot->cwd, s.snapshot->home, s.paths_ahead[n])) ++n;
      }
    }
  }
  std::vector<pending_batch> round;
  round.swap(s.deferred);
  {
    look_ahead_round looks(std::span<const std::string>(s.paths_ahead.data(), n));
    for (pending_batch& p : round) check(self, p, /*in_round=*/true);
  }
  round.clear();
  // Keep the room for the next round. `deferred` is empty here: nothing defers during a round
  // (a batch arrives only in its own handler).
  if (s.deferred.capacity() < round.capacity()) s.deferred.swap(round);
}

}  // namespace

checker_actor spawn_checker(caf::actor_system& sys, policy::snapshot_ptr snapshot, audit_sink_actor audit,
                            std::vector<std::string> audit_ignore_patterns) {
  return sys.spawn([](checker_actor::stateful_pointer<checker_state> self, policy::snapshot_ptr snap,
                      audit_sink_actor sink, std::vector<std::string> ignore) -> checker_actor::behavior_type {
    auto& st = self->state;
    st.snapshot = std::move(snap);
    st.audit = std::move(sink);
    st.ignore_patterns = std::move(ignore);
    const char* path_env = std::getenv("PATH");
    st.locator = std::make_unique<io::path_executable_locator>(path_env ? path_env : "/usr/bin:/bin",
                                                               st.snapshot ? st.snapshot->cwd : "/");
    return {
        [=](check_atom, check_batch& batch) -> caf::typed_response_promise<check_outcome> {
          auto& s = self->state;
          ticketed_promise<check_outcome> rp{self, batch.ticket};
          auto handle = rp.handle();
          if (s.deferred.empty() && self->mailbox().empty()) {  // alone: decided now
            pending_batch p{std::move(batch), std::move(rp)};
            check(self, p);
            return handle;
          }
          // More are waiting: decided with them, when the flush queued behind them comes (or
          // once max_deferred have gathered).
          s.deferred.emplace_back(std::move(batch), std::move(rp));
          if (s.deferred.size() >= max_deferred) {
            decide_deferred(self);
          } else if (!s.flush_scheduled) {
            s.flush_scheduled = true;
            self->send(self, flush_atom::value);
          }
          return handle;
        },
        [=](refused_atom, check_batch& batch, std::string& why) -> caf::typed_response_promise<check_outcome> {
          ticketed_promise<check_outcome> rp{self, batch.ticket};
          auto handle = rp.handle();
          pending_batch p{std::move(batch), std::move(rp)};
          if (p.batch.checks.empty()) {  // nothing to name: refused all the same
            p.rp.deliver(check_outcome{false, "", why, policy::decider::rule, {}});
            return handle;
          }
          p.next = 1;
          record(p, self->state.lines, p.batch.checks.front(), {policy::verdict_kind::deny, std::move(why), policy::decider::rule, {}},
                 self->state);
          finish(self, p);
          return handle;
        },
        [=](flush_atom) {
          self->state.flush_scheduled = false;
          decide_deferred(self);
          send_lines(self);
        },
        // Batches that came before a new snapshot or approver are decided as before it.
        [=](snapshot_atom, policy::snapshot_ptr& next) {
          decide_deferred(self);
          self->state.snapshot = std::move(next);
        },
        [=](approver_atom, hitl_actor& approver) {
          decide_deferred(self);
          self->state.approver = std::move(approver);
        },
    };
  }, std::move(snapshot), std::move(audit), std::move(audit_ignore_patterns));
}

}  // namespace dhara::actors
