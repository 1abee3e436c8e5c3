"""Daemon rows for bench/run: the library call against the same call over
HTTP to skiffd's server (bench/daemon_bench.cc), 32 concurrent HTTP clients,
and sandbox::run with a warm pool against a cold one."""
import json, os, subprocess


def daemon_rows(build, runs):
    """Runs skiff-daemon-bench; returns (result dict, markdown lines)."""
    argv = [os.path.join(build, "bench", "skiff-daemon-bench"), "--runs", str(max(runs, 50)),
            "--execs", str(max(10 * runs, 300)), "--clients", "32", "--per-client", "50", "--pool", "2"]
    p = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"skiff-daemon-bench exited {p.returncode}")
    r = json.loads(p.stdout.strip().splitlines()[-1])

    def row(name, d):
        lib, http = d["lib"], d["http"]
        return (f"| {name} | {lib['n']} | {lib['p50_ms']:.2f} / {lib['p99_ms']:.2f} "
                f"| {http['p50_ms']:.2f} / {http['p99_ms']:.2f} "
                f"| {http['p50_ms'] - lib['p50_ms']:+.2f} / {http['p99_ms'] - lib['p99_ms']:+.2f} |")

    lines = ["", "| daemon (jail, `host`, interleaved) | calls | library p50 / p99 ms "
             "| HTTP p50 / p99 ms | overhead p50 / p99 ms |", "|---|---|---|---|---|",
             row("sandbox::run `sh -c true`, cold (no pool)", r["run_cold"]),
             row("sandbox::exec `/bin/true` round trip", r["exec"])]
    if "run_pooled" in r:
        lines.append(row("sandbox::run `sh -c true`, warm pool (2)", r["run_pooled"]))
    c = r["concurrent"]
    lines += ["", "| daemon under load (HTTP, jail) | value |", "|---|---|",
              f"| {c['clients']} concurrent clients × exec `/bin/true` | {c['calls']} calls, "
              f"{c['errors']} errors, {c['calls_per_sec']:.0f} calls/s, "
              f"p50 / p99 {c['latency']['p50_ms']:.1f} / {c['latency']['p99_ms']:.1f} ms |"]
    if "run_pooled_sustained" in r:
        s = r["run_pooled_sustained"]
        cold = r["run_cold"]["http"]["p50_ms"]
        warm = r["run_pooled"]["http"]["p50_ms"]
        lines += [f"| run, warm pool vs cold, HTTP p50 | {warm:.2f} ms vs {cold:.2f} ms "
                  f"({cold / warm:.2f}× faster) |",
                  f"| run back to back, pool of {s['pool']} | {s['runs_per_sec']:.1f} runs/s, "
                  f"{s['hits']} hits / {s['misses']} misses, p50 / p99 "
                  f"{s['latency']['p50_ms']:.1f} / {s['latency']['p99_ms']:.1f} ms |"]
    return r, lines
