#include "core/rewards/http_post.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <chrono>

namespace ptrain::rewards {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using Response = http::response<http::string_body>;

}  // namespace

HttpReply post_json(const HttpEndpoint& endpoint, const std::string& json_body) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code error;
  asio::ip::tcp::resolver resolver(io);
  const auto addresses = resolver.resolve(endpoint.host, std::to_string(endpoint.port), error);
  if (error) throw HttpFailure("cannot resolve " + endpoint.host + ": " + error.message());

  http::request<http::string_body> request{http::verb::post, endpoint.target, 11};
  request.set(http::field::host, endpoint.host + ":" + std::to_string(endpoint.port));
  request.set(http::field::content_type, "application/json");
  request.set(http::field::accept, "application/json");
  request.body() = json_body;
  request.prepare_payload();

  // One deadline for the whole exchange: tcp_stream applies it to every
  // asynchronous operation until it is changed (synchronous ones ignore it).
  stream.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(endpoint.timeout_s)));
  beast::flat_buffer buffer;
  Response response;
  const char* stage = "connect";
  stream.async_connect(addresses, [&](beast::error_code connected, const asio::ip::tcp::endpoint&) {
    if ((error = connected)) return;
    stage = "send";
    http::async_write(stream, request, [&](beast::error_code sent, std::size_t) {
      if ((error = sent)) return;
      stage = "read the reply";
      http::async_read(stream, buffer, response, [&](beast::error_code read, std::size_t) { error = read; });
    });
  });
  io.run();
  if (error == beast::error::timeout) {
    throw HttpFailure("no reply within timeout_s = " + std::to_string(endpoint.timeout_s) + " s (at: " + stage + ")");
  }
  if (error) throw HttpFailure(std::string("cannot ") + stage + ": " + error.message());
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  return {static_cast<int>(response.result_int()), response.body()};
}

}  // namespace ptrain::rewards
