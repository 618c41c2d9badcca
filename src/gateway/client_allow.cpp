#include "gateway/client_allow.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace pf::gateway {
namespace {

constexpr std::size_t kMaxAddressText = 64;  // longer than any IPv6 text form with a prefix

// ::ffff:a.b.c.d is an IPv4 client on a dual-stack socket.
IpAddress unmap(IpAddress address) {
  if (!address.v6) return address;
  static constexpr std::array<std::uint8_t, 12> kMapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!std::equal(kMapped.begin(), kMapped.end(), address.bytes.begin())) return address;
  IpAddress v4;
  std::copy(address.bytes.begin() + 12, address.bytes.end(), v4.bytes.begin());
  return v4;
}

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.empty() || text.size() > kMaxAddressText) return std::nullopt;
  const std::string z(text);
  IpAddress address;
  if (z.find(':') == std::string::npos) {
    if (inet_pton(AF_INET, z.c_str(), address.bytes.data()) != 1) return std::nullopt;
    return address;
  }
  address.v6 = true;
  if (inet_pton(AF_INET6, z.c_str(), address.bytes.data()) != 1) return std::nullopt;
  return unmap(address);
}

bool prefix_matches(const IpAddress& a, const IpAddress& b, int prefix) {
  const int full = prefix / 8;
  for (int i = 0; i < full; ++i) {
    if (a.bytes[static_cast<std::size_t>(i)] != b.bytes[static_cast<std::size_t>(i)]) return false;
  }
  const int rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  const auto i = static_cast<std::size_t>(full);
  return (a.bytes[i] & mask) == (b.bytes[i] & mask);
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr ==
            text.data() + i + 3) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

tl::expected<AddressBlock, std::string> parse_address_block(std::string_view text) {
  const std::string shown(text.substr(0, kMaxAddressText));
  const auto slash = text.find('/');
  const auto ip = parse_ip(text.substr(0, slash));
  if (!ip) {
    return tl::unexpected("'" + shown + "' is not an IPv4 or IPv6 address (or CIDR block)");
  }
  const int width = ip->v6 ? 128 : 32;
  AddressBlock block{*ip, width};
  if (slash != std::string_view::npos) {
    const std::string_view bits = text.substr(slash + 1);
    int prefix = -1;
    const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
    if (ec != std::errc{} || end != bits.data() + bits.size() || bits.empty() || prefix < 0) {
      return tl::unexpected("'" + shown + "': the prefix length after '/' must be a number");
    }
    // A mapped IPv6 block (::ffff:10.0.0.0/104) was unmapped to IPv4: its prefix shrinks with it.
    const bool was_mapped = !ip->v6 && text.substr(0, slash).find(':') != std::string_view::npos;
    if (was_mapped) prefix -= 96;
    if (prefix < 0 || prefix > width) {
      return tl::unexpected("'" + shown + "': prefix length must be 0.." + std::to_string(width));
    }
    block.prefix = prefix;
  }
  // Host bits cleared, so two spellings of one block compare equal.
  for (int bit = block.prefix; bit < width; ++bit) {
    block.base.bytes[static_cast<std::size_t>(bit / 8)] &=
        static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
  }
  return block;
}

tl::expected<std::vector<AddressBlock>, std::string> parse_allow_list(
    const std::vector<std::string>& entries) {
  std::vector<AddressBlock> blocks;
  for (const auto& entry : entries) {
    auto block = parse_address_block(entry);
    if (!block) return tl::unexpected(block.error());
    blocks.push_back(*block);
  }
  return blocks;
}

std::optional<IpAddress> peer_ip(std::string_view peer) {
  if (peer.size() > 256) return std::nullopt;
  const std::string decoded = percent_decoded(peer);
  std::string_view rest = decoded;
  bool v6 = false;
  if (rest.rfind("ipv4:", 0) == 0) {
    rest.remove_prefix(5);
  } else if (rest.rfind("ipv6:", 0) == 0) {
    rest.remove_prefix(5);
    v6 = true;
  } else {
    return std::nullopt;
  }
  std::string_view host;
  if (v6) {
    if (rest.empty() || rest.front() != '[') return std::nullopt;
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = rest.substr(1, close - 1);
    // A zone ("fe80::1%eth0") names the interface, not the address.
    if (const auto zone = host.find('%'); zone != std::string_view::npos) {
      host = host.substr(0, zone);
    }
  } else {
    const auto colon = rest.rfind(':');
    host = rest.substr(0, colon);
  }
  return parse_ip(host);
}

bool allowed(const std::vector<AddressBlock>& allow, const std::optional<IpAddress>& client) {
  if (allow.empty()) return true;
  if (!client) return false;
  return std::any_of(allow.begin(), allow.end(), [&client](const AddressBlock& block) {
    return block.base.v6 == client->v6 && prefix_matches(block.base, *client, block.prefix);
  });
}

std::string to_string(const IpAddress& address) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(address.v6 ? AF_INET6 : AF_INET, address.bytes.data(), text, sizeof text);
  return text;
}

}  // namespace pf::gateway
