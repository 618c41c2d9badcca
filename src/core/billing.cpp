#include "core/billing.h"

#include <algorithm>

namespace pf::core {

double storage_usd_per_hour(const Offer& offer, double disk_gb) {
  if (disk_gb > 0) return disk_gb * offer.storage_cost_gb_month / kStorageHoursPerMonth;
  // A row from before the disk was recorded: what search priced for the storage it was asked.
  return offer.storage_total_cost_per_hour;
}

double compute_usd_per_hour(const Offer& offer, double disk_gb) {
  if (offer.dph_base > 0) return offer.dph_base;
  return std::max(0.0, offer.dph_total - storage_usd_per_hour(offer, disk_gb));
}

bool compute_billed(const std::string& s) {
  return !(s.empty() || s == "loading" || s == "offline" || s == "created" || s == "stopped");
}

bool storage_billed(const std::string& s) {
  return s != "offline";
}

double rental_compute_usd_per_hour(const InstanceRecord& rec) {
  if (rec.bid_price && *rec.bid_price > 0) return *rec.bid_price;
  return compute_usd_per_hour(rec.offer, rec.disk_gb);
}

double rental_usd_per_hour(const InstanceRecord& rec) {
  if (!rec.bid_price || !(*rec.bid_price > 0)) return rec.offer.dph_total;
  return *rec.bid_price + storage_usd_per_hour(rec.offer, rec.disk_gb);
}

double fleet_usd_per_hour(const InstanceRecord& rec) {
  if (rec.state == InstanceState::Destroyed) return 0;
  if (rec.market_status == "stopped") return storage_usd_per_hour(rec.offer, rec.disk_gb);
  return rental_usd_per_hour(rec);
}

Charges accrue_rental_spend(InstanceRecord& rec, double now) {
  if (rec.billed_until <= 0) rec.billed_until = rec.created_at > 0 ? rec.created_at : now;
  Charges c;
  if (now <= rec.billed_until) return c;
  if (rec.state != InstanceState::Destroyed) {
    const double hours = (now - rec.billed_until) / 3600.0;
    if (compute_billed(rec.market_status)) {
      c.compute_usd = hours * rental_compute_usd_per_hour(rec);
    }
    if (storage_billed(rec.market_status)) {
      c.storage_usd = hours * storage_usd_per_hour(rec.offer, rec.disk_gb);
    }
  }
  rec.spend_usd += c.compute_usd + c.storage_usd;
  rec.storage_spend_usd += c.storage_usd;
  rec.billed_until = now;
  return c;
}

double accrue_bandwidth_spend(InstanceRecord& rec, double done) {
  const double delta = std::max(0.0, done - rec.params_done_bytes);
  const double inc = delta / 1e9 * rec.offer.inet_down_cost_per_gb;
  rec.params_done_bytes = std::max(rec.params_done_bytes, done);
  rec.spend_usd += inc;
  rec.bandwidth_spend_usd += inc;
  return inc;
}

double accrue_transfer_spend(InstanceRecord& rec, double bytes_down, double bytes_up) {
  const double inc = std::max(0.0, bytes_down) / 1e9 * rec.offer.inet_down_cost_per_gb +
                     std::max(0.0, bytes_up) / 1e9 * rec.offer.inet_up_cost_per_gb;
  rec.spend_usd += inc;
  rec.bandwidth_spend_usd += inc;
  return inc;
}

}  // namespace pf::core
