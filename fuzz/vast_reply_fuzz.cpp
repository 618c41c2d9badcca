// Fuzz target: what VastMarket makes of a vast.ai reply. The first byte picks the HTTP status,
// the rest is the body; every market call is made once against a loopback server that answers
// with it (no retries, no backoff), so the whole reply path runs: status handling, JSON
// parsing, failure detection, offer_from_vast_json, instance_from_vast_json, paging, the
// create's new_contract handling and its reconciliation by label.
#include <array>
#include <string>

#include "fuzz/canned_http_server.h"
#include "fuzz/fuzz_input.h"
#include "market/vast_market.h"

namespace {

struct Harness {
  pf::fuzz::CannedHttpServer server;
  pf::market::VastMarket market{config(server.port())};

  static pf::market::VastConfig config(int port) {
    pf::market::VastConfig c;
    c.base_url = "http://127.0.0.1:" + std::to_string(port);
    c.api_key = "fuzz-key";
    c.connect_timeout_s = 5;
    c.request_timeout_s = 10;
    c.max_attempts = 1;
    c.backoff_base_s = 0;
    c.backoff_cap_s = 0;
    c.create_reconcile_reads = 1;
    c.jitter_seed = 1;
    return c;
  }
};

constexpr std::array<int, 10> kStatuses = {200, 200, 200, 201, 400, 401, 404, 410, 429, 500};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Harness h;
  if (size == 0) return 0;
  h.server.set_reply(kStatuses[data[0] % kStatuses.size()],
                     std::string(pf::fuzz::as_text(data + 1, size - 1)));
  pf::market::SearchRequest search;
  search.limit = 10;
  (void)h.market.search_offers(search);
  (void)h.market.list_instances();
  (void)h.market.list_instances(std::string("proverfleet:fuzz"));
  (void)h.market.show_instance(7);
  pf::market::CreateRequest create;
  create.offer_id = 101;
  create.image = "proverfleet/agent:latest";
  create.label = "proverfleet:fuzz";
  (void)h.market.create_instance(create);
  (void)h.market.destroy_instance(7);
  (void)h.market.set_label(7, "proverfleet:fuzz");
  return 0;
}
