#include "functions/invocation.h"

#include "functions/errors.h"

namespace skiff {

int Invocation::http_status() const {
  if (result) return 200;
  if (error) return HttpStatus(error->code());
  if (engine_error) return engine_error->http_status();
  if (relayed_error) return 502;
  return 500;
}

}  // namespace skiff
