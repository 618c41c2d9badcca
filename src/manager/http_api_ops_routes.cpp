// The operator's hands-on routes (issue 13): the fleet watch's alerts and remote tuning of an
// instance's prover. The instance detail's live report, SSH command and alerts are added to
// GET /api/v1/instances/{id} (views.h add_hands_on).
#include "manager/http_api_impl.h"
#include "manager/views.h"

namespace pf::manager {

using namespace api_detail;  // this file is part of the API's implementation

void HttpApi::Impl::add_ops_routes() {
  add("GET", "/api/v1/alerts", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {});
    return json_reply(200, to_json(manager.alerts()));
  });
  // {"concurrency": N?, "partitions": M?}: queued for the agent's next heartbeat reply.
  add("POST", "/api/v1/instances/{id}/tune", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        const json body = parse_object_body(req);
        reject_unknown_params(req, {});
        const std::int64_t id = path_id(req, "instance id");
        Fields f(body, "");
        f.reject_unknown({"concurrency", "partitions"});
        TuneRequest tune;
        tune.who = "operator via API";
        if (auto c = f.optional_integer("concurrency", 1, kMaxTuneConcurrency)) {
          tune.concurrency = static_cast<int>(*c);
        }
        if (auto p = f.optional_integer("partitions", 1, kMaxTunePartitions)) {
          tune.partitions = static_cast<int>(*p);
        }
        const auto commands = unwrap(manager.tune(id, tune));
        return json_reply(200, {{"instance_id", id}, {"commands", commands}});
      });
}

}  // namespace pf::manager
