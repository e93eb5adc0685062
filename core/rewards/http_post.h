// One HTTP/1.1 POST of a JSON body, bounded by the endpoint's timeout
// (Boost.Beast over Asio: no dependency beyond Boost).
#pragma once

#include "core/rewards/http_endpoint.h"

#include <stdexcept>
#include <string>

namespace ptrain::rewards {

struct HttpReply {
  int status = 0;  // e.g. 200, 503
  std::string body;
};

// No reply: the host did not resolve, the connection failed or broke, the
// reply was not HTTP, or it took longer than timeout_s.
class HttpFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Connect, send, read the whole reply, all within endpoint.timeout_s.
// Throws HttpFailure.
HttpReply post_json(const HttpEndpoint& endpoint, const std::string& json_body);

}  // namespace ptrain::rewards
