// The offers table as `proverfleet offers` prints it, from the rows of /api/v1/offers
// (manager::to_json(core::RankedOffer)), whether they were ranked here or by a running manager.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace pf::cli {

// "did this machine fail before?": "-" for a machine never rented, else e.g.
// "2 rentals, 3 runs, median 21.0/hr, last reject, 1 OOM; BLOCKED (auto): slow benchmark".
std::string history_cell(const nlohmann::json& row);

// The objective's break-even (what verdicts, deadlines and the autopilot use), with the other
// one beside it where they differ: "20.0 (target 30.0)" or "30.0 (revenue 20.0)".
std::string break_even_cell(const nlohmann::json& row);

// Prints the table of `rows` (a JSON array) and nothing else.
void print_offers_table(const nlohmann::json& rows, std::ostream& out);

}  // namespace pf::cli
