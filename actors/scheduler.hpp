// The scheduler dhara's actor systems run on: CAF's work sharing, except that a message one
// worker sends to an idle actor stays on that worker when nothing else is waiting (see
// docs/architecture.md, "Threads").
#pragma once

#include <cstddef>

#include <caf/fwd.hpp>

namespace dhara::actors {

/// Makes `cfg` run `workers` scheduler threads with dhara's scheduling policy. Call before
/// the actor system is made from `cfg`.
void use_dhara_scheduler(caf::actor_system_config& cfg, std::size_t workers);

}  // namespace dhara::actors
