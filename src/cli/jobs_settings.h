// [jobs] (cli/config.h JobsSettings) as the job queue's config: units converted, and the data
// directory defaulted to the database file's own directory (already private: the store refuses
// a directory every user may write).
#pragma once

#include <string>

#include "cli/config.h"
#include "jobs/job_queue.h"

namespace pf::cli {

// `db`: the store URL `serve --db` took (a path, or sqlite:PATH).
jobs::JobQueueConfig job_queue_config(const JobsSettings& settings, const std::string& db);

}  // namespace pf::cli
