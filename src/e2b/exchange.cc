#include "e2b/exchange.h"

namespace skiff::e2b {

Reply Reply::Json(int status, const nlohmann::json& body) {
  Reply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Reply Reply::Empty(int status) {
  Reply r;
  r.status = status;
  r.content_type.clear();
  return r;
}

Reply Reply::Error(int status, std::string_view message) {
  return Json(status, {{"code", status}, {"message", std::string(message)}});
}

}  // namespace skiff::e2b
