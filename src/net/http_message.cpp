#include "net/http_message.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include "net/deferred_reply.h"

namespace pf::net {

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) <
           std::tolower(static_cast<unsigned char>(y));
  });
}

namespace {

std::string first_value(const Headers& headers, std::string_view name) {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

}  // namespace

bool HttpRequest::has_header(std::string_view name) const {
  return headers.find(name) != headers.end();
}
std::string HttpRequest::get_header_value(std::string_view name) const {
  return first_value(headers, name);
}
bool HttpRequest::has_param(std::string_view key) const {
  return params.find(std::string(key)) != params.end();
}
std::string HttpRequest::get_param_value(std::string_view key) const {
  auto it = params.find(std::string(key));
  return it == params.end() ? std::string() : it->second;
}

bool HttpResponse::has_header(std::string_view name) const {
  return headers.find(name) != headers.end();
}
std::string HttpResponse::get_header_value(std::string_view name) const {
  return first_value(headers, name);
}
void HttpResponse::set_header(std::string_view name, std::string_view value) {
  headers.erase(std::string(name));
  headers.emplace(std::string(name), std::string(value));
}
void HttpResponse::set_content(std::string content, std::string_view content_type) {
  body = std::move(content);
  set_header("Content-Type", content_type);
}
void HttpResponse::set_content(const char* data, std::size_t size, std::string_view content_type) {
  set_content(std::string(data, size), content_type);
}
void HttpResponse::set_chunked_content_provider(std::string_view content_type,
                                                ContentProvider provider) {
  body.clear();
  set_header("Content-Type", content_type);
  content_provider = std::move(provider);
}

struct Resume::Token {
  std::shared_ptr<DeferredReply> reply;
  explicit Token(std::shared_ptr<DeferredReply> r) : reply(std::move(r)) {}
  Token(const Token&) = delete;
  Token& operator=(const Token&) = delete;
  // Nobody will finish the reply: answer 503 so the client retries (a no-op once resumed).
  ~Token() {
    reply->resume([](HttpResponse& res) {
      res = HttpResponse{};
      res.status = 503;
      res.set_header("Retry-After", "1");
    });
  }
};

void Resume::operator()(Finish finish) const {
  token_->reply->resume(std::move(finish));
}

Resume HttpResponse::defer() {
  deferred = std::make_shared<DeferredReply>();
  return Resume(std::make_shared<Resume::Token>(deferred));
}

}  // namespace pf::net
