// Fuzz target: the vast query language (market::parse_query, parse_order and the number and
// driver-version helpers), as typed into `offers`, the autopilot's query and GET /offers?q=.
#include "fuzz/fuzz_input.h"
#include "market/query.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = pf::fuzz::as_text(data, size);
  if (auto parsed = pf::market::parse_query(text, true)) (void)parsed->filters.dump();
  if (auto parsed = pf::market::parse_query(text, false)) (void)parsed->filters.dump();
  (void)pf::market::parse_order(text);
  (void)pf::market::parse_query_number(text);
  (void)pf::market::numeric_driver_version(text);
  return 0;
}
