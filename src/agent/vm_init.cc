#include "agent/vm_init.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>

#include "base/file_io.h"
#include "base/scoped_dir.h"

namespace skiff::agent {
namespace {

int64_t g_ready_ms = -1;

constexpr char kMarker[] = "/.skiff-initramfs";
constexpr char kPortName[] = "skiff.agent";

int64_t BoottimeMillis() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

std::string SysMsg(std::string_view call, std::string_view object, int err) {
  std::string m(call);
  m += "(";
  m += object;
  m += "): ";
  m += ErrnoName(err);
  return m;
}

[[noreturn]] void Fail(const std::string& why) { VmPowerOff("skiff-agent: vm init: " + why); }

void Mount(const char* src, const char* target, const char* fstype, unsigned long flags, const char* data) {
  if (::mount(src, target, fstype, flags, data) != 0) {
    std::string obj = std::string(fstype ? fstype : src) + ", " + target;
    Fail(SysMsg("mount", obj, errno));
  }
}

// mkdir -p that accepts an existing directory (the image may already have
// it) but never a symlink: a link in the image could aim a mount elsewhere.
void MkdirP(const std::string& path, mode_t mode) {
  if (Status st = MakeDirs(path, mode, Links::kRefuse); !st.ok()) Fail(st.error().message());
}

// A small kernel-provided file (/proc, /sys), or "" when it cannot be read.
std::string ReadSmallFile(const std::string& path) {
  Result<std::string> r = ReadFile(path, size_t{64} * 1024);
  return r.ok() ? std::move(*r) : std::string();
}

// skiff.key=value words of the kernel command line. The kernel keeps dotted
// parameters away from init's argv/env, so they are read from /proc.
std::map<std::string, std::string> ReadParams() {
  std::map<std::string, std::string> out;
  std::string cmdline = ReadSmallFile("/proc/cmdline");
  size_t i = 0;
  while (i < cmdline.size()) {
    while (i < cmdline.size() && (cmdline[i] == ' ' || cmdline[i] == '\n')) i++;
    size_t j = i;
    while (j < cmdline.size() && cmdline[j] != ' ' && cmdline[j] != '\n') j++;
    std::string word = cmdline.substr(i, j - i);
    i = j;
    if (word.rfind("skiff.", 0) != 0) continue;
    auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    out[word.substr(6, eq - 6)] = word.substr(eq + 1);
  }
  return out;
}

bool SafeToken(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

void SleepMillis(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The virtio-serial port the host named skiff.agent: its name appears in
// sysfs once the host's port-open message arrives, which may be after init
// starts, so this polls.
int OpenAgentPort(int timeout_ms) {
  int64_t deadline = BoottimeMillis() + timeout_ms;
  for (;;) {
    if (auto d = ScopedDir::Open("/sys/class/virtio-ports"); d.ok()) {
      while (const dirent* e = d->Next()) {
        if (e->d_name[0] == '.') continue;
        std::string base = e->d_name;
        std::string name = ReadSmallFile("/sys/class/virtio-ports/" + base + "/name");
        while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
        if (name != kPortName) continue;
        std::string dev = "/dev/" + base;
        for (int i = 0; i < 1000 && ::access(dev.c_str(), F_OK) != 0; i++) SleepMillis(2);
        int fd = ::open(dev.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) Fail(SysMsg("open", dev, errno));
        return fd;
      }
    }
    if (BoottimeMillis() > deadline) Fail("no virtio-serial port named skiff.agent");
    SleepMillis(2);
  }
}

void WaitForPath(const char* path, int timeout_ms) {
  int64_t deadline = BoottimeMillis() + timeout_ms;
  while (::access(path, F_OK) != 0) {
    if (BoottimeMillis() > deadline) Fail(SysMsg("access", path, errno));
    SleepMillis(2);
  }
}

void SetIfFlagsUp(int sock, const char* ifname) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (::ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) Fail(SysMsg("ioctl(SIOCGIFFLAGS)", ifname, errno));
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) Fail(SysMsg("ioctl(SIOCSIFFLAGS)", ifname, errno));
}

void SetIfAddr(int sock, const char* ifname, unsigned long req, const char* addr) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr, &sin.sin_addr);
  std::memcpy(&ifr.ifr_addr, &sin, sizeof sin);
  if (::ioctl(sock, req, &ifr) != 0) Fail(SysMsg("ioctl(SIOCSIFADDR)", ifname, errno));
}

// lo up always; with skiff.net=user also eth0, the virtio-net NIC behind
// the host's filtering bridge and slirp4netns (the fixed plan of
// src/isolation/net: 10.0.2.15/24, gateway 10.0.2.2, DNS 10.0.2.3).
void ConfigureNetwork(bool user_net) {
  int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) Fail(SysMsg("socket", "AF_INET", errno));
  SetIfFlagsUp(sock, "lo");
  if (user_net) {
    SetIfAddr(sock, "eth0", SIOCSIFADDR, "10.0.2.15");
    SetIfAddr(sock, "eth0", SIOCSIFNETMASK, "255.255.255.0");
    SetIfFlagsUp(sock, "eth0");
    rtentry rt{};
    sockaddr_in any{}, gw{};
    any.sin_family = gw.sin_family = AF_INET;
    ::inet_pton(AF_INET, "10.0.2.2", &gw.sin_addr);
    std::memcpy(&rt.rt_dst, &any, sizeof any);
    std::memcpy(&rt.rt_genmask, &any, sizeof any);
    std::memcpy(&rt.rt_gateway, &gw, sizeof gw);
    rt.rt_flags = RTF_UP | RTF_GATEWAY;
    char dev[] = "eth0";
    rt.rt_dev = dev;
    if (::ioctl(sock, SIOCADDRT, &rt) != 0) Fail(SysMsg("ioctl(SIOCADDRT)", "default", errno));
  }
  ::close(sock);
}

}  // namespace

bool IsVmGuestInit() { return ::getpid() == 1 && ::access(kMarker, F_OK) == 0; }

int64_t VmReadyMillis() { return g_ready_ms; }

Status VmSetClock(int64_t realtime_ns) {
  if (realtime_ns <= 0) return InvalidRequest("clock: bad realtime_ns");
  timespec ts{static_cast<time_t>(realtime_ns / 1000000000), static_cast<long>(realtime_ns % 1000000000)};
  if (::clock_settime(CLOCK_REALTIME, &ts) != 0)
    return Error::Sys(Code::kS300, "clock_settime", "CLOCK_REALTIME", errno);
  return OkStatus();
}

Status VmResume(std::string_view seed, int64_t realtime_ns, std::string_view hostname) {
  if (seed.size() < 32 || seed.size() > 256) return InvalidRequest("resume: seed must be 32-256 bytes");
  if (realtime_ns <= 0) return InvalidRequest("resume: bad realtime_ns");
  if (!hostname.empty() && !SafeToken(std::string(hostname), 63))
    return InvalidRequest("resume: bad hostname");
  // rand_pool_info ends in a flexible array: header and bytes in one buffer.
  alignas(rand_pool_info) unsigned char buf[sizeof(rand_pool_info) + 256] = {};
  auto* info = reinterpret_cast<rand_pool_info*>(buf);
  info->entropy_count = static_cast<int>(seed.size() * 8);
  info->buf_size = static_cast<int>(seed.size());
  std::memcpy(buf + sizeof(rand_pool_info), seed.data(), seed.size());
  int fd = ::open("/dev/urandom", O_RDWR | O_CLOEXEC);
  if (fd < 0) return Error::Sys(Code::kS300, "open", "/dev/urandom", errno);
  int rc = ::ioctl(fd, RNDADDENTROPY, info);
  int err = errno;
  if (rc == 0) {
    rc = ::ioctl(fd, RNDRESEEDCRNG);
    err = errno;
  }
  ::close(fd);
  explicit_bzero(buf, sizeof buf);
  if (rc != 0) return Error::Sys(Code::kS300, "ioctl(RNDRESEEDCRNG)", "/dev/urandom", err);
  SKIFF_RETURN_IF_ERROR(VmSetClock(realtime_ns));
  if (!hostname.empty() && ::sethostname(hostname.data(), hostname.size()) != 0)
    return Error::Sys(Code::kS300, "sethostname", std::string(hostname), errno);
  return OkStatus();
}

[[noreturn]] void VmPowerOff(std::string_view why) {
  if (!why.empty()) {
    std::string line(why);
    line += "\n";
    (void)WriteAll(2, line, "console");
  }
  ::sync();
  ::reboot(RB_AUTOBOOT);
  for (;;) ::pause();
}

Result<int> VmInit() {
  ::umask(022);
  Mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755");
  // The kernel opened /dev/console from the initramfs for fds 0-2; make sure.
  if (::fcntl(2, F_GETFD) < 0) {
    int fd = ::open("/dev/console", O_RDWR | O_NOCTTY);
    if (fd >= 0) {
      for (int i = 0; i < 3; i++)
        if (fd != i) ::dup2(fd, i);
      if (fd > 2) ::close(fd);
    }
  }
  Mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  Mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  auto params = ReadParams();

  std::string fstype = params.count("fstype") ? params["fstype"] : "erofs";
  if (fstype != "erofs" && fstype != "ext4") Fail("bad skiff.fstype: " + fstype);
  std::string tmp_opts = "mode=1777";
  if (params.count("tmp_mb")) {
    const std::string& v = params["tmp_mb"];
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
      Fail("bad skiff.tmp_mb: " + v);
    tmp_opts += ",size=" + v + "m";
  }

  // The channel first: it does not depend on the root filesystem.
  int chan = OpenAgentPort(10000);

  MkdirP("/run", 0755);
  MkdirP("/run/lower", 0755);
  MkdirP("/run/rw", 0755);
  MkdirP("/run/root", 0755);
  WaitForPath("/dev/vda", 5000);
  Mount("/dev/vda", "/run/lower", fstype.c_str(), MS_RDONLY | MS_NODEV, nullptr);
  Mount("tmpfs", "/run/rw", "tmpfs", MS_NODEV, "mode=0755");
  MkdirP("/run/rw/upper", 0755);
  MkdirP("/run/rw/work", 0755);
  Mount("overlay", "/run/root", "overlay", MS_NODEV,
        "lowerdir=/run/lower,upperdir=/run/rw/upper,workdir=/run/rw/work");

  const std::string root = "/run/root";
  for (const char* d : {"/proc", "/sys", "/dev", "/tmp"}) MkdirP(root + d, 0755);
  Mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  Mount("sysfs", (root + "/sys").c_str(), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  Mount("/dev", (root + "/dev").c_str(), nullptr, MS_MOVE, nullptr);
  MkdirP(root + "/dev/pts", 0755);
  MkdirP(root + "/dev/shm", 01777);
  Mount("devpts", (root + "/dev/pts").c_str(), "devpts", MS_NOSUID | MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=0620");
  Mount("tmpfs", (root + "/dev/shm").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  Mount("tmpfs", (root + "/tmp").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts.c_str());
  ::umount2("/proc", MNT_DETACH);
  ::umount2("/sys", MNT_DETACH);

  // switch_root: the initramfs is the kernel's rootfs and cannot be
  // pivot_root'ed; move the new root over it and chroot into it. The
  // initramfs content (one binary) stays in memory; it is small.
  if (::chdir(root.c_str()) != 0) Fail(SysMsg("chdir", root, errno));
  Mount(".", "/", nullptr, MS_MOVE, nullptr);
  if (::chroot(".") != 0) Fail(SysMsg("chroot", root, errno));
  if (::chdir("/") != 0) Fail(SysMsg("chdir", "/", errno));

  bool user_net = params.count("net") && params["net"] == "user";
  ConfigureNetwork(user_net);
  if (params.count("hostname")) {
    const std::string& h = params["hostname"];
    // As on a restore: a guest that cannot take its name does not start.
    if (SafeToken(h, 63) && ::sethostname(h.c_str(), h.size()) != 0) Fail(SysMsg("sethostname", h, errno));
  }
  if (user_net) {
    // DNS through the gateway's resolver; written into the overlay only.
    int fd = ::open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
      (void)WriteAll(fd, "nameserver 10.0.2.3\n", "/etc/resolv.conf");
      ::close(fd);
    }
  }
  g_ready_ms = BoottimeMillis();
  return chan;
}

}  // namespace skiff::agent
