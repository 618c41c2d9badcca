// The agent API (design §7) and the agent's side of the job protocol (issue 12).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/host_stats.h"
#include "jobs/job_queue.h"
#include "manager/autopilot.h"
#include "manager/benchmark_input.h"
#include "manager/dashboard.h"
#include "manager/http_api_impl.h"
#include "manager/views.h"
#include "market/query.h"
#include "util/base64.h"
#include "util/bounded_json.h"
#include "util/exception_message.h"

namespace pf::manager {

using namespace api_detail;  // this file is part of the API's implementation

// Agents (design §7): registration, heartbeats, events and logs; the job routes sit among them.
void HttpApi::Impl::add_agent_routes() {
  add("POST", "/api/v1/agent/register", Access::Public,
      [this](const net::HttpRequest& req, std::int64_t) {
        const json body = parse_object_body(req);
        Fields f(body, "");
        RegisterRequest r;
        r.deployment = f.string("deployment", 128, false);
        r.secret = f.string("secret", 512, false);
        if (auto hw = f.optional_object("hardware")) r.hardware = body.at("hardware");
        r.agent_version = f.optional_string("agent_version", 64).value_or("");
        r.token = f.optional_string("token", 128).value_or("");
        return json_reply(200, unwrap(manager.agent_register(r)).body);
      });
  add("POST", "/api/v1/agent/heartbeat", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        const json body = parse_object_body(req);
        const Heartbeat hb = parse_heartbeat(body, options.max_gpus_per_heartbeat);
        const auto held = parse_held_jobs(body, options.max_jobs_per_heartbeat);
        Committing<HeartbeatReply> sent = manager.agent_heartbeat_sent(instance, hb);
        const HeartbeatReply reply = unwrap(std::move(sent.reply));
        // Leases ride on heartbeats: naming a job renews it; the queue says what to drop.
        json drop = json::array();
        jobs::JobQueue* queue = job_queue_or_null();
        if (queue) {
          for (const std::int64_t id : queue->renew(instance, held)) drop.push_back(id);
        }
        Reply answer = json_reply(200, {{"commands", reply.commands},
                                        {"work", reply.work && queue != nullptr},
                                        {"drop_jobs", std::move(drop)}});
        answer.committed = std::move(sent.committed);
        return answer;
      });
  add_job_routes();
  add("POST", "/api/v1/agent/events", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        const auto events = parse_events(parse_object_body(req), options.max_events_per_batch);
        Committing<EventsReply> sent = manager.agent_events_sent(instance, events);
        const EventsReply r = unwrap(std::move(sent.reply));
        Reply answer = json_reply(200, {{"accepted", r.accepted}, {"duplicates", r.duplicates}});
        answer.committed = std::move(sent.committed);
        return answer;
      });
  add("POST", "/api/v1/agent/logs", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        // vast bills the upload whatever becomes of it (core/billing.h).
        manager.agent_transferred(instance, 0, static_cast<double>(req.body.size()));
        std::string text;
        if (req.get_header_value("Content-Type").rfind(kJson, 0) == 0) {
          const json body = parse_object_body(req);
          text = Fields(body, "").string("text", options.max_body_bytes, true);
        } else {
          text = req.body;
        }
        if (text.size() > options.max_log_push_bytes) {
          fail(413, "log push too large: " + std::to_string(text.size()) + " bytes (at most " +
                        std::to_string(options.max_log_push_bytes) + " per request)");
        }
        if (!text.empty()) {
          auto r = manager.agent_logs(instance, text);
          if (!r) fail(r.error().status, r.error().message);
        }
        return json_reply(200, {{"accepted_bytes", text.size()}});
      });
  // The benchmark C1 file (manager/benchmark_input.h), by ranges, to agents only.
  add("GET", kBenchmarkInputRoute, Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        reject_unknown_params(req, {});
        const auto& input = manager.config().benchmark_input;
        if (!input) fail(404, "this manager serves no benchmark input (deploy.benchmark_input)");
        std::optional<std::pair<std::int64_t, std::optional<std::int64_t>>> range;
        if (const auto r = parse_range(req)) range = std::pair{r->first, r->last};
        BenchmarkInputReply out = benchmark_input_reply(*input, range);
        if (out.status != 416) {
          manager.agent_transferred(instance, static_cast<double>(out.body.size()), 0);
        }
        Reply reply{out.status, std::move(out.body), "application/octet-stream",
                    std::move(out.headers)};
        if (out.status == 416) {
          reply.content_type = kJson;
          reply.body = util::dump_json_lossy(
              json{{"error", "range starts past the end of the " +
                                 std::to_string(input->bytes->size()) + "-byte benchmark input"}});
        }
        return reply;
      });
}

// The agent's side of the job protocol (issue 12 contract).
void HttpApi::Impl::add_job_routes() {
  add("POST", "/api/v1/agent/jobs/lease", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        const json body = parse_object_body(req);
        Fields f(body, "");
        const int max_jobs = static_cast<int>(f.integer("max_jobs", 1, options.max_jobs_per_lease));
        const std::int64_t wait_ms =
            f.optional_integer("wait_ms", 0, options.max_lease_wait_ms).value_or(0);
        auto& queue = job_queue();
        const auto leases = unwrap_job(
            queue.lease(instance, max_jobs, std::chrono::milliseconds(wait_ms), req.caller_gone));
        json out = json::array();
        for (const auto& lease : leases) out.push_back(to_json(lease));
        return json_reply(200, {{"jobs", std::move(out)}});
      });
  add("GET", "/api/v1/agent/jobs/{id}/input", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        reject_unknown_params(req, {"attempt"});
        const std::int64_t id = path_id(req, "job id");
        const auto attempt_text = param(req, "attempt");
        if (!attempt_text) fail(400, "missing query parameter 'attempt'");
        const auto attempt = parse_positive_id(*attempt_text);
        if (!attempt || *attempt > kMaxInt) {
          fail(400, "query parameter 'attempt' must be a positive integer, got " +
                        in_quotes(*attempt_text));
        }
        const auto range = parse_range(req);
        const std::int64_t offset = range ? range->first : 0;
        auto max_bytes = static_cast<std::int64_t>(options.max_input_chunk_bytes);
        if (range && range->last) max_bytes = std::min(max_bytes, *range->last - offset + 1);
        auto& queue = job_queue();
        jobs::InputChunk chunk = unwrap_job(
            queue.read_input(instance, id, static_cast<int>(*attempt), offset, max_bytes));
        Reply reply;
        reply.content_type = "application/octet-stream";
        reply.headers.emplace_back("ETag", "\"" + chunk.digest + "\"");
        reply.headers.emplace_back("Accept-Ranges", "bytes");
        if (chunk.total > 0 && offset >= chunk.total) {
          reply.status = 416;
          reply.headers.emplace_back("Content-Range", "bytes */" + std::to_string(chunk.total));
          reply.content_type = kJson;
          reply.body = util::dump_json_lossy(
              json{{"error", "range starts at byte " + std::to_string(offset) + " of a " +
                                 std::to_string(chunk.total) + "-byte input"}});
          return reply;
        }
        const auto size = static_cast<std::int64_t>(chunk.bytes.size());
        manager.agent_transferred(instance, static_cast<double>(size), 0);
        // Without a Range the whole input comes back when it fits one reply (200); a longer
        // one comes a bounded chunk at a time (206), as do ranges.
        if (range || size < chunk.total) {
          reply.status = 206;
          const std::int64_t last = size > 0 ? chunk.offset + size - 1 : chunk.offset;
          reply.headers.emplace_back("Content-Range", "bytes " + std::to_string(chunk.offset) +
                                                          "-" + std::to_string(last) + "/" +
                                                          std::to_string(chunk.total));
        }
        reply.body = std::move(chunk.bytes);  // up to 4 MiB: not copied
        return reply;
      });
  add("POST", "/api/v1/agent/jobs/{id}/started", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        const std::int64_t id = path_id(req, "job id");
        const json body = parse_object_body(req);
        const int attempt = static_cast<int>(Fields(body, "").integer("attempt", 1, kMaxInt));
        auto& queue = job_queue();
        return json_reply(200, to_json(unwrap_job(queue.started(instance, id, attempt))));
      });
  add("POST", "/api/v1/agent/jobs/{id}/result", Access::Agent,
      [this](const net::HttpRequest& req, std::int64_t instance) {
        manager.agent_transferred(instance, 0, static_cast<double>(req.body.size()));
        const std::int64_t id = path_id(req, "job id");
        const json body = parse_object_body(req);
        Fields f(body, "");
        jobs::ProofReport report;
        report.job_id = id;
        report.attempt = static_cast<int>(f.integer("attempt", 1, kMaxInt));
        const json& ok = f.required("ok");
        if (!ok.is_boolean()) fail(400, "field 'ok' must be true or false, got " + describe(ok));
        report.ok = ok.get<bool>();
        if (report.ok) {
          const std::string encoded =
              f.string("proof_b64", util::base64_encoded_size(options.max_proof_bytes), false);
          auto proof = util::base64_decode(encoded);
          if (!proof) fail(400, "field 'proof_b64' is not base64: " + proof.error());
          if (proof->size() > options.max_proof_bytes) {
            fail(400, "field 'proof_b64' holds " + std::to_string(proof->size()) +
                          " bytes (at most " + std::to_string(options.max_proof_bytes) + ")");
          }
          report.proof = std::move(*proof);
          report.prove_ms = f.optional_number("prove_ms", 0, kHuge).value_or(0);
          report.gpu_ms = f.optional_number("gpu_ms", 0, kHuge).value_or(0);
          report.queue_ms = f.optional_number("queue_ms", 0, kHuge).value_or(0);
        } else {
          report.message = f.string("message", 4096, true);
          if (const json* oom = f.find("oom"); oom && !oom->is_null()) {
            if (!oom->is_boolean()) {
              fail(400, "field 'oom' must be true or false, got " + describe(*oom));
            }
            report.oom = oom->get<bool>();
          }
        }
        auto& queue = job_queue();
        return json_reply(200, to_json(unwrap_job(queue.report(instance, report))));
      });
}

}  // namespace pf::manager
