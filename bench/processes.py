"""Live-process rows of bench/run: output latency and streamed throughput
(skiff-process-bench, the library's path to an agent) beside a local pipe in
the same run, memory per idle background process, and PTY keystroke echo
through the WebSocket attach route (bench/pty_echo.mjs against a skiffd)."""
import json, os, socket, subprocess, tempfile, time

from ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pty_echo(build, runs, image, isolation):
    skiff = os.path.join(build, "cmd", "skiff", "skiff")
    node_dir = os.path.join(ROOT, "tests", "e2e", "node")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "ws")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=node_dir, check=True,
                       stdout=subprocess.DEVNULL)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "skiff.yaml")
        with open(cfg, "w") as f:
            f.write(f"image_allowlist: [{image}]\nisolation: {isolation}\n")
        log = open(os.path.join(tmp, "skiffd.log"), "w")
        d = subprocess.Popen([skiff, "serve", "--port", str(port), "--config", cfg],
                             stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            p = subprocess.run(["node", os.path.join(ROOT, "bench", "pty_echo.mjs"), str(port), str(runs),
                                image, isolation], stdout=subprocess.PIPE, text=True, timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"bench/pty_echo.mjs exited {p.returncode}")
            return json.loads(p.stdout.strip().splitlines()[-1])
        finally:
            d.terminate()
            d.wait(timeout=60)
            log.close()


def process_rows(build, runs, skip_vm):
    """Returns (result dict, markdown lines)."""
    res = {}
    backends = [("jail", "host")] + ([] if skip_vm else [("microvm", "base")])
    for iso, image in backends:
        p = subprocess.run([os.path.join(build, "bench", "skiff-process-bench"), "--isolation", iso,
                            "--image", image], stdout=subprocess.PIPE, text=True, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"skiff-process-bench ({iso}) exited {p.returncode}")
        res[iso] = json.loads(p.stdout.strip().splitlines()[-1])
        res[iso]["pty_echo"] = _pty_echo(build, max(runs, 100), image, iso)
    lines = ["", "| live processes | jail | target | microVM (TCG) |", "|---|---|---|---|"]
    j, v = res["jail"], res.get("microvm")

    def vm(f):
        return f(v) if v else "not run"
    lines.append(f"| output latency p50 / p99 (write → caller) | {j['output_latency_us_p50']/1000:.2f} / "
                 f"{j['output_latency_us_p99']/1000:.2f} ms | ≤ 1 ms p50 | not measured (the guest's clock is its own) |")
    lines.append(f"| 1 GiB streamed (`head -c 1G /dev/zero`), median of {j.get('stream_runs', 1)} | {j['stream_mib_s']:.0f} MiB/s, "
                 f"{j['stream_mib_s']/j['pipe_mib_s']*100:.0f} % of a local pipe ({j['pipe_mib_s']:.0f} MiB/s); "
                 f"{j['stream_lost_bytes']} bytes lost | ≥ 50 % of a pipe | "
                 + vm(lambda x: f"{x['stream_mib_s']:.0f} MiB/s, {x['stream_lost_bytes']} bytes lost") + " |")
    lines.append(f"| PTY keystroke echo through the WebSocket, p50 / p99 | {j['pty_echo']['p50_ms']:.2f} / "
                 f"{j['pty_echo']['p99_ms']:.2f} ms | ≤ 2 ms p50 | "
                 + vm(lambda x: f"{x['pty_echo']['p50_ms']:.2f} / {x['pty_echo']['p99_ms']:.2f} ms") + " |")
    lines.append(f"| memory per idle background process: daemon / agent | {j['daemon_kib_per_idle_process']:.1f} / "
                 f"{j['agent_kib_per_idle_process']:.1f} KiB | | "
                 + vm(lambda x: f"{x['daemon_kib_per_idle_process']:.1f} KiB / in guest memory") + " |")
    return res, lines


if __name__ == "__main__":
    # The live-process rows alone: python3 bench/processes.py [--skip-vm] [build dir]
    import sys
    args = [a for a in sys.argv[1:] if a != "--skip-vm"]
    build_dir = args[0] if args else os.path.join(ROOT, "build", "release")
    result, table = process_rows(build_dir, 15, "--skip-vm" in sys.argv[1:])
    print(json.dumps(result), file=sys.stderr)
    print("\n".join(table))
