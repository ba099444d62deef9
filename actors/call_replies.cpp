// The caller's table of awaited answers (see call_replies.hpp).
#include "actors/call_replies.hpp"

#include <utility>
#include <vector>

#include <caf/system_messages.hpp>
#include <caf/sec.hpp>

namespace dhara::actors {
namespace {

// Runs and forgets the handler of `ticket`. It is taken out of the table first: it may start
// another call, which adds to the table. The node is kept for a later call only once the
// handler has run, so nothing that could fail comes between the answer and its handler.
template <class Table, class T>
void answer(Table& t, T& x, std::size_t max_spare) {
  auto it = t.live.find(x.ticket);
  if (it == t.live.end()) return;
  auto node = t.live.extract(it);
  auto k = std::move(node.mapped().k);
  node.mapped() = {};  // holds nothing of the call it served
  k(&x, caf::error{});
  if (t.spare.size() < max_spare) t.spare.push_back(std::move(node));
}

// Tells every call waiting on `source` that its answer will not come.
template <class Table>
void fail_waiting_on(Table& t, caf::actor_id source, const caf::error& why) {
  std::vector<typename Table::map::mapped_type> lost;
  for (auto it = t.live.begin(); it != t.live.end();) {
    if (it->second.from != source) {
      ++it;
      continue;
    }
    lost.push_back(std::move(it->second));
    it = t.live.erase(it);
  }
  for (auto& w : lost) w.k(nullptr, why);
}

}  // namespace

void call_replies::answered(check_outcome& o) { answer(checks_, o, max_spare_nodes); }
void call_replies::answered(check_outcomes& os) {
  for (check_outcome& o : os.outcomes) answer(checks_, o, max_spare_nodes);
}
void call_replies::answered(call_result& r) { answer(results_, r, max_spare_nodes); }
void call_replies::answered(call_results& rs) {
  for (call_result& r : rs.results) answer(results_, r, max_spare_nodes);
}

void call_replies::down(const caf::down_msg& m) {
  const caf::actor_id source = m.source ? m.source.id() : caf::actor_id{0};
  watched_.erase(source);
  // An actor that ended normally still dropped the messages left in its mailbox: named as
  // CAF names a request whose receiver went down.
  caf::error why = m.reason ? m.reason : caf::make_error(caf::sec::request_receiver_down);
  fail_waiting_on(checks_, source, why);
  fail_waiting_on(results_, source, why);
}

}  // namespace dhara::actors
