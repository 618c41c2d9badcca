// Bytes as lowercase hex: digests (SHA-256, BLAKE2b, HMAC) and random tokens are shown, stored
// and compared in this one spelling.
#pragma once

#include <cstddef>
#include <string>

namespace pf::util {

std::string lower_hex(const unsigned char* data, std::size_t size);

}  // namespace pf::util
