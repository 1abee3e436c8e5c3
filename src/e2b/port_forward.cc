#include "e2b/port_forward.h"

#include <optional>

#include "base/log.h"
#include "e2b/http_forward.h"

namespace skiff::e2b {

Reply ProxyError(const std::string& sandbox_id, int status, std::string_view message) {
  return Reply::Json(status, {{"sandboxId", sandbox_id}, {"message", message}, {"code", status}});
}

void PortForwarder::Forward(const std::string& sandbox_id, uint16_t port, const Request& req,
                            std::string_view body, ResponseWriter& out) {
  const std::string where = "port " + std::to_string(port) + " of sandbox " + sandbox_id;
  if (!req.Header("upgrade").empty())
    return out.Send(ProxyError(sandbox_id, 501,
                               where + ": protocol upgrades (WebSocket) are not forwarded by skiff "
                                       "(docs/e2b.md#ports)"));
  auto wire = SerializeRequest(req.method, req.target, req.raw_headers, body);
  if (!wire.ok()) return out.Send(Reply::Error(400, wire.error().message()));

  std::optional<Error> reader_error;
  bool started = false;
  ResponseReader reader(
      req.method == "HEAD",
      [&](const ResponseReader::Head& h) {
        started = true;
        return out.Start(h.status, h.content_type, h.headers);
      },
      [&](std::string_view bytes) { return out.Write(bytes); });

  struct Sink final : PortSink {
    ResponseReader& reader;
    ResponseWriter& out;
    std::optional<Error>& failed;
    Sink(ResponseReader& r, ResponseWriter& o, std::optional<Error>& f) : reader(r), out(o), failed(f) {}
    bool OnData(std::string_view bytes) override {
      Status st = reader.Feed(bytes);
      if (!st.ok()) failed = st.error();
      // A complete answer ends the connection, even when the server would
      // keep it open despite Connection: close.
      return st.ok() && !reader.done();
    }
    bool Wanted() override { return out.Alive(); }
  } sink(reader, out, reader_error);

  bool sent = false;
  ByteSource upstream = [&]() -> Result<std::string> {
    if (sent) return std::string();
    sent = true;
    return std::move(*wire);
  };
  auto relayed = svc_.PortRelay(sandbox_id, port, upstream, sink);
  if (reader.done() && !reader_error) return;
  if (relayed.ok()) {
    Status fin = reader.Finish();
    if (fin.ok()) return;
    reader_error = fin.error();
  }
  if (started) return out.Drop();  // mid-answer: cut, never passed off as whole
  if (reader_error) return out.Send(ProxyError(sandbox_id, 502, where + ": " + reader_error->message()));
  const Error& e = relayed.error();
  switch (e.code()) {
    case Code::kS222:
      return out.Send(ProxyError(sandbox_id, 502, e.message()));
    case Code::kS002:
    case Code::kS004:
    case Code::kS005:
      return out.Send(ProxyError(sandbox_id, 502, "The sandbox was not found"));
    default:
      SKIFF_LOG(Info) << "e2b: forwarding to " << where << ": " << e.message();
      return out.Send(ProxyError(sandbox_id, 502, where + ": " + e.message()));
  }
}

}  // namespace skiff::e2b
