// What vast.ai bills a rental for, and when (docs/vast-billing.md cites the sources):
//  - compute, at the offer's dph_base, while the instance is active (running; frozen keeps its
//    GPU): not while it is created, loading, stopped or offline;
//  - storage, for the disk allocated at create, every second the instance exists except while
//    its host is offline — created, loading and stopped included;
//  - bandwidth, every byte down and up, at inet_down_cost / inet_up_cost ($/GB).
// dph_total, as search lists it, is dph_base plus the storage of the `allocated_storage`
// searched: the manager searches with the disk it rents, so the two agree.
// Pure functions over an InstanceRecord; the manager and the simulator both call them.
#pragma once

#include <string>

#include "core/fleet.h"
#include "core/offer.h"

namespace pf::core {

// The disk a rental rents unless [deploy] disk_gb says otherwise, GB.
inline constexpr double kDefaultDiskGb = 200;

// vast's month for storage prices: 30 days (storage_cost is $/GB/month).
inline constexpr double kStorageHoursPerMonth = 30 * 24;

// Storage of `disk_gb` on this offer, $/hour.
double storage_usd_per_hour(const Offer& offer, double disk_gb);
// Compute, $/hour: dph_base when the market gave it, else dph_total less the storage of
// `disk_gb` (never below 0).
double compute_usd_per_hour(const Offer& offer, double disk_gb);

// What the rental pays for compute while it runs, $/hour: its bid when it is interruptible
// (vast bills an interruptible rental at its bid), else the offer's compute price.
double rental_compute_usd_per_hour(const InstanceRecord& rec);
// The rental's price, $/hour, while it runs: compute (as above) and storage. For an on-demand
// rental, the dph_total it was rented at (search prices the disk rented: allocated_storage).
double rental_usd_per_hour(const InstanceRecord& rec);

// The rental's hourly cost as the fleet stands: while the market holds it stopped (outbid,
// contract ended, credit) its disk only; otherwise its price while it runs
// (rental_usd_per_hour: a bid at its bid), booting ones included, since that is what they are
// rented to cost; 0 once destroyed. The fleet's $/hour, its budget alert and its profit
// estimate add these up.
double fleet_usd_per_hour(const InstanceRecord& rec);

// Market statuses (actual_status) during which vast bills compute / storage.
bool compute_billed(const std::string& actual_status);
bool storage_billed(const std::string& actual_status);

// What one accrual added, by kind (USD).
struct Charges {
  double compute_usd = 0;
  double storage_usd = 0;
  double bandwidth_usd = 0;
  double total() const { return compute_usd + storage_usd + bandwidth_usd; }
};

// Accrues compute and storage from rec.billed_until to `now` at the rates of the market status
// the record holds (the status seen at the last poll holds until the next one), for
// rec.disk_gb. Advances billed_until, spend_usd and storage_spend_usd; a destroyed instance
// accrues nothing more. Time never runs backwards: a `now` at or before billed_until adds 0.
Charges accrue_rental_spend(InstanceRecord& rec, double now);

// Parameter bandwidth, billed at inet_down_cost for the bytes newly downloaded: `done` is the
// agent's running total (a stale, smaller report adds nothing). Advances params_done_bytes,
// spend_usd and bandwidth_spend_usd; returns the increment (USD).
double accrue_bandwidth_spend(InstanceRecord& rec, double params_done_bytes);

// Job and log bandwidth: bytes sent to the instance at inet_down_cost and from it at
// inet_up_cost ($/GB). Advances spend_usd and bandwidth_spend_usd; returns the increment (USD).
double accrue_transfer_spend(InstanceRecord& rec, double bytes_down, double bytes_up);

}  // namespace pf::core
