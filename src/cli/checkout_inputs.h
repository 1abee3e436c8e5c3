// The ./skiff wrapper's "nothing changed" check, done inside the binary so
// that a call from a checkout costs no extra process (docs/performance.md,
// "The ./skiff wrapper"). The last successful bootstrap writes
// <build dir>/.inputs.list (the tracked inputs and their directories) and
// <build dir>/.inputs, the manifest: `stat -c '%n %s %.9Y %i %.9Z'` of each
// (path, size, mtime, inode, ctime). The build is current when the same
// text comes out now.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace skiff::cli {

// The manifest of `paths`, byte for byte what `stat -c '%n %s %.9Y %i %.9Z'`
// prints for them (links not followed), lines joined by '\n' with none after
// the last. nullopt when a path cannot be examined.
std::optional<std::string> InputsManifest(const std::vector<std::string>& paths);

// True when <build_dir>/.inputs is the manifest of the paths listed in
// <build_dir>/.inputs.list; false when either is missing or anything differs.
bool InputsCurrent(const std::string& build_dir);

// First thing in Main. The wrapper sets SKIFF_WRAPPER_BUILD_DIR and
// SKIFF_WRAPPER (its own path) when its other checks passed; this removes
// both from the environment (nothing skiff starts inherits them) and, when
// the build is not current, runs the wrapper again with
// SKIFF_WRAPPER_STALE=1 and the same arguments, so it bootstraps first.
// Returns only when this binary should go on; exits 125 when the wrapper
// cannot be run.
void ReturnToWrapperIfStale(char** argv);

}  // namespace skiff::cli
