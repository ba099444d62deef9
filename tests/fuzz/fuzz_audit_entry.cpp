// libFuzzer target for the audit line serializer: arbitrary bytes in every field must give
// one line of valid JSON, keys in the documented order, valid UTF-8 fields read back byte for
// byte, and a timestamp that converts back to the (clamped) time.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/audit_entry.hpp"

namespace {

using dhara::policy::audit_action;
using dhara::policy::audit_entry;
using dhara::policy::decider;
using ordered_json = nlohmann::ordered_json;

void require(bool ok) {
  if (!ok) std::abort();
}

// A second UTF-8 validator written differently from the serializer's (decode, then check
// the code point), so the two must agree.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const std::uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Checks a serialized string: JSON that parses, no raw control bytes or JS line separators,
// and, for valid UTF-8 input, the exact input back.
void check_json_string(std::string_view input) {
  std::string out = "x";  // appends must keep what the buffer held
  dhara::policy::append_json_string(out, input);
  require(out.size() >= 3 && out[0] == 'x' && out[1] == '"' && out.back() == '"');
  for (char ch : out) require(static_cast<unsigned char>(ch) >= 0x20);
  require(out.find("\xe2\x80\xa8") == std::string::npos && out.find("\xe2\x80\xa9") == std::string::npos);
  const auto j = ordered_json::parse(std::string_view(out).substr(1), nullptr, false);
  require(j.is_string());
  const auto& back = j.get_ref<const std::string&>();
  if (valid_utf8(input)) {
    require(back == input);
  } else {
    require(back.find("\xef\xbf\xbd") != std::string::npos);
  }
}

std::int64_t days_from_civil(std::int64_t y, std::int64_t m, std::int64_t d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Parses "YYYY-MM-DDTHH:MM:SS.mmmZ" back to Unix milliseconds.
std::int64_t parse_timestamp(std::string_view t) {
  require(t.size() == 24 && t[4] == '-' && t[7] == '-' && t[10] == 'T' && t[13] == ':' &&
          t[16] == ':' && t[19] == '.' && t[23] == 'Z');
  const auto num = [&](std::size_t at, std::size_t n) {
    std::int64_t v = 0;
    for (std::size_t k = at; k < at + n; ++k) {
      require(t[k] >= '0' && t[k] <= '9');
      v = v * 10 + (t[k] - '0');
    }
    return v;
  };
  const std::int64_t month = num(5, 2), day = num(8, 2), hour = num(11, 2), minute = num(14, 2),
                     second = num(17, 2);
  require(month >= 1 && month <= 12 && day >= 1 && day <= 31 && hour < 24 && minute < 60 && second < 60);
  return days_from_civil(num(0, 4), month, day) * 86'400'000 +
         ((hour * 60 + minute) * 60 + second) * 1000 + num(20, 3);
}

// The input after a plain run of every length up to two words escapes as alone, appended
// (plain bytes passed a word at a time) and in a line (copied a word at a time as read).
void check_after_runs(std::string_view input) {
  std::string alone;
  dhara::policy::append_json_string(alone, input);
  const std::string inner = alone.substr(1, alone.size() - 2);
  for (std::size_t before = 0; before <= 16; ++before) {
    const std::string pad(before, 'a');
    const std::string expected = "\"" + pad + inner + "\"";
    std::string out;
    dhara::policy::append_json_string(out, pad + std::string(input));
    require(out == expected);
    audit_entry e;
    e.extension = pad + std::string(input);
    std::string line;
    dhara::policy::append_audit_body(line, e);
    require(line.find("\"extension\":" + expected + ",") != std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  check_json_string(whole);
  check_after_runs(whole.substr(0, 40));

  FuzzedDataProvider in(data, size);
  audit_entry e;
  e.extension = in.ConsumeRandomLengthString(64);
  e.capability = in.ConsumeRandomLengthString(64);
  std::string key = in.ConsumeRandomLengthString(32);
  std::string value = in.ConsumeRandomLengthString(256);
  const bool with_details = !key.empty() || !value.empty();
  if (with_details) e.details.emplace_back(key, value);
  e.reason = in.ConsumeRandomLengthString(128);
  e.tool = in.ConsumeRandomLengthString(32);
  e.tool_call_id = in.ConsumeRandomLengthString(32);
  e.session = in.ConsumeRandomLengthString(32);
  e.action = in.ConsumeBool() ? audit_action::allowed : audit_action::denied;
  e.decided_by = static_cast<decider>(in.ConsumeIntegralInRange<int>(0, 4));
  e.seq = in.ConsumeIntegral<std::uint64_t>();
  e.timestamp_ms = in.ConsumeIntegral<std::int64_t>();

  std::string line = "previous\n";
  dhara::policy::append_audit_body(line, e);
  const std::size_t body_end = line.size();
  dhara::policy::append_audit_suffix(line, std::string(64, '0'));
  require(line.compare(0, 9, "previous\n") == 0);
  line.erase(0, 9);
  require(line.size() - (body_end - 9) == dhara::policy::audit_hash_suffix_bytes + 1);
  require(line.find('\n') == line.size() - 1);

  const auto j = ordered_json::parse(line, nullptr, false);
  require(j.is_object());

  const bool denied = e.action == audit_action::denied;
  std::vector<std::string> expected = {"timestamp", "extension", "capability", "action", "details"};
  if (denied || !e.reason.empty()) expected.push_back("reason");
  expected.push_back("decidedBy");
  if (!e.tool.empty()) expected.push_back("tool");
  if (!e.tool_call_id.empty()) expected.push_back("toolCallId");
  if (!e.session.empty()) expected.push_back("session");
  expected.push_back("seq");
  expected.push_back("hash");
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  require(keys == expected);

  const auto same_if_valid = [](const ordered_json& v, const std::string& field) {
    require(v.is_string());
    if (valid_utf8(field)) require(v.get_ref<const std::string&>() == field);
  };
  same_if_valid(j["extension"], e.extension);
  same_if_valid(j["capability"], e.capability);
  const auto& details = j["details"];
  require(details.is_object() && details.size() == (with_details ? 1u : 0u));
  if (with_details) {
    const auto it = details.begin();
    if (valid_utf8(key)) require(it.key() == key);
    same_if_valid(it.value(), value);
  }
  if (!e.reason.empty()) {
    same_if_valid(j["reason"], e.reason);
  } else if (denied) {
    require(j["reason"] == std::string(dhara::policy::audit_missing_reason));
  }
  if (!e.tool.empty()) same_if_valid(j["tool"], e.tool);
  if (!e.tool_call_id.empty()) same_if_valid(j["toolCallId"], e.tool_call_id);
  if (!e.session.empty()) same_if_valid(j["session"], e.session);
  require(j["action"] == (denied ? "denied" : "allowed"));
  require(j["decidedBy"] == std::string(dhara::policy::to_string(e.decided_by)));
  require(j["seq"].is_number_unsigned() && j["seq"].get<std::uint64_t>() == e.seq);
  require(j["hash"] == std::string(64, '0'));

  const std::string& ts = j["timestamp"].get_ref<const std::string&>();
  require(ts == dhara::policy::format_timestamp(e.timestamp_ms));
  const std::int64_t lo = days_from_civil(0, 1, 1) * 86'400'000;
  const std::int64_t hi = days_from_civil(10000, 1, 1) * 86'400'000 - 1;
  require(parse_timestamp(ts) == std::clamp(e.timestamp_ms, lo, hi));

  // The ignore filter: any pattern, never a denial.
  e.details.emplace_back("path", value);
  e.details.emplace_back("url", value);
  const std::vector<std::string> patterns = {key, "**", "**/node_modules/**"};
  const bool ignored = dhara::policy::is_ignored(e, patterns);
  require(!(denied && ignored));
  return 0;
}
