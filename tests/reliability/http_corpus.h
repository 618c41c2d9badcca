// The bad-input HTTP corpus against a live `proverfleet serve` (market-sim behind it).
#pragma once

#include <string>

#include "reliability/figures.h"

namespace pf::reliability {

struct HttpCorpusOptions {
  std::string binary;      // the proverfleet executable
  std::string source_dir;  // the repository (scenarios/)
  int workers = 4;         // concurrent complete requests
  int slow_clients = 12;   // connections that dribble their headers meanwhile
  int slow_seconds = 25;   // how long each dribbles
  bool keep_dir = false;   // keep the run directory (logs, database) for a look
};

// Runs the corpus; the figures it counted (requests tried, 5xx, crashes, hangs, auth
// bypasses, secrets found).
Figures run_http_corpus(const HttpCorpusOptions& options);

}  // namespace pf::reliability
