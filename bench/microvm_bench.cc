// The microVM backend measured the way Firecracker measures a VMM, next to
// plain QEMU with the same kernel, machine and devices:
//   - boot: create → agent ready (host wall clock around Isolator::Start and
//     the protocol handshake), QEMU start → agent HELLO (`boot_ms`), the
//     guest's own CLOCK_BOOTTIME when its agent was ready (`ready_ms`), and
//     the VMM's CPU time at that moment;
//   - on the live VM: exec round trips of `/bin/true` (busybox, static, in
//     the default image; glibc, dynamically linked, in `base`) and of
//     `fs.stat` (the channel alone, no process);
//   - after ~2 s idle: the VMM's RSS, the guest RAM's resident part, and the
//     VMM's own overhead (RSS minus guest RAM; private pages only: what one
//     more VM costs);
//   - the peer: plain qemu-system-x86_64 (not confined, no agent) booting the
//     same kernel to a static /init that prints one line and reboots, timed
//     from exec to that line.
// Runs alternate (microVM, plain, microVM, plain, …). Every boot is printed
// to stderr as it ends; boots that fail are listed, not dropped. Figures are
// grouped by the facts the backend reports (a restored VM is not a boot).
//
//   skiff-microvm-bench [--image busybox|base] [--runs 10] [--execs 20]
//                       [--idle-s 2] [--memory-mb 512] [--no-peer] [--json FILE]
//
// stdout: the JSON (unless --json FILE), then a markdown table. Exit 0 when
// every boot worked, 1 when some failed, 2 on bad usage or a missing image,
// 3 when the microVM backend is unavailable here.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/paths.h"
#include "base/pidfd.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "busybox_rootfs.h"
#include "images/recipe.h"
#include "images/store.h"
#include "isolation/microvm/initramfs.h"
#include "isolation/microvm/microvm.h"
#include "protocol/client.h"

extern char** environ;

namespace skiff {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kPlainLine = "skiff-plain-init: ready";

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Options {
  std::string image = "busybox";
  int runs = 10;
  int execs = 20;
  double idle_s = 2;
  uint32_t memory_mb = SandboxPolicy{}.memory_mb;
  uint32_t cpus = 1;
  bool peer = true;
  std::string json_path;
};

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    auto num = [&](double lo, double hi) -> std::optional<double> {
      if (!has_value) return std::nullopt;
      char* end = nullptr;
      double v = std::strtod(argv[++i], &end);
      if (!end || *end || !(v >= lo && v <= hi)) return std::nullopt;
      return v;
    };
    std::optional<double> v;
    if (a == "--no-peer") {
      o.peer = false;
    } else if (a == "--image" && has_value) {
      o.image = argv[++i];
    } else if (a == "--json" && has_value) {
      o.json_path = argv[++i];
    } else if (a == "--runs" && (v = num(1, 1000))) {
      o.runs = static_cast<int>(*v);
    } else if (a == "--execs" && (v = num(2, 10000))) {
      o.execs = static_cast<int>(*v);
    } else if (a == "--idle-s" && (v = num(0, 600))) {
      o.idle_s = *v;
    } else if (a == "--memory-mb" && (v = num(64, 65536))) {
      o.memory_mb = static_cast<uint32_t>(*v);
    } else if (a == "--cpus" && (v = num(1, 64))) {
      o.cpus = static_cast<uint32_t>(*v);
    } else {
      std::fprintf(stderr,
                   "usage: skiff-microvm-bench [--image busybox|base|<installed image>] [--runs N] "
                   "[--execs N] [--idle-s S] [--memory-mb M] [--cpus N] [--no-peer] [--json FILE]\n");
      return std::nullopt;
    }
  }
  return o;
}

// Median, min, max of a sample (empty: null).
json Stats(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {{"median", med}, {"min", v.front()}, {"max", v.back()}, {"n", n}};
}

// One request on the agent channel, timed from Open to its result.
struct Rtt {
  double ms = 0;
  std::string error;  // "" when the request succeeded
};

Rtt TimedExec(proto::Client& c, const std::string& program) {
  Rtt r;
  auto t0 = Clock::now();
  auto s = c.Open(json{{"op", "exec"}, {"argv", {program}}, {"timeout_ms", 20000}});
  if (!s.ok()) {
    r.error = s.error().message();
    return r;
  }
  (void)(*s)->End(proto::kStdin);
  auto deadline = Clock::now() + 30s;
  for (;;) {
    auto e = (*s)->Next(deadline);
    if (!e) {
      r.error = "no result within 30 s";
      return r;
    }
    if (e->kind == proto::Event::Kind::kResult) {
      r.ms = MsSince(t0);
      if (e->json.value("exit_code", -1) != 0) r.error = program + " exited: " + e->json.dump();
      return r;
    }
    if (e->kind == proto::Event::Kind::kError || e->kind == proto::Event::Kind::kClosed) {
      r.error = e->json.dump();
      return r;
    }
  }
}

Rtt TimedStat(proto::Client& c, const std::string& path) {
  Rtt r;
  auto t0 = Clock::now();
  auto st = c.Call({{"op", "fs.stat"}, {"path", path}});
  r.ms = MsSince(t0);
  if (!st.ok()) r.error = st.error().message();
  return r;
}

// The image under test: a block image and what runs in it.
struct Image {
  std::string name, block_image, fstype = "erofs";
  std::string true_label;  // "static" | "dynamic"
  std::shared_ptr<const images::ImageLease> lease;
};

std::optional<Image> ResolveImage(const std::string& name, std::string* why) {
  Image img;
  img.name = name;
  if (name == "busybox") {
    img.block_image = testing_support::BusyboxRootfs();
    img.true_label = "static";  // /bin/true -> busybox, statically linked
    if (img.block_image.empty()) *why = "could not build the busybox erofs image (mkfs.erofs?)";
    return img.block_image.empty() ? std::nullopt : std::optional(img);
  }
  // The installed entry, as the catalog finds it: the preset's recipe digest,
  // else current/<name>; leased while the bench runs. Its block image is
  // built on first use, as a sandbox's first microVM create would.
  images::Store store(images::Store::DefaultRoot());
  auto recipe = images::PresetRecipe(name);
  std::optional<std::string> digest =
      recipe.ok() && store.Read(recipe->digest) ? std::optional(recipe->digest) : store.Current(name);
  if (!digest || !store.Read(*digest)) {
    *why = "not installed (scripts/build-image " + name + ")";
    return std::nullopt;
  }
  auto lease = store.Lease(*digest);
  if (!lease.ok()) {
    *why = lease.error().message();
    return std::nullopt;
  }
  auto block = store.EnsureBlockImage(*digest, "erofs");
  if (!block.ok()) {
    *why = block.error().message();
    return std::nullopt;
  }
  img.block_image = *block;
  img.lease = std::make_shared<const images::ImageLease>(std::move(*lease));
  img.true_label = "dynamic";  // Debian's coreutils /bin/true
  return img;
}

// ---- the microVM backend ---------------------------------------------------

json MicrovmRun(Isolator& iso, const Image& img, const Options& o, int run) {
  json b = {{"run", run}, {"kind", "microvm"}};
  SandboxPolicy p;
  p.id = NewUuid();
  p.hostname = "bench";
  p.rootfs.block_image = img.block_image;
  p.rootfs.block_fstype = img.fstype;
  p.cpus = o.cpus;
  p.memory_mb = o.memory_mb;
  p.state_dir = paths::RuntimeDir() + "/sandboxes/" + p.id;
  auto t0 = Clock::now();
  auto inst = iso.Start(p);
  if (!inst.ok()) {
    b["error"] = "boot: " + inst.error().message();
    return b;
  }
  // Read at once: the VMM's CPU time at agent ready.
  json facts = (*inst)->Describe();
  auto client = proto::Client::Connect((*inst)->TakeChannel(), 60000ms);
  b["create_to_ready_ms"] = MsSince(t0);
  b["facts"] = facts;
  auto stop = [&] {
    if (client.ok()) (*client)->Close();
    (*inst)->Stop(200ms);
  };
  if (!client.ok()) {
    b["error"] = "connect: " + client.error().message() + " / " + (*inst)->ExitReport();
    stop();
    return b;
  }
  proto::Client& c = **client;
  auto info = c.Call({{"op", "info"}});
  if (info.ok()) {
    b["info"] = *info;
  } else {
    b["error"] = "info: " + info.error().message();
    stop();
    return b;
  }
  // The first exec pays for translating the program (TCG) and paging it in;
  // it is kept apart from the steady-state round trips.
  std::vector<double> exec_ms, stat_ms;
  for (int i = 0; i < o.execs; i++) {
    Rtt e = TimedExec(c, "/bin/true");
    if (!e.error.empty()) {
      b["error"] = "exec /bin/true: " + e.error;
      break;
    }
    if (i == 0) {
      b["exec_first_ms"] = e.ms;
    } else {
      exec_ms.push_back(e.ms);
    }
    Rtt s = TimedStat(c, "/bin/true");
    if (!s.error.empty()) {
      b["error"] = "fs.stat: " + s.error;
      break;
    }
    stat_ms.push_back(s.ms);
  }
  b["exec_ms"] = exec_ms;
  b["stat_ms"] = stat_ms;
  if (!b.contains("error")) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_s));
    b["idle"] = (*inst)->Describe();
    if (!(*inst)->Running()) b["error"] = "the VM ended while idle: " + (*inst)->ExitReport();
  }
  stop();
  return b;
}

// ---- the plain-QEMU peer ---------------------------------------------------

struct Peer {
  std::string cpio;  // initramfs with the plain init, written to a temp file
  std::vector<std::string> argv;
};

int64_t CpuMsOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto rp = stat.rfind(')');
  if (rp == std::string::npos) return -1;
  std::istringstream f(stat.substr(rp + 2));
  std::string x;
  int64_t ticks = 0;
  for (int i = 3; i <= 15 && f >> x; i++)
    if (i == 14 || i == 15) ticks += std::atoll(x.c_str());
  return ticks * 1000 / ::sysconf(_SC_CLK_TCK);
}

json PlainRun(const Peer& peer, int run) {
  json b = {{"run", run}, {"kind", "plain_qemu"}};
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    b["error"] = "pipe failed";
    return b;
  }
  UniqueFd rd(out[0]), wr(out[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
  std::vector<char*> av;
  for (const auto& a : peer.argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  pid_t pid = -1;
  auto t0 = Clock::now();
  int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (rc != 0) {
    b["error"] = std::string("cannot start QEMU: ") + std::strerror(rc);
    return b;
  }
  auto proc = Process::Open(pid);  // our unreaped child: the pid is still ours
  if (!proc.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    b["error"] = proc.error().message();
    return b;
  }
  std::string console;
  auto deadline = t0 + 60s;
  bool seen = false, eof = false;
  while (!eof && Clock::now() < deadline) {
    pollfd pf{rd.get(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(&pf, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n <= 0) {
      eof = true;
      break;
    }
    console.append(buf, static_cast<size_t>(n));
    if (!seen && console.find(kPlainLine) != std::string::npos) {
      seen = true;
      b["exec_to_line_ms"] = MsSince(t0);
      b["vmm_cpu_ms_at_line"] = CpuMsOf(pid);
    }
    if (console.size() > (1u << 20)) console.erase(0, console.size() - 4096);
  }
  auto st = proc->Wait(seen ? std::optional(10000ms) : std::optional(0ms));
  if (st.ok() && st->has_value()) {
    b["exec_to_exit_ms"] = MsSince(t0);
  } else {
    (void)proc->Signal(SIGKILL);
    (void)proc->Wait(std::nullopt);
  }
  if (!seen) {
    std::string tail = console.substr(console.size() > 600 ? console.size() - 600 : 0);
    b["error"] = std::string(eof ? "QEMU ended" : "timed out") +
                 " before the init's line; console: " + SanitizeUtf8(tail);
  }
  return b;
}

// ---- report ----------------------------------------------------------------

std::string Fmt(const json& s, const char* unit = " ms", double scale = 1, int prec = 0) {
  if (s.is_null()) return "–";
  char buf[160];
  double m = s["median"].get<double>() / scale, lo = s["min"].get<double>() / scale,
         hi = s["max"].get<double>() / scale;
  std::snprintf(buf, sizeof buf, "%.*f%s (%.*f–%.*f)", prec, m, unit, prec, lo, prec, hi);
  return buf;
}

std::string Meets(const json& s, double limit, double scale = 1) {
  if (s.is_null()) return "";
  return s["median"].get<double>() / scale <= limit ? " ✓" : " ✗";
}

// A group's label: how its VMs came up, from the backend's own facts.
std::string GroupOf(const json& b) {
  const json& f = b.value("facts", json::object());
  if (!f.contains("restored")) return "microvm";
  std::string g = f["restored"].get<bool>() ? "restored" : "booted";
  if (f.contains("template_ms")) g += " + template build";
  return g;
}

json Summarise(const std::vector<json>& boots) {
  std::vector<double> create, qemu, prepare, guest, cpu, first, exec, stat, rss, grss, over, priv;
  auto num = [](const json& j, const char* k, std::vector<double>& v) {
    if (j.contains(k) && j[k].is_number()) v.push_back(j[k].get<double>());
  };
  for (const json& b : boots) {
    num(b, "create_to_ready_ms", create);
    const json& f = b["facts"];
    num(f, "boot_ms", qemu);
    num(f, "prepare_ms", prepare);
    num(f, "vmm_cpu_ms", cpu);
    if (b.contains("info")) num(b["info"], "ready_ms", guest);
    num(b, "exec_first_ms", first);
    for (double x : b.value("exec_ms", std::vector<double>())) exec.push_back(x);
    for (double x : b.value("stat_ms", std::vector<double>())) stat.push_back(x);
    if (b.contains("idle")) {
      const json& i = b["idle"];
      num(i, "vmm_rss_kib", rss);
      num(i, "guest_rss_kib", grss);
      num(i, "vmm_overhead_kib", over);
      num(i, "vmm_private_overhead_kib", priv);
    }
  }
  return {{"vms", boots.size()},
          {"create_to_ready_ms", Stats(create)},
          {"qemu_start_to_ready_ms", Stats(qemu)},
          {"prepare_ms", Stats(prepare)},
          {"guest_ready_ms", Stats(guest)},
          {"vmm_cpu_ms_at_ready", Stats(cpu)},
          {"exec_true_first_ms", Stats(first)},
          {"exec_true_ms", Stats(exec)},
          {"fs_stat_ms", Stats(stat)},
          {"idle_vmm_rss_kib", Stats(rss)},
          {"idle_guest_rss_kib", Stats(grss)},
          {"idle_vmm_overhead_kib", Stats(over)},
          {"idle_vmm_private_overhead_kib", Stats(priv)}};
}

std::string Markdown(const json& r) {
  std::vector<std::string> groups;
  for (auto& [g, _] : r["microvm"].items()) groups.push_back(g);
  const json& peer = r.value("plain_qemu", json());
  bool has_peer = peer.is_object();
  std::string tl = r["true_linkage"].get<std::string>();
  std::ostringstream md;
  md << "| " << r["image"].get<std::string>() << " image, " << r["memory_mb"].get<int>() << " MiB, "
     << r["accel"].get<std::string>() << " | target";
  for (auto& g : groups) md << " | microVM (" << g << ", " << r["microvm"][g]["vms"].get<int>() << " VMs)";
  if (has_peer) md << " | plain QEMU (" << peer["boots"].get<int>() << " boots)";
  md << " |\n|---|---";
  for (size_t i = 0; i < groups.size() + (has_peer ? 1 : 0); i++) md << "|---";
  md << "|\n";
  auto row = [&](const std::string& name, const std::string& target, const char* key, const char* peer_key,
                 double limit, double scale, const char* unit, int prec) {
    md << "| " << name << " | " << target;
    for (auto& g : groups) {
      const json& s = r["microvm"][g][key];
      md << " | " << Fmt(s, unit, scale, prec) << (limit > 0 ? Meets(s, limit, scale) : "");
    }
    if (has_peer) md << " | " << (peer_key ? Fmt(peer[peer_key], unit, scale, prec) : "");
    md << " |\n";
  };
  row("create → agent ready (plain: exec → init's line)", "≤ 1.0 s", "create_to_ready_ms", "exec_to_line_ms",
      1000, 1, " ms", 0);
  row("QEMU start → agent ready", "", "qemu_start_to_ready_ms", nullptr, 0, 1, " ms", 0);
  row("guest-side ready (CLOCK_BOOTTIME)", "", "guest_ready_ms", nullptr, 0, 1, " ms", 0);
  row("VMM CPU at ready (plain: at the line)", "", "vmm_cpu_ms_at_ready", "vmm_cpu_ms_at_line", 0, 1, " ms",
      0);
  row("exec `/bin/true` (" + tl + "), first", "", "exec_true_first_ms", nullptr, 0, 1, " ms", 1);
  row("exec `/bin/true` (" + tl + ") round trip", "≤ 5 ms", "exec_true_ms", nullptr, 5, 1, " ms", 1);
  row("`fs.stat` round trip", "", "fs_stat_ms", nullptr, 0, 1, " ms", 2);
  row("idle VMM RSS", "", "idle_vmm_rss_kib", nullptr, 0, 1024, " MiB", 1);
  row("idle guest RAM resident", "", "idle_guest_rss_kib", nullptr, 0, 1024, " MiB", 1);
  row("idle VMM overhead (RSS − guest RAM)", "≤ 30 MiB", "idle_vmm_overhead_kib", nullptr, 30, 1024, " MiB",
      1);
  row("idle VMM private overhead (one more VM)", "", "idle_vmm_private_overhead_kib", nullptr, 0, 1024,
      " MiB", 1);
  if (has_peer) {
    md << "\nplain QEMU: exec → exit " << Fmt(peer["exec_to_exit_ms"]) << ".";
  }
  char tail[320];
  std::snprintf(tail, sizeof tail,
                "\nMedian (min–max). %d run(s) alternating microVM / plain QEMU; per VM %d execs (the "
                "first apart) and %d fs.stat, then %.1f s idle; load average %.2f before, %.2f "
                "after.\n",
                r["runs"].get<int>(), r["execs_per_vm"].get<int>(), r["execs_per_vm"].get<int>(),
                r["idle_s"].get<double>(), r["load_before"][0].get<double>(),
                r["load_after"][0].get<double>());
  md << tail;
  if (!r["failures"].empty()) {
    md << "\n**" << r["failures"].size() << " failed:**\n";
    for (const json& f : r["failures"])
      md << "- run " << f["run"].get<int>() << " " << f["kind"].get<std::string>() << ": "
         << f["error"].get<std::string>().substr(0, 400) << "\n";
  }
  return md.str();
}

void PrintBoot(const json& b) {
  std::string line =
      "[microvm-bench] run " + std::to_string(b["run"].get<int>()) + " " + b["kind"].get<std::string>();
  char buf[512];
  if (b["kind"] == "microvm" && b.contains("facts")) {
    const json& f = b["facts"];
    auto i = [&](const json& j, const char* k) {
      return j.contains(k) && j[k].is_number() ? j[k].get<double>() : -1.0;
    };
    std::vector<double> e = b.value("exec_ms", std::vector<double>());
    std::vector<double> s = b.value("stat_ms", std::vector<double>());
    json es = Stats(e), ss = Stats(s);
    const json idle = b.value("idle", json::object());
    std::snprintf(buf, sizeof buf,
                  " (%s): create→ready %.0f ms, qemu→ready %.0f, prepare %.0f, guest ready %.0f, "
                  "vmm cpu %.0f ms; true first %.1f, median %.1f ms; stat %.2f ms; idle rss %.1f "
                  "MiB, guest %.1f, overhead %.1f, private %.1f",
                  GroupOf(b).c_str(), b.value("create_to_ready_ms", -1.0), i(f, "boot_ms"),
                  i(f, "prepare_ms"), b.contains("info") ? i(b["info"], "ready_ms") : -1.0,
                  i(f, "vmm_cpu_ms"), b.value("exec_first_ms", -1.0),
                  es.is_null() ? -1.0 : es["median"].get<double>(),
                  ss.is_null() ? -1.0 : ss["median"].get<double>(), i(idle, "vmm_rss_kib") / 1024,
                  i(idle, "guest_rss_kib") / 1024, i(idle, "vmm_overhead_kib") / 1024,
                  i(idle, "vmm_private_overhead_kib") / 1024);
    line += buf;
  } else if (b["kind"] == "plain_qemu" && b.contains("exec_to_line_ms")) {
    std::snprintf(buf, sizeof buf, ": exec→line %.0f ms, exec→exit %.0f ms, vmm cpu %lld ms",
                  b["exec_to_line_ms"].get<double>(), b.value("exec_to_exit_ms", -1.0),
                  static_cast<long long>(b.value("vmm_cpu_ms_at_line", int64_t{-1})));
    line += buf;
  }
  if (b.contains("error")) line += " FAILED: " + b["error"].get<std::string>().substr(0, 600);
  std::fprintf(stderr, "%s\n", line.c_str());
}

int Main(int argc, char** argv) {
  auto opt = ParseArgs(argc, argv);
  if (!opt) return 2;
  const Options& o = *opt;
  std::string why;
  auto img = ResolveImage(o.image, &why);
  if (!img) {
    std::fprintf(stderr, "image %s: %s\n", o.image.c_str(), why.c_str());
    return 2;
  }
  auto iso = MakeMicrovmIsolator();
  if (auto st = iso->Available(); !st.ok()) {
    std::printf("%s\n", json{{"image", o.image}, {"error", st.error().message()}}.dump(2).c_str());
    return 3;
  }
  bool kvm = microvm::KvmUsable();

  // The peer's initramfs: the static plain init as /init (plus /dev/console),
  // written by the same cpio writer as the agent's.
  std::string init_path = paths::SelfDir() + "/skiff-plain-init";
  std::string tmp_dir =
      (std::filesystem::temp_directory_path() / ("skiff-microvm-bench-" + RandomHex(6))).string();
  Peer peer;
  if (o.peer) {
    std::ifstream in(init_path, std::ios::binary);
    std::string init((std::istreambuf_iterator<char>(in)), {});
    if (init.empty()) {
      std::fprintf(stderr, "%s is missing (build the skiff-plain-init target)\n", init_path.c_str());
      return 2;
    }
    std::filesystem::create_directories(tmp_dir);
    peer.cpio = tmp_dir + "/plain-init.cpio";
    std::ofstream(peer.cpio, std::ios::binary) << microvm::BuildInitramfs(init);
    SandboxPolicy p;
    p.hostname = "bench";
    p.rootfs.block_fstype = img->fstype;
    // The backend's machine, accelerator, kernel command line and devices;
    // not its confinement, its agent or its fd passing.
    peer.argv = {microvm::QemuBinary(), "-M",
                 "microvm,x-option-roms=off,pit=on,pic=on,isa-serial=on,rtc=on,acpi=off",
                 // The backend's translation-cache cap (microvm.cc, MachineArgs).
                 "-accel", kvm ? "kvm" : "tcg,tb-size=128", "-cpu", kvm ? "host" : "max", "-smp",
                 std::to_string(o.cpus), "-m", std::to_string(o.memory_mb), "-nodefaults", "-no-user-config",
                 "-display", "none", "-no-reboot", "-kernel", microvm::KernelPath(), "-initrd", peer.cpio,
                 "-append", microvm::KernelCmdline(p, kvm), "-serial", "stdio", "-drive",
                 "id=root,if=none,file=" + img->block_image + ",format=raw,readonly=on,file.locking=off",
                 "-device", "virtio-blk-device,drive=root", "-device", "virtio-serial-device,max_ports=2",
                 "-chardev", "null,id=agent", "-device", "virtserialport,chardev=agent,name=skiff.agent",
                 "-object", "rng-builtin,id=rng0", "-device", "virtio-rng-device,rng=rng0"};
  }

  double load[3] = {0, 0, 0};
  ::getloadavg(load, 3);
  json r = {{"image", o.image},
            {"block_image", img->block_image},
            {"true_linkage", img->true_label},
            {"runs", o.runs},
            {"execs_per_vm", o.execs},
            {"idle_s", o.idle_s},
            {"memory_mb", o.memory_mb},
            {"cpus", o.cpus},
            {"accel", kvm ? "kvm" : "tcg"},
            {"load_before", {load[0], load[1], load[2]}},
            {"targets", {{"create_to_ready_ms", 1000}, {"exec_rtt_ms", 5}, {"idle_vmm_overhead_mib", 30}}}};
  if (o.peer) r["plain_qemu_argv"] = peer.argv;

  std::vector<json> boots;
  for (int run = 1; run <= o.runs; run++) {
    boots.push_back(MicrovmRun(*iso, *img, o, run));
    PrintBoot(boots.back());
    if (o.peer) {
      boots.push_back(PlainRun(peer, run));
      PrintBoot(boots.back());
    }
  }
  if (!tmp_dir.empty()) std::filesystem::remove_all(tmp_dir);

  json failures = json::array();
  std::map<std::string, std::vector<json>> groups;
  std::vector<double> line, exit_ms, cpu;
  for (const json& b : boots) {
    if (b.contains("error"))
      failures.push_back({{"run", b["run"]}, {"kind", b["kind"]}, {"error", b["error"]}});
    if (b["kind"] == "microvm") {
      if (b.contains("facts")) groups[GroupOf(b)].push_back(b);
      continue;
    }
    if (b.contains("exec_to_line_ms")) line.push_back(b["exec_to_line_ms"].get<double>());
    if (b.contains("exec_to_exit_ms")) exit_ms.push_back(b["exec_to_exit_ms"].get<double>());
    if (b.contains("vmm_cpu_ms_at_line")) cpu.push_back(b["vmm_cpu_ms_at_line"].get<double>());
  }
  r["microvm"] = json::object();
  for (const auto& [g, v] : groups) r["microvm"][g] = Summarise(v);
  if (o.peer)
    r["plain_qemu"] = {{"boots", line.size()},
                       {"exec_to_line_ms", Stats(line)},
                       {"exec_to_exit_ms", Stats(exit_ms)},
                       {"vmm_cpu_ms_at_line", Stats(cpu)}};
  r["failures"] = failures;
  r["boots"] = boots;
  ::getloadavg(load, 3);
  r["load_after"] = {load[0], load[1], load[2]};

  if (o.json_path.empty()) {
    std::printf("%s\n\n", r.dump(2).c_str());
  } else {
    std::ofstream out(o.json_path);
    out << r.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", o.json_path.c_str());
      return 2;
    }
  }
  std::printf("%s", Markdown(r).c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace skiff

int main(int argc, char** argv) { return skiff::Main(argc, argv); }
