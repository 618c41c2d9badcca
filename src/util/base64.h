// Base64 (RFC 4648, standard alphabet, '=' padding) for binary fields in JSON bodies: the proof
// an agent uploads ("proof_b64"). Decoding is strict: a character outside the alphabet, a bad
// length or misplaced padding is an error, never a silently shortened result.
#pragma once

#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::util {

std::string base64_encode(std::string_view bytes);
// The error says what is wrong and where (for a 400 naming the field).
tl::expected<std::string, std::string> base64_decode(std::string_view text);
// Bytes a decoded text of this length holds at most (for checking a limit before decoding).
constexpr std::size_t base64_decoded_max(std::size_t text_length) {
  return text_length / 4 * 3;
}
// Characters the encoding of `bytes` bytes takes.
constexpr std::size_t base64_encoded_size(std::size_t bytes) {
  return (bytes + 2) / 3 * 4;
}

}  // namespace pf::util
