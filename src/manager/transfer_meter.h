// Bytes an instance moved through the manager (job inputs and the benchmark input down; proofs
// and agent logs up) that vast bills as bandwidth but no heartbeat has billed yet. The HTTP
// routes add to it without the Manager's lock (an input chunk must not wait behind a tick);
// the instance's next heartbeat takes it and bills it (core::accrue_transfer_spend) with the
// writes it makes anyway. Kept in memory: a crash forgets at most one heartbeat interval of
// bytes (under-billing, never a double charge).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace pf::manager {

struct Transfer {
  double bytes_down = 0;  // to the instance (its inet_down_cost)
  double bytes_up = 0;    // from the instance (its inet_up_cost)
};

class TransferMeter {
 public:
  void add(std::int64_t instance_id, double bytes_down, double bytes_up) {
    if (!(bytes_down > 0) && !(bytes_up > 0)) return;
    std::lock_guard lock(mu_);
    Transfer& t = unbilled_[instance_id];
    if (bytes_down > 0) t.bytes_down += bytes_down;
    if (bytes_up > 0) t.bytes_up += bytes_up;
  }
  // What the instance moved since the last take (zeros when nothing), forgotten here.
  Transfer take(std::int64_t instance_id) {
    std::lock_guard lock(mu_);
    const auto it = unbilled_.find(instance_id);
    if (it == unbilled_.end()) return {};
    const Transfer t = it->second;
    unbilled_.erase(it);
    return t;
  }
  // Gives back what a heartbeat took but could not write (its transaction failed).
  void give_back(std::int64_t instance_id, const Transfer& t) {
    add(instance_id, t.bytes_down, t.bytes_up);
  }

 private:
  std::mutex mu_;
  std::map<std::int64_t, Transfer> unbilled_;
};

}  // namespace pf::manager
