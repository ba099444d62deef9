// Who looks at each call (DESIGN §6 "Human in the loop"): nobody (auto), the human before it
// runs (approve), or the human after, at its result (review).
#pragma once

#include <string>

namespace dhara::broker {

enum class hitl_mode { automatic, approve, review };

/// "auto" / "approve" / "review" → the mode (false for anything else).
bool parse_hitl_mode(const std::string& text, hitl_mode& out);

}  // namespace dhara::broker
