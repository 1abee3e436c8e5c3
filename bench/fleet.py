"""Fleet rows for bench/run (docs/multihost.md): on this machine, the engine
double, jail hosts (`skiff serve --iii-namespace skiff.hN`, each with its own
data directory and configuration) and a router (`skiff route`), driven by
bench/fleet.mjs through the unmodified iii-sdk.

  1. sandbox::run, sandbox::exec and fs::read routed against direct (one host);
  2. create + stop cycles per second through the router, one host against
     three, same per-host cap;
  3. how long the router takes to notice a SIGKILLed host (S301 for its
     sandboxes; left out of placement) and a SIGSTOPped one (a stand-in for
     a partition: connected, answering nothing).

Every process started here is stopped and the temporary directory removed,
also when a step fails. Usable alone: python3 bench/fleet.py [--runs N]
"""
import json, os, shutil, signal, statistics, subprocess, tempfile, time, urllib.request

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NODE_DIR = os.path.join(ROOT, "tests", "e2e", "node")
CAP = 4             # max_concurrent_sandboxes of every host
PROBE_MS = 200      # skiff route --probe-ms
DEADLINE_MS = 1000  # skiff route --probe-deadline-ms
CREATE_SECONDS = 8  # per creates-per-second measurement
KILL_REPS = 5       # per kill measurement (s301, placement)
STOP_REPS = 3       # SIGSTOP repetitions
KILL_POLL_MS = 5    # spacing of the polls after a SIGKILL
STOP_POLL_MS = 10   # after a SIGSTOP (each poll then waits out the probe deadline)


class Fleet:
    """The processes of one fleet on this machine, all under one temporary
    directory. close() stops them (SIGCONT first, for a stopped one; SIGTERM,
    then SIGKILL after 30 s) and removes the directory."""

    def __init__(self, skiff, double):
        self.skiff, self.double = skiff, double
        self.tmp = tempfile.mkdtemp(prefix="skiff-bench-fleet-")
        self.procs = []  # every Popen ever started, in order
        self.hosts = {}  # name -> (Popen, http port)
        self.router = None
        self.engine_port = None

    def _start(self, name, argv, env=None):
        log = open(os.path.join(self.tmp, f"{name}.log"), "a")
        try:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**os.environ, **(env or {})}, start_new_session=True)
        finally:
            log.close()
        self.procs.append(p)
        return p

    def log(self, name):
        try:
            with open(os.path.join(self.tmp, f"{name}.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _wait(self, what, fn, seconds=60, proc=None):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            v = fn()
            if v:
                return v
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{what}: the process exited {proc.returncode}")
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}")

    def start_engine(self):
        p = self._start("engine", [self.double, "--port", "0"])

        def port():
            for line in self.log("engine").splitlines():
                if line.startswith("listening "):
                    return int(line.split()[1])
            return None
        self.engine_port = self._wait("the engine double", port, proc=p)

    def start_host(self, name):
        port = free_port()
        cfg = os.path.join(self.tmp, f"{name}.yaml")
        with open(cfg, "w") as f:
            f.write(f"image_allowlist: [host]\nisolation: jail\nmax_concurrent_sandboxes: {CAP}\n")
        p = self._start(name, [self.skiff, "serve", "--port", str(port), "--config", cfg,
                               "--engine", f"ws://127.0.0.1:{self.engine_port}",
                               "--iii-namespace", f"skiff.{name}"],
                        {"XDG_DATA_HOME": os.path.join(self.tmp, f"data-{name}")})

        def up():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        self._wait(f"host {name} to listen", up, proc=p)
        self.hosts[name] = (p, port)

    def start_router(self):
        self.router = self._start("router", [self.skiff, "route", "--engine",
                                             f"ws://127.0.0.1:{self.engine_port}",
                                             "--probe-ms", str(PROBE_MS),
                                             "--probe-deadline-ms", str(DEADLINE_MS)],
                                  {"SKIFF_LOG": "info"})

    def drive(self, *args, timeout=300):
        """Runs bench/fleet.mjs with these arguments; returns its JSON line."""
        argv = ["node", os.path.join(HERE, "fleet.mjs"), args[0], str(self.engine_port)] + [str(a) for a in args[1:]]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise RuntimeError(f"bench/fleet.mjs {args[0]} took over {timeout} s")
        if p.returncode != 0:
            last = (err.strip().splitlines() or [""])[-1]
            raise RuntimeError(f"bench/fleet.mjs {args[0]} exited {p.returncode}: {last[:600]}")
        # The SDK logs to stdout too: take our one JSON line.
        return json.loads(next(l for l in out.splitlines() if l.startswith('{"mode"')))

    def close(self):
        live = [p for p in self.procs if p.poll() is None]
        for p in live:
            try:
                os.kill(p.pid, signal.SIGCONT)  # a stopped host would never see SIGTERM
                p.terminate()
            except ProcessLookupError:
                pass
        end = time.monotonic() + 30
        for p in live:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _med(v):
    return statistics.median(v) if v else float("nan")


def fleet_rows(build, runs):
    """Returns (result dict, markdown lines)."""
    skiff = os.path.join(build, "cmd", "skiff", "skiff")
    double = os.path.join(build, "tests", "e2e", "engine-double")
    for b in (skiff, double):
        if not os.access(b, os.X_OK):
            raise RuntimeError(f"{b} is missing (build it first)")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "iii-sdk")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True,
                       stdout=subprocess.DEVNULL)
    res = {"cap": CAP, "probe_ms": PROBE_MS, "probe_deadline_ms": DEADLINE_MS, "cores": os.cpu_count(),
           "loadavg_before": os.getloadavg()}
    built = [os.stat(b).st_mtime_ns for b in (skiff, double)]

    def on_term(signum, frame):  # SIGTERM too ends in close() below
        raise SystemExit(128 + signum)
    old_term = signal.signal(signal.SIGTERM, on_term)
    fl = Fleet(skiff, double)
    try:
        fl.start_engine()
        fl.start_host("h1")
        fl.start_router()
        # 1. routed against direct, one host (so both reach the same one).
        # A run takes ~20 ms with a spread of tens: it needs hundreds of rounds to resolve 1 ms.
        res["latency"] = fl.drive("latency", max(10 * runs, 300), max(20 * runs, 600), "skiff.h1",
                                  fl.hosts["h1"][1])
        # 2. creates per second: one host, then three.
        res["creates"] = []
        callers = (CAP, 3 * CAP)
        for c in callers:
            res["creates"].append(fl.drive("creates", c, CREATE_SECONDS, 1))
        fl.start_host("h2")
        fl.start_host("h3")
        for c in callers:
            res["creates"].append(fl.drive("creates", c, CREATE_SECONDS, 3))
        # 3. detection: SIGKILL of h3 (restarted after each), then SIGSTOP.
        res["kill"] = {"s301": [], "placement": []}
        for what in ("s301", "placement"):
            for _ in range(KILL_REPS):
                p = fl.hosts["h3"][0]
                res["kill"][what].append(fl.drive("kill", 3, "skiff.h3", p.pid, what, KILL_POLL_MS))
                p.wait(timeout=30)
                fl.start_host("h3")  # same namespace and data: cleans up what the killed one left
        res["partition"] = []
        for _ in range(STOP_REPS):
            res["partition"].append(fl.drive("partition", 3, "skiff.h3", fl.hosts["h3"][0].pid, STOP_POLL_MS))
    except Exception as e:
        raise RuntimeError(f"{e}; router log tail: {fl.log('router')[-800:]}") from e
    finally:
        fl.close()
        signal.signal(signal.SIGTERM, old_term)
    res["loadavg_after"] = os.getloadavg()
    if [os.stat(b).st_mtime_ns for b in (skiff, double)] != built:
        raise RuntimeError("a binary was rebuilt during the run (hosts restarted later ran the new one); run again")

    lat = res["latency"]
    lines = ["", f"| fleet: routed vs direct (jail, `host`, one host, engine double, interleaved) | calls "
             "| routed p50 / p99 ms | direct in the host's namespace p50 / p99 ms | host HTTP p50 / p99 ms "
             "| added p50 ms (routed − direct; median of paired rounds) |", "|---|---|---|---|---|---|"]
    for fid, label in (("sandbox::run", "`sandbox::run` `sh`, `true`"), ("sandbox::exec", "`sandbox::exec` `true`"),
                       ("sandbox::fs::read", "`sandbox::fs::read` 1 MiB, all bytes read (HTTP: the download)")):
        r = lat[fid]
        lines.append(f"| {label} | {r['routed']['n']} | {r['routed']['p50_ms']:.2f} / {r['routed']['p99_ms']:.2f} "
                     f"| {r['direct']['p50_ms']:.2f} / {r['direct']['p99_ms']:.2f} "
                     f"| {r['http']['p50_ms']:.2f} / {r['http']['p99_ms']:.2f} "
                     f"| {r['routed']['p50_ms'] - r['direct']['p50_ms']:+.2f}; {r['paired_added_p50_ms']:+.2f} |")
    lines += ["", f"| fleet: create + stop through the router (cap {CAP} per host) | hosts | cycles/s "
              "| create p50 / p99 ms | S400 answers | spread |", "|---|---|---|---|---|---|"]
    for c in res["creates"]:
        spread = ", ".join(f"{k.removeprefix('skiff.')} {v}" for k, v in sorted(c["per_host"].items()))
        err = f" ({len(c['errors'])} errors)" if c["errors"] else ""
        lines.append(f"| {c['callers']} callers, {c['seconds']:.1f} s | {c['hosts']} | {c['per_sec']:.1f}{err} "
                     f"| {c['create']['p50_ms']:.1f} / {c['create']['p99_ms']:.1f} | {c['refused']} | {spread} |")
    k301 = [r["ms"] for r in res["kill"]["s301"]]
    kpl = [r["ms"] for r in res["kill"]["placement"]]
    stp = [r["ms"] for r in res["partition"]]
    back = [r["back_ms"] for r in res["partition"] if r["back_ms"] is not None]
    wrong = sum(r["creates_on_victim"] for r in res["partition"])
    res["summary"] = {"kill_s301_median_ms": _med(k301), "kill_placement_median_ms": _med(kpl),
                      "partition_median_ms": _med(stp), "partition_back_median_ms": _med(back)}
    fmt = lambda v: ", ".join(f"{x:.0f}" for x in v)  # noqa: E731
    lines += ["", f"| fleet: detection (`--probe-ms {PROBE_MS} --probe-deadline-ms {DEADLINE_MS}`) "
              "| median ms | runs (ms) |", "|---|---|---|",
              f"| SIGKILL → a call to a sandbox on it answered S301 | {_med(k301):.0f} "
              f"| {fmt(k301)} (S301 on call {', '.join(str(r['polls']) for r in res['kill']['s301'])}) |",
              f"| SIGKILL → left out of placement (polled every {KILL_POLL_MS} ms) | {_med(kpl):.0f} | {fmt(kpl)} |",
              f"| SIGSTOP → left out of placement (polled every {STOP_POLL_MS} ms) | {_med(stp):.0f} | {fmt(stp)} |",
              f"| SIGCONT → placed on again (polled every {STOP_POLL_MS} ms) | {_med(back):.0f} | {fmt(back)} |",
              f"| creates placed on the stopped host after detection | {wrong} of "
              f"{sum(r['creates'] for r in res['partition'])} | |"]
    return res, lines


if __name__ == "__main__":
    import argparse, sys
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    build = os.environ.get("SKIFF_BUILD_DIR", os.path.join(ROOT, "build", "release"))
    r, l = fleet_rows(build, a.runs)
    print(json.dumps(r))
    print("\n".join(l))
    sys.exit(0)
