#include "manager/benchmark_input.h"

#include <algorithm>

namespace pf::manager {

nlohmann::json to_json(const BenchmarkInput& input) {
  return {{"name", input.name},
          {"bytes", input.bytes->size()},
          {"digest", input.digest},
          {"path", kBenchmarkInputRoute},
          {"chunk_bytes", input.reply_bytes}};
}

BenchmarkInputReply benchmark_input_reply(
    const BenchmarkInput& input,
    std::optional<std::pair<std::int64_t, std::optional<std::int64_t>>> range) {
  BenchmarkInputReply reply;
  const auto total = static_cast<std::int64_t>(input.bytes->size());
  const auto cap = static_cast<std::int64_t>(std::max<std::size_t>(1, input.reply_bytes));
  reply.headers.emplace_back("ETag", "\"" + input.digest + "\"");
  reply.headers.emplace_back("Accept-Ranges", "bytes");
  const std::int64_t first = range ? range->first : 0;
  if (range && first >= total) {
    reply.status = 416;
    reply.headers.emplace_back("Content-Range", "bytes */" + std::to_string(total));
    return reply;
  }
  std::int64_t last = std::min(total - 1, first + cap - 1);
  if (range && range->second) last = std::min(last, *range->second);
  if (!range && total <= cap) {
    reply.body = *input.bytes;
    return reply;
  }
  reply.status = 206;
  reply.headers.emplace_back(
      "Content-Range",
      "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(total));
  reply.body = input.bytes->substr(static_cast<std::size_t>(first),
                                   static_cast<std::size_t>(last - first + 1));
  return reply;
}

}  // namespace pf::manager
