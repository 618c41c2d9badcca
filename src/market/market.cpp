#include "market/market.h"

namespace pf::market {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::OfferGone:
      return "offer_gone";
    case ErrorKind::NotFound:
      return "not_found";
    case ErrorKind::RateLimited:
      return "rate_limited";
    case ErrorKind::Transport:
      return "transport";
    case ErrorKind::BadResponse:
      return "bad_response";
    case ErrorKind::Unauthorized:
      return "unauthorized";
    case ErrorKind::InvalidArgument:
      return "invalid_argument";
    case ErrorKind::CreateUnknown:
      return "create_unknown";
    case ErrorKind::MarketError:
      return "market_error";
    case ErrorKind::NotLeader:
      return "not_leader";
  }
  return "market_error";
}

}  // namespace pf::market
