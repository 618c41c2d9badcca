#include "agent/prover_factory.h"

#include "agent/json_setting.h"
#include "agent/prover_command.h"
#include "agent/prover_cuzk.h"
#include "agent/prover_sim.h"
#include "util/bounded_json.h"

namespace pf::agent {

std::string prover_kind(const AgentOptions& options, const nlohmann::json& prover_settings) {
  return !options.prover.empty() ? options.prover
                                 : setting<std::string>(prover_settings, "kind").value_or("cuzk");
}

tl::expected<std::unique_ptr<Prover>, std::string> make_prover(const std::string& kind,
                                                               const ProverInputs& in) {
  const AgentOptions& o = in.options;
  const nlohmann::json& settings = in.prover_settings;
  if (o.make_prover) {
    auto p = o.make_prover(kind);
    if (!p) return tl::unexpected("no prover of kind '" + kind + "'");
    return p;
  }
  if (kind == "sim") {
    if (o.sim_truth.empty()) {
      return tl::unexpected(std::string(
          "the sim prover needs the scenario truth: --sim-truth JSON or PROVERFLEET_SIM_TRUTH"));
    }
    const auto t = util::parse_json(o.sim_truth);
    if (!t) return tl::unexpected("--sim-truth is not valid JSON: " + t.error());
    auto truth = parse_sim_truth(*t);
    if (!truth) return tl::unexpected(truth.error());
    return std::make_unique<SimProver>(*truth, in.clock);
  }
  if (kind == "command") {
    CommandProverOptions co;
    co.command = !o.prover_command.empty() ? o.prover_command
                                           : setting<std::string>(settings, "command").value_or("");
    if (co.command.empty()) {
      return tl::unexpected(
          std::string("the command prover needs --prover-command (or prover.command)"));
    }
    co.probe_root = o.probe_root;
    co.env["PF_PARAM_DIR"] = o.param_dir;
    if (!in.benchmark_input_path.empty()) co.env["PF_BENCHMARK_INPUT"] = in.benchmark_input_path;
    if (auto t = setting<double>(settings, "prove_timeout_s")) co.proof_timeout_s = *t;
    return std::make_unique<CommandProver>(co, in.clock);
  }
  if (kind == "cuzk") {
    CuzkOptions co;
    co.daemon = o.cuzk_external ? std::string()
                : !o.cuzk_daemon.empty()
                    ? o.cuzk_daemon
                    : setting<std::string>(settings, "cuzk_daemon").value_or(kCuzkProgram);
    co.listen = !o.cuzk_listen.empty()
                    ? o.cuzk_listen
                    : setting<std::string>(settings, "listen").value_or("127.0.0.1:9820");
    co.status_listen =
        !o.cuzk_status_listen.empty()
            ? o.cuzk_status_listen
            : setting<std::string>(settings, "status_listen").value_or("127.0.0.1:9821");
    co.param_dir = o.param_dir;
    co.config_path = o.state_dir + "/cuzk.toml";
    co.c1_path = !o.c1_path.empty() ? o.c1_path : in.benchmark_input_path;
    if (auto v = setting<std::uint64_t>(settings, "registered_proof")) co.registered_proof = *v;
    if (auto v = setting<std::uint64_t>(settings, "sector_number")) co.sector_number = *v;
    if (auto v = setting<std::uint64_t>(settings, "miner_id")) co.miner_id = *v;
    if (auto v = setting<double>(settings, "prove_timeout_s")) co.prove_timeout_s = *v;
    if (auto v = setting<std::string>(settings, "log_level")) co.log_level = *v;
    co.probe_root = o.probe_root;
    co.log = in.prover_log;
    return std::make_unique<CuzkProver>(co);
  }
  return tl::unexpected("unknown prover '" + kind + "': expected cuzk, sim or command");
}

}  // namespace pf::agent
