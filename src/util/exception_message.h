// What an exception caught as std::exception_ptr says, for an error reply or a log line. Shared
// by the servers' exception handlers (the manager's front and market-sim's httplib server).
#pragma once

#include <exception>
#include <string>

namespace pf::util {

inline std::string exception_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  return "unknown error";
}

}  // namespace pf::util
