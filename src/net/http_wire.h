// HTTP/1.1 on the wire, as the server writes and decodes it: pure functions over bytes, no
// sockets (net/http_session.cpp calls them from its connections).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "net/http_message.h"

namespace pf::net {

// %XX decoded; an invalid or truncated escape is kept as written. With plus_is_space (query
// strings), '+' is a space.
std::string percent_decode(std::string_view text, bool plus_is_space);

// A query string ("a=1&b=%20x") as decoded pairs, in order; empty items and empty keys are
// skipped, a key without '=' has the value "".
Params parse_query(std::string_view query);

// A whole reply: status line, the handler's headers (without framing headers, which are the
// server's: Content-Length, Transfer-Encoding, Connection), then the body unless the status has
// none (1xx, 204, 304). CR and LF in header values are dropped so they cannot split the reply.
std::string serialize_reply(const HttpResponse& res, bool close_after);

// The head of a streamed (chunked) reply; the connection closes after it.
std::string serialize_stream_head(const HttpResponse& res);

// One chunk of a chunked body: hex length, CRLF, the bytes, CRLF.
std::string chunk(const char* data, std::size_t size);

}  // namespace pf::net
