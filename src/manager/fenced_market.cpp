#include "manager/fenced_market.h"

namespace pf::manager {

std::optional<market::MarketError> FencedMarket::refuse(const std::string& what) {
  std::optional<std::string> why;
  try {
    why = leadership_.fence_refusal();
  } catch (const std::exception& e) {
    why = std::string("the lease could not be read: ") + e.what();
  }
  if (!why) return std::nullopt;
  ++refused_;
  if (log_) log_("fence: " + what + " refused, nothing sent: " + *why);
  market::MarketError error;
  error.kind = market::ErrorKind::NotLeader;
  error.code = "not_leader";
  error.message = what + " refused: " + *why;
  return error;
}

market::Result<market::CreateResult> FencedMarket::create_instance(
    const market::CreateRequest& request) {
  if (auto error = refuse("create of offer " + std::to_string(request.offer_id))) {
    return tl::unexpected(*error);
  }
  return inner_.create_instance(request);
}

market::Result<void> FencedMarket::destroy_instance(std::int64_t id) {
  if (auto error = refuse("destroy of market instance " + std::to_string(id))) {
    return tl::unexpected(*error);
  }
  return inner_.destroy_instance(id);
}

market::Result<void> FencedMarket::set_label(std::int64_t id, const std::string& label) {
  if (auto error = refuse("relabel of market instance " + std::to_string(id))) {
    return tl::unexpected(*error);
  }
  return inner_.set_label(id, label);
}

market::Result<void> FencedMarket::change_bid(std::int64_t id, double price) {
  if (auto error = refuse("bid change of market instance " + std::to_string(id))) {
    return tl::unexpected(*error);
  }
  return inner_.change_bid(id, price);
}

}  // namespace pf::manager
