// A jail's snapshot (docs/snapshots.md): its files, not its processes.
// Layout under the snapshot's directory:
//   jail.json               format, the overlay targets, the generations
//   gen<k>/layer<i>/        the upper directory of overlay i as it was in
//                           generation k, owners relative to the sandbox's
//                           uid range (like an image layer)
//   tmp/                    the sandbox's /tmp
// A sandbox restored from a snapshot mounts its generations as the top
// lower layers of each overlay (newest first) over the image's, with a
// fresh upper; its own snapshot is then its source's generations plus its
// upper as the next one. /tmp (a tmpfs of its own) is copied in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "isolation/isolator.h"

namespace skiff::jail {

// Saves a (frozen) jail: the overlays' uppers under `state_root` ("u<i>"),
// `tmp_root` (/tmp) and `shm_root` (/dev/shm), owners moved from
// [base, base + 65536) to 0; `restored_from` is the snapshot the jail
// started from ("" when none), whose generations come first.
Result<SnapshotContents> SaveJailSnapshot(int state_root, int tmp_root, int shm_root, uint32_t base,
                                          const std::vector<std::string>& targets,
                                          const std::string& restored_from, const std::string& dir,
                                          uint64_t max_bytes);

// Puts the snapshot's generations on top of `policy`'s layers, or S300 when
// the snapshot does not fit them (another image's).
Status AddSnapshotLayers(SandboxPolicy& policy, const std::string& dir);

// Copies the snapshot's /tmp and /dev/shm into a new jail's (`tmp_root`,
// `shm_root`), owners moved to [base, base + 65536). A snapshot saved
// before /dev/shm was kept has none: that one stays empty.
Status RestoreScratch(const std::string& dir, int tmp_root, int shm_root, uint32_t base, uint64_t max_bytes);

}  // namespace skiff::jail
