#pragma once

// The lifecycle of one sandbox, as the manager sees it, and the transitions
// between its states that are legal.

namespace skiff {

enum class SandboxState {
  kStarting,  // booting: not yet in the registry or a warm pool
  kReady,     // in the registry or a warm pool; accepts exec and fs calls
  kPaused,    // in the registry, its processes stopped (memory kept); calls get S005
  kStopping,  // taken out by a stop, reap, agent death or shutdown; teardown pending
  kStopped,   // teardown finished; no process or host resource remains
};

// Starting → Ready (registered or pooled), Starting → Stopping (the daemon
// shut down while it booted), Ready → Paused → Ready, Ready → Stopping,
// Paused → Stopping, Stopping → Stopped. Nothing leaves Stopped, and no
// state moves to itself.
constexpr bool CanTransition(SandboxState from, SandboxState to) {
  switch (from) {
    case SandboxState::kStarting:
      return to == SandboxState::kReady || to == SandboxState::kStopping;
    case SandboxState::kReady:
      return to == SandboxState::kStopping || to == SandboxState::kPaused;
    case SandboxState::kPaused:
      return to == SandboxState::kStopping || to == SandboxState::kReady;
    case SandboxState::kStopping:
      return to == SandboxState::kStopped;
    case SandboxState::kStopped:
      return false;
  }
  return false;
}

// True once the sandbox has left service: a stop of any kind has begun.
constexpr bool IsStopping(SandboxState s) {
  return s == SandboxState::kStopping || s == SandboxState::kStopped;
}

constexpr const char* SandboxStateName(SandboxState s) {
  switch (s) {
    case SandboxState::kStarting:
      return "starting";
    case SandboxState::kReady:
      return "ready";
    case SandboxState::kPaused:
      return "paused";
    case SandboxState::kStopping:
      return "stopping";
    case SandboxState::kStopped:
      return "stopped";
  }
  return "unknown";
}

}  // namespace skiff
