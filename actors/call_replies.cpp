// The caller's table of awaited answers (see call_replies.hpp).
#include "actors/call_replies.hpp"

#include <utility>
#include <vector>

#include <caf/system_messages.hpp>
#include <caf/sec.hpp>

namespace dhara::actors {
namespace {

// Runs and forgets the handler of `ticket`. It is taken out of the table first: it may start
// another call, which adds to the table.
template <class Table, class T>
void answer(Table& t, T& x) {
  auto it = t.find(x.ticket);
  if (it == t.end()) return;
  auto k = std::move(it->second.k);
  t.erase(it);
  k(&x, caf::error{});
}

// Tells every call waiting on `source` that its answer will not come.
template <class Table>
void fail_waiting_on(Table& t, const caf::actor_addr& source, const caf::error& why) {
  std::vector<typename Table::mapped_type> lost;
  for (auto it = t.begin(); it != t.end();) {
    if (it->second.from != source) {
      ++it;
      continue;
    }
    lost.push_back(std::move(it->second));
    it = t.erase(it);
  }
  for (auto& w : lost) w.k(nullptr, why);
}

}  // namespace

void call_replies::answered(check_outcome& o) { answer(checks_, o); }
void call_replies::answered(call_result& r) { answer(results_, r); }

void call_replies::down(const caf::down_msg& m) {
  watched_.erase(m.source);
  // An actor that ended normally still dropped the messages left in its mailbox: named as
  // CAF names a request whose receiver went down.
  caf::error why = m.reason ? m.reason : caf::make_error(caf::sec::request_receiver_down);
  fail_waiting_on(checks_, m.source, why);
  fail_waiting_on(results_, m.source, why);
}

}  // namespace dhara::actors
