// E2B's file metadata on an upload (docs/e2b.md#file-metadata): every
// `X-Metadata-<key>: <value>` header of a POST /files is one pair for all
// the files it writes, the key lower-cased.
#pragma once

#include "base/error.h"
#include "e2b/exchange.h"
#include "protocol/file_metadata.h"

namespace skiff::e2b {

// The pairs of `headers` (names in any case). A key that is not an HTTP
// token, a value that is not printable ASCII, or pairs beyond the
// protocol's limits are S210 naming the header; a key given twice keeps
// its last value. No X-Metadata header: an empty map.
Result<proto::FileMetadata> MetadataHeaders(const Headers& headers);

}  // namespace skiff::e2b
