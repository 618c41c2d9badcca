// What every rental runs unless proverfleet.toml's [deploy] says otherwise (docs/deploy.md).
#pragma once

namespace pf::manager {

// The agent image as scripts/build-agent-image tags it by default (deploy/agent-image). A rental
// pulls it from a registry: push it there and set deploy.image to the pushed name.
inline constexpr const char* kDefaultImage = "proverfleet-agent:0.1.0";

// vast's ssh and direct run types replace the image's ENTRYPOINT with vast's own init and run
// the onstart after it. In the agent image this starts the entrypoint's supervisor detached
// (the onstart returns at once, the agent keeps running and restarts after a crash, its log in
// /var/log/proverfleet/agent.log); where the image's entrypoint is absent (market-sim's spawned
// agents run on this machine) it runs the agent itself in the foreground, as before. The
// rental's env carries PROVERFLEET_MANAGER, _DEPLOYMENT and _SECRET to either.
inline constexpr const char* kDefaultOnstart =
    "if command -v proverfleet-entrypoint >/dev/null 2>&1; then "
    "exec proverfleet-entrypoint --detach; fi; exec proverfleet agent";

}  // namespace pf::manager
