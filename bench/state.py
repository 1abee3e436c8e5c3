"""State rows of bench/run (docs/snapshots.md): pause and resume in memory,
snapshot, create from a snapshot, fork, hibernate and wake — each backend
through a skiffd's HTTP API — beside the host doing the nearest thing
itself in the same run: the cgroup freezer written directly (pause), `cp -a`
of the same bytes between two tmpfs directories (snapshot), and a cold
create of the same image (create from a snapshot, fork, wake)."""
import http.client, json, os, shutil, signal, statistics, subprocess, tempfile, time

from ports import free_port

DATA_MIB = 16  # written into each sandbox before it is saved


class _Daemon:
    def __init__(self, build, isolation, tmp):
        self.port = free_port()
        cfg = os.path.join(tmp, f"{isolation}.yaml")
        with open(cfg, "w") as f:
            f.write(f"image_allowlist: [base]\nisolation: {isolation}\n"
                    f"snapshot_dir: {os.path.join(tmp, 'snapshots-' + isolation)}\n"
                    "snapshot_max_bytes: 68719476736\nsnapshot_max_count: 1000\n")
        self.log = open(os.path.join(tmp, f"{isolation}.log"), "w")
        self.proc = subprocess.Popen([os.path.join(build, "cmd", "skiff", "skiff"), "serve", "--port",
                                      str(self.port), "--config", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                if self._request("GET", "/healthz", None)[0] in (200, 503):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("skiffd did not start")

    def _request(self, method, path, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            c.request(method, path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def call(self, fn, payload):
        """(answer, ms); raises on anything but 200."""
        t0 = time.perf_counter()
        st, body = self._request("POST", "/v1/functions/" + fn, json.dumps(payload))
        ms = (time.perf_counter() - t0) * 1000
        if st != 200:
            raise RuntimeError(f"{fn}: {st} {body[:300]!r}")
        return json.loads(body), ms

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        self.log.close()


def _backend(build, isolation, runs, tmp):
    d = _Daemon(build, isolation, tmp)
    t = {k: [] for k in ("create", "pause_resume", "snapshot", "from_snapshot", "fork1", "hibernate", "wake")}
    try:
        shape = {"image": "base", "isolation": isolation, "memory_mb": 256}
        for i in range(runs + 1):  # the first is a warm-up
            keep = i > 0
            c, ms = d.call("sandbox::create", shape)
            if keep:
                t["create"].append(ms)
            sid = c["sandbox_id"]
            d.call("sandbox::exec", {"sandbox_id": sid,
                                     "argv": ["sh", "-c", f"head -c {DATA_MIB}M /dev/urandom > /root/data"]})
            _, a = d.call("sandbox::pause", {"sandbox_id": sid})
            _, b = d.call("sandbox::resume", {"sandbox_id": sid})
            snap, s = d.call("sandbox::snapshot", {"sandbox_id": sid})
            copy, f = d.call("sandbox::create", {"snapshot": snap["snapshot_id"]})
            forks, k = d.call("sandbox::fork", {"sandbox_id": sid, "count": 1})
            if keep:
                t["pause_resume"].append(a + b)
                t["snapshot"].append(s)
                t["from_snapshot"].append(f)
                t["fork1"].append(k)
            for x in [copy] + forks["sandboxes"]:
                d.call("sandbox::stop", {"sandbox_id": x["sandbox_id"], "wait": True})
            if isolation == "microvm":
                _, h = d.call("sandbox::pause", {"sandbox_id": sid, "mode": "disk"})
                _, w = d.call("sandbox::resume", {"sandbox_id": sid})
                if keep:
                    t["hibernate"].append(h)
                    t["wake"].append(w)
            d.call("sandbox::stop", {"sandbox_id": sid, "wait": True})
            d.call("sandbox::snapshot::delete", {"snapshot": snap["snapshot_id"]})
    finally:
        d.close()
    return {k: {"p50_ms": statistics.median(v), "n": len(v)} for k, v in t.items() if v}


def _cp_peer(runs, tmp):
    """`cp -a` of DATA_MIB MiB from one tmpfs directory to another."""
    src, dst = os.path.join(tmp, "cp-src"), os.path.join(tmp, "cp-dst")
    os.makedirs(src)
    with open(os.path.join(src, "data"), "wb") as f:
        f.write(os.urandom(DATA_MIB << 20))
    out = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run(["cp", "-a", src, dst], check=True)
        if i:
            out.append((time.perf_counter() - t0) * 1000)
        shutil.rmtree(dst)
    return statistics.median(out)


def _freezer_peer(runs):
    """A cgroup v1 freezer holding one sleeping process, frozen and thawed
    by hand: the kernel's part of a jail's pause and resume."""
    base = "/sys/fs/cgroup/freezer"
    if not os.path.isdir(base):
        return None
    cg = os.path.join(base, f"skiff-bench-{os.getpid()}")
    os.mkdir(cg)
    p = subprocess.Popen(["sleep", "600"])
    try:
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        out = []
        for i in range(runs + 1):
            t0 = time.perf_counter()
            for want in ("FROZEN", "THAWED"):
                with open(os.path.join(cg, "freezer.state"), "w") as f:
                    f.write(want)
                while open(os.path.join(cg, "freezer.state")).read().strip() != want:
                    time.sleep(0.0005)
            if i:
                out.append((time.perf_counter() - t0) * 1000)
        return statistics.median(out)
    finally:
        p.kill()
        p.wait()
        for _ in range(100):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.01)


def state_rows(build, runs, skip_vm):
    """Returns (result dict, markdown lines)."""
    res = {}
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        res["jail"] = _backend(build, "jail", runs, tmp)
        if not skip_vm:
            res["microvm"] = _backend(build, "microvm", max(3, runs // 3), tmp)
        res["peer"] = {"cp_a_ms": _cp_peer(runs, tmp), "freezer_ms": _freezer_peer(runs)}
    j, v, peer = res["jail"], res.get("microvm", {}), res["peer"]

    def cell(d, k):
        return f"{d[k]['p50_ms']:.1f}" if k in d else "—"

    fz = f"{peer['freezer_ms']:.2f} ms" if peer["freezer_ms"] is not None else "no v1 freezer"
    lines = ["", f"| state (HTTP, base, 256 MiB, {DATA_MIB} MiB written; p50 ms) | jail | microVM (TCG) "
             "| the host itself, same run |", "|---|---|---|---|",
             f"| create (cold, no pool) | {cell(j, 'create')} | {cell(v, 'create')} | |",
             f"| pause + resume in memory | {cell(j, 'pause_resume')} | {cell(v, 'pause_resume')} "
             f"| freezer FROZEN + THAWED by hand: {fz} |",
             f"| snapshot | {cell(j, 'snapshot')} | {cell(v, 'snapshot')} "
             f"| `cp -a` {DATA_MIB} MiB tmpfs → tmpfs: {peer['cp_a_ms']:.1f} ms |",
             f"| create from the snapshot | {cell(j, 'from_snapshot')} | {cell(v, 'from_snapshot')} "
             "| vs cold create, row 1 |",
             f"| fork × 1 (snapshot + create) | {cell(j, 'fork1')} | {cell(v, 'fork1')} | |",
             f"| hibernate (pause to disk) | n/a | {cell(v, 'hibernate')} | |",
             f"| wake from hibernation | n/a | {cell(v, 'wake')} | vs cold create, row 1 |"]
    return res, lines
