// `skiff doctor`: what this host offers and which isolation `auto` picks.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/http_util.h"
#include "cli/commands.h"
#include "sandbox/backends.h"
#include "sandbox/config.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

// The doctor report as indented "key: value" lines.
void PrintDoctor(const json& d, int indent) {
  for (auto it = d.begin(); it != d.end(); ++it) {
    std::string pad(static_cast<size_t>(indent), ' ');
    if (it->is_object()) {
      std::printf("%s%s:\n", pad.c_str(), it.key().c_str());
      PrintDoctor(*it, indent + 2);
    } else if (it->is_array() && !it->empty() && (*it)[0].is_object()) {
      std::printf("%s%s:\n", pad.c_str(), it.key().c_str());
      for (const auto& e : *it) std::printf("%s  - %s\n", pad.c_str(), api::Dump(e).c_str());
    } else {
      std::string v = it->is_string() ? it->get<std::string>() : api::Dump(*it);
      std::printf("%s%-22s %s\n", pad.c_str(), (it.key() + ":").c_str(), v.c_str());
    }
  }
}

int Doctor(bool json_out) {
  Config config;
  config.allow_all_images = true;
  auto mgr = MakeSandboxManager(config);
  if (!mgr.ok()) {
    std::fprintf(stderr, "skiff doctor: no isolation backend works here: %s\n",
                 mgr.error().message().c_str());
    return 1;
  }
  json d = (*mgr)->Doctor();
  if (json_out) {
    std::printf("%s\n", d.dump(2).c_str());
  } else {
    PrintDoctor(d, 0);
    std::printf("\nisolation 'auto' picks: %s\n", (*mgr)->default_isolation().c_str());
  }
  (*mgr)->Shutdown();
  return 0;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, int& rc) {
  auto* doctor = app.add_subcommand("doctor", "what this host offers and what isolation auto picks");
  auto json_out = std::make_shared<bool>(false);
  doctor->add_flag("--json", *json_out, "print JSON");
  doctor->callback([json_out, &rc] { rc = Doctor(*json_out); });
}

}  // namespace skiff::cli
