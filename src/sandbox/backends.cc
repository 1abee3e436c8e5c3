#include "sandbox/backends.h"

#include <map>
#include <string>
#include <vector>

#include "base/log.h"
#include "isolation/jail/jail.h"
#include "isolation/microvm/microvm.h"
#include "isolation/net/sandbox_net.h"

namespace skiff {

namespace {

HostProbes BackendProbes() {
  HostProbes h;
  h.kvm_usable = [] { return microvm::KvmUsable(); };
  h.network_doctor = [] { return net::Doctor(); };
  h.rewrite_loopback = [](const std::string& value, const std::vector<uint16_t>& ports) {
    return net::RewriteLoopback(value, ports);
  };
  return h;
}

}  // namespace

Result<std::unique_ptr<SandboxManager>> MakeSandboxManager(Config config) {
  std::map<std::string, std::unique_ptr<Isolator>> isolators;
  std::vector<std::string> why;
  auto add = [&](std::unique_ptr<Isolator> iso) {
    std::string kind(iso->kind());
    auto st = iso->Available();
    if (st.ok()) {
      iso->CleanupOrphans();
      isolators.emplace(kind, std::move(iso));
    } else {
      why.push_back(kind + ": " + st.error().message());
      SKIFF_LOG(Info) << "isolation " << kind << " unavailable: " << st.error().message();
    }
  };
  if (config.isolation != "microvm") add(MakeJailIsolator());
  if (config.isolation != "jail") add(MakeMicrovmIsolator());
  if (config.isolation != "auto" && !isolators.count(config.isolation)) {
    std::string detail = "configured isolation '" + config.isolation + "' is not available";
    for (auto& w : why) detail += "; " + w;
    return Platform("isolation", detail);
  }
  if (isolators.empty()) {
    std::string detail = "no isolation backend is available on this host";
    for (auto& w : why) detail += "; " + w;
    return Platform("isolation", detail);
  }
  auto m = std::make_unique<SandboxManager>(std::move(config), std::move(isolators), BackendProbes());
  if (m->config().isolation == "microvm" && !microvm::KvmUsable())
    SKIFF_LOG(Warn) << "isolation microvm without usable /dev/kvm: VMs run under TCG emulation";
  SKIFF_LOG(Info) << "default isolation: " << m->default_isolation();
  return m;
}

}  // namespace skiff
