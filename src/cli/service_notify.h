// Telling the service manager what serve is doing, as sd_notify(3) does, without libsystemd:
// one datagram of "KEY=VALUE" lines to the unix socket named by $NOTIFY_SOCKET (a path, or an
// abstract name written with a leading '@'). With Type=notify the unit is started once serve
// says READY=1; with NotifyAccess=all a successor started by `systemctl reload` says
// MAINPID=its pid once it leads, so systemd follows it rather than the process it replaced
// (systemd.service(5), Type=notify and NotifyAccess=; sd_notify(3), "MAINPID=").
#pragma once

#include <string>
#include <tl/expected.hpp>

namespace pf::cli {

// Sends `state` (lines such as "READY=1") to $NOTIFY_SOCKET. false when it is unset (serve was
// not started by a service manager that listens); an error naming what failed.
tl::expected<bool, std::string> notify_service_manager(const std::string& state);

}  // namespace pf::cli
