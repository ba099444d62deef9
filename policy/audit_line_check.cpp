// Reading an audit line back (see audit_line_check.hpp).
#include "policy/audit_line_check.hpp"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "policy/audit_entry.hpp"
#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"

namespace dhara::policy {
namespace {

constexpr std::string_view suffix_head = R"(,"hash":")";  // then 64 hex, then "}
static_assert(audit_hash_suffix_bytes == suffix_head.size() + 64 + 2);

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The 64 hex characters of a line's hash suffix (the line without its newline), or empty
// when the line does not end with `,"hash":"<64 lowercase hex>"}`.
std::string_view hash_of(std::string_view line) {
  constexpr std::size_t n = audit_hash_suffix_bytes;
  if (line.size() < n + 1) return {};
  const std::string_view suffix = line.substr(line.size() - n);
  if (suffix.substr(0, suffix_head.size()) != suffix_head || suffix.substr(n - 2) != "\"}") return {};
  const std::string_view hex = suffix.substr(suffix_head.size(), 64);
  return is_lower_hex(hex) ? hex : std::string_view{};
}

// A SAX pass over one line: checks it is one JSON object no deeper than max_json_depth and
// picks the top-level "seq", without building a DOM (a hostile 16 MiB line of tiny members
// would cost ten times its size as a DOM).
class line_checker {
 public:
  using json = nlohmann::json;

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (seq_next_) seq_ = v;
    return value();
  }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool key(json::string_t& k) {
    if (depth_ == 1 && k == "seq") {
      if (seen_seq_) return fail("the line has two \"seq\" keys");
      seen_seq_ = seq_next_ = true;
    }
    return true;
  }
  bool start_object(std::size_t) {
    if (depth_ == 0 && started_) return fail("the line holds more than one JSON value");
    started_ = true;
    return enter();
  }
  bool end_object() { return leave(); }
  bool start_array(std::size_t) {
    if (depth_ == 0) return fail("the line is not a JSON object");
    seq_next_ = false;
    return enter();
  }
  bool end_array() { return leave(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& e) {
    return fail("the line is not JSON (at byte " + std::to_string(position) + ": " +
                printable_excerpt(e.what(), 200) + ")");
  }

  const std::string& why() const { return why_; }
  std::uint64_t seq() const { return seq_; }

 private:
  bool value() {
    if (depth_ == 0) return fail("the line is not a JSON object");
    seq_next_ = false;
    return true;
  }
  bool enter() {
    seq_next_ = false;
    if (++depth_ > max_json_depth) return fail("the line nests deeper than " + std::to_string(max_json_depth));
    return true;
  }
  bool leave() {
    --depth_;
    return true;
  }
  bool fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }

  std::size_t depth_ = 0;
  bool started_ = false;
  bool seen_seq_ = false;
  bool seq_next_ = false;  // the next value belongs to the top-level "seq" key
  std::uint64_t seq_ = 0;
  std::string why_;
};

}  // namespace

std::variant<audit_line_facts, std::string> read_audit_line_reference(std::string_view line) {
  if (line.empty()) return std::string("the line is empty");
  const std::string_view hash = hash_of(line);
  if (hash.empty()) {
    return std::string(R"(the line does not end with ,"hash":"<64 lowercase hex>"})");
  }
  line_checker checker;
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(line.begin(), line.end(), &checker);
  } catch (const std::exception& e) {  // allocation failure; the SAX parser reports the rest
    return "the line could not be checked (" + std::string(e.what()) + ")";
  }
  if (!parsed || !checker.why().empty()) {
    return checker.why().empty() ? std::string("the line is not a JSON object") : checker.why();
  }
  if (checker.seq() == 0) return std::string("the line has no \"seq\" that is a positive integer");
  return audit_line_facts{checker.seq(), hash};
}

std::variant<audit_line_facts, std::string> read_audit_line(std::string_view line) {
  // Well-formed lines (all that dhara writes) are checked without a document or nlohmann's
  // lexer; whatever the fast path does not vouch for, the reference decides and explains.
  if (const std::string_view hash = hash_of(line); !hash.empty()) {
    std::uint64_t seq = 0;
    if (scan_json_object_fast(line, max_json_depth, "seq", seq) && seq > 0) return audit_line_facts{seq, hash};
  }
  return read_audit_line_reference(line);
}

}  // namespace dhara::policy
