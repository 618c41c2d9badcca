// Bytes as lowercase hex: digests (SHA-256, BLAKE2b, HMAC) and random tokens are shown, stored
// and compared in this one spelling.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pf::util {

std::string lower_hex(const unsigned char* data, std::size_t size);
// True when `text` is exactly `digits` characters of that spelling (0-9, a-f).
bool is_lower_hex(std::string_view text, std::size_t digits);

}  // namespace pf::util
