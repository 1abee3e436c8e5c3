"""E2B rows of bench/run: the unmodified e2b SDK (bench/e2b.mjs) against a
skiffd with a warm pool, on the jail: create + run + kill, and 100 MiB
written and read back beside a local write + read.
Alone: python3 bench/e2b.py [build dir]"""
import json, os, socket, subprocess, sys, tempfile, time

from ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_DIR = os.path.join(ROOT, "tests", "e2e", "node")


def e2b_rows(build, runs, template="base"):
    """Returns (result dict, markdown lines)."""
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "e2b")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True,
                       stdout=subprocess.DEVNULL)
    skiff = os.path.join(build, "cmd", "skiff", "skiff")
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "skiff.yaml")
        with open(cfg, "w") as f:
            f.write(f"image_allowlist: [{template}]\nisolation: jail\npool:\n  {template}: 2\n")
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
            time.sleep(2)  # the pool fills
            env = dict(os.environ, E2B_API_KEY="bench", E2B_API_URL=f"http://127.0.0.1:{port}/e2b",
                       E2B_SANDBOX_URL=f"http://127.0.0.1:{port}/e2b")
            p = subprocess.run(["node", os.path.join(ROOT, "bench", "e2b.mjs"), str(runs), template],
                               stdout=subprocess.PIPE, text=True, timeout=1800, env=env, cwd=NODE_DIR)
            if p.returncode != 0:
                raise RuntimeError(f"bench/e2b.mjs exited {p.returncode}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
        finally:
            d.terminate()
            d.wait(timeout=60)
            log.close()
    lines = ["", "| E2B SDK (jail, warm pool) | value | target |", "|---|---|---|",
             f"| `Sandbox.create` + `commands.run('echo hi')` + `kill`, p50 / p99 | {r['cycle_p50_ms']:.1f} / "
             f"{r['cycle_p99_ms']:.1f} ms | ≤ 30 ms p50 |",
             f"| 100 MiB `files.write` + `files.read` | {r['files_100mib_ms']:.0f} ms (local write + read "
             f"{r['local_100mib_ms']:.0f} ms, {r['files_100mib_ms'] / r['local_100mib_ms']:.1f}×) | |"]
    return r, lines


if __name__ == "__main__":
    args = sys.argv[1:]
    result, table = e2b_rows(args[0] if args else os.path.join(ROOT, "build", "release"), 30)
    print(json.dumps(result), file=sys.stderr)
    print("\n".join(table))
