#include "util/bounded_json.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>
#include <vector>

namespace pf::util {
namespace {

using nlohmann::json;

// A char iterator that counts the characters the lexer has taken, so that refusals raised from
// SAX events (which nlohmann gives no position) can say where they are.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* at, std::size_t* consumed) : at_(at), consumed_(consumed) {}

  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    ++*consumed_;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  std::size_t* consumed_;
};

// Builds the tree like nlohmann's own DOM parser, refusing (and so stopping the parse) at the
// first value past a limit: the tree never grows deeper or larger than the limits allow.
class BoundedDomBuilder {
 public:
  BoundedDomBuilder(json& root, const JsonLimits& limits, const std::size_t& consumed)
      : root_(root), limits_(limits), consumed_(consumed) {}

  const std::string& error() const { return error_; }

  bool null() { return add(json(nullptr)) != nullptr; }
  bool boolean(bool value) { return add(json(value)) != nullptr; }
  bool number_integer(json::number_integer_t value) { return add(json(value)) != nullptr; }
  bool number_unsigned(json::number_unsigned_t value) { return add(json(value)) != nullptr; }
  bool number_float(json::number_float_t value, const json::string_t& /*text*/) {
    if (!std::isfinite(value)) return refuse("number out of range");
    return add(json(value)) != nullptr;
  }
  bool string(json::string_t& value) {
    if (!string_fits(value)) return false;
    return add(json(std::move(value))) != nullptr;
  }
  bool binary(json::binary_t& /*value*/) { return refuse("binary value"); }

  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool key(json::string_t& name) {
    if (!string_fits(name)) return false;
    object_member_ = &(*open_.back())[name];
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_array() {
    open_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) {
    // 406: a number that overflows a double ("1e400", a 400-digit integer).
    if (e.id == 406) {
      error_ = "number out of range at byte " + std::to_string(position);
      return false;
    }
    // nlohmann prefixes "[json.exception.parse_error.101] "; the rest says where and why.
    std::string what = e.what();
    const auto bracket = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) {
      what.erase(0, bracket + 2);
    }
    error_ = std::move(what);
    return false;
  }

 private:
  bool refuse(const std::string& what) {
    error_ = what + " at byte " + std::to_string(consumed_);
    return false;
  }

  bool string_fits(const std::string& text) {
    if (text.size() <= limits_.max_string_bytes) return true;
    return refuse("string longer than " + std::to_string(limits_.max_string_bytes) + " bytes");
  }

  bool open(json container) {
    if (open_.size() >= limits_.max_depth) {
      return refuse("nesting deeper than " + std::to_string(limits_.max_depth));
    }
    json* added = add(std::move(container));
    if (added == nullptr) return false;
    open_.push_back(added);
    return true;
  }

  // The new value's place in the tree, or nullptr when refused. Pointers to open containers
  // stay valid: a container only grows while it is the innermost open one.
  json* add(json value) {
    if (++values_ > limits_.max_values) {
      refuse("more than " + std::to_string(limits_.max_values) + " values");
      return nullptr;
    }
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    *object_member_ = std::move(value);
    return object_member_;
  }

  json& root_;
  const JsonLimits& limits_;
  const std::size_t& consumed_;
  std::vector<json*> open_;
  json* object_member_ = nullptr;
  std::size_t values_ = 0;
  std::string error_;
};

std::string quoted(const std::filesystem::path& path) {
  return "'" + path.string() + "'";
}

}  // namespace

tl::expected<json, std::string> parse_json(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return tl::unexpected("document too large: " + std::to_string(text.size()) +
                          " bytes (at most " + std::to_string(limits.max_bytes) + ")");
  }
  try {
    json root;
    std::size_t consumed = 0;
    BoundedDomBuilder builder(root, limits, consumed);
    const CountingIterator first(text.data(), &consumed);
    const CountingIterator last(text.data() + text.size(), &consumed);
    if (!json::sax_parse(first, last, &builder)) {
      return tl::unexpected(builder.error().empty() ? std::string("invalid JSON")
                                                    : builder.error());
    }
    return root;
  } catch (const std::exception& e) {
    // Only allocation failure is expected here; the parser reports everything else above.
    return tl::unexpected(std::string("cannot parse JSON: ") + e.what());
  }
}

tl::expected<std::string, std::string> read_bounded_file(const std::filesystem::path& path,
                                                         std::size_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) return tl::unexpected(std::string("no such file"));
  if (std::filesystem::is_directory(status)) return tl::unexpected(std::string("is a directory"));
  if (!std::filesystem::is_regular_file(status)) {
    return tl::unexpected(std::string("not a regular file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return tl::unexpected("cannot read: " + ec.message());
  if (size > max_bytes) {
    return tl::unexpected("file too large: " + std::to_string(size) + " bytes (at most " +
                          std::to_string(max_bytes) + ")");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return tl::unexpected(std::string("permission denied or unreadable"));
  // Read at most one byte past the limit: the file may have grown since it was measured.
  std::string text(static_cast<std::size_t>(size) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return tl::unexpected(std::string("read error"));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return tl::unexpected("file too large (at most " + std::to_string(max_bytes) + " bytes)");
  }
  return text;
}

tl::expected<json, std::string> parse_json_file(const std::filesystem::path& path,
                                                const JsonLimits& limits) {
  auto text = read_bounded_file(path, limits.max_bytes);
  if (!text) return tl::unexpected(quoted(path) + ": " + text.error());
  auto parsed = parse_json(*text, limits);
  if (!parsed) return tl::unexpected(quoted(path) + ": " + parsed.error());
  return parsed;
}

std::string dump_json_lossy(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool all_numbers_finite(const json& value) {
  std::vector<const json*> pending{&value};
  while (!pending.empty()) {
    const json* next = pending.back();
    pending.pop_back();
    if (next->is_number_float() && !std::isfinite(next->get<double>())) return false;
    if (next->is_structured()) {
      for (const auto& child : *next) pending.push_back(&child);
    }
  }
  return true;
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  const auto byte = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;   // overlong
      if (c == 0xED) high = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;   // overlong
      if (c == 0xF4) high = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    if (byte(i + 1) < low || byte(i + 1) > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

}  // namespace pf::util
