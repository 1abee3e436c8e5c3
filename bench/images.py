#!/usr/bin/env python3
"""Image benchmarks: bench/images.py [--runs N] [--pull-mib N] [--rebuild-presets]

Also run by bench/run (its image section). Measures
  - preset build time and size: the build time the store recorded when the
    preset was built (image.json build_ms), rootfs and erofs sizes on disk;
    with --rebuild-presets each preset is rebuilt into a temporary store and
    timed (minutes each);
  - pull throughput from Debian's docker-registry on loopback for an image
    of one incompressible layer of --pull-mib MiB (download rate as skiff
    reports it, and the whole install: verify, unpack, erofs);
  - erofs vs ext4 block images of the `base` preset: size, build time and
    microVM boot time (QEMU start to the agent's HELLO), alternating, via
    skiff-block-boot-bench;
  - first-create latency through a daemon (jail): cold (the image must be
    imported from an archive or pulled from the registry first) against
    cached (already in the store).
Everything runs in temporary stores; the default store is only read.
"""
import argparse, hashlib, io, json, os, re, shutil, socket, statistics, subprocess, sys
import tarfile, tempfile, time

from ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SKIFF_BUILD_DIR", os.path.join(ROOT, "build", "release"))
SKIFF = os.path.join(BUILD, "cmd", "skiff", "skiff")
PRESETS = ("base", "python", "node")


def mib(n):
    return n / (1024 * 1024)


def du_bytes(path):
    out = subprocess.run(["du", "-s", "--block-size=1", path], stdout=subprocess.PIPE, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 else 0


def wait_port(port, seconds=20):
    end = time.time() + seconds
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tar_bytes(files):
    """An uncompressed tar of {path: (bytes, mode)} or {path: ("->", target)}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, (data, mode) in sorted(files.items()):
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if data == "->":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, mode, 0o777
                t.addfile(ti)
            elif data is None:
                ti.type, ti.mode = tarfile.DIRTYPE, mode
                t.addfile(ti)
            else:
                ti.size, ti.mode = len(data), mode
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def tiny_layer():
    """busybox (busybox-static) as sh and sleep: enough for a sandbox to run."""
    with open("/bin/busybox", "rb") as f:
        bb = f.read()
    files = {d: (None, 0o755) for d in ("bin", "etc", "tmp", "proc", "dev", "sys", "root")}
    files["bin/busybox"] = (bb, 0o755)
    files["bin/sh"] = ("->", "busybox")
    files["etc/passwd"] = (b"root:x:0:0:root:/root:/bin/sh\n", 0o644)
    return tar_bytes(files)


def oci_layout(path, layers, env):
    """Writes an OCI image layout with `layers` (uncompressed tars); returns the config digest."""
    os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)

    def blob(data, media):
        d = sha(data)
        with open(os.path.join(path, "blobs", "sha256", d), "wb") as f:
            f.write(data)
        return {"mediaType": media, "digest": "sha256:" + d, "size": len(data)}

    descs = [blob(l, "application/vnd.oci.image.layer.v1.tar") for l in layers]
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": env},
                         "rootfs": {"type": "layers",
                                    "diff_ids": ["sha256:" + sha(l) for l in layers]}}).encode()
    cd = blob(config, "application/vnd.oci.image.config.v1+json")
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": cd, "layers": descs}).encode()
    md = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    md["annotations"] = {"org.opencontainers.image.ref.name": "v1"}
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [md]}, f)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    return sha(config)


class Registry:
    """Debian's docker-registry on a loopback port, storage in `tmp`."""

    def __init__(self, tmp):
        self.port = free_port()
        cfg = os.path.join(tmp, "registry.yml")
        with open(cfg, "w") as f:
            f.write(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                    f"    rootdirectory: {tmp}/registry\nhttp:\n  addr: 127.0.0.1:{self.port}\n")
        self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        if not wait_port(self.port):
            self.close()
            raise RuntimeError("docker-registry did not start")

    def push(self, layout, name):
        ref = f"127.0.0.1:{self.port}/bench/{name}:v1"
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"oci:{layout}:v1",
                        f"docker://{ref}"], check=True)
        return ref

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def preset_rows(rebuild):
    rows, res = [], {}
    for p in PRESETS:
        if rebuild:
            with tempfile.TemporaryDirectory(prefix="skiff-bench-images.") as tmp:
                os.chmod(tmp, 0o711)
                env = dict(os.environ, SKIFF_IMAGES_DIR=tmp)
                t0 = time.perf_counter()
                r = subprocess.run([SKIFF, "image", "build", p], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
                secs = time.perf_counter() - t0
                if r.returncode != 0:
                    res[p] = {"error": "build failed"}
                    continue
                info = json.loads(subprocess.run([SKIFF, "image", "inspect", p], env=env,
                                                 stdout=subprocess.PIPE, text=True).stdout)
                res[p] = measure_preset(info, secs, "rebuilt now")
        else:
            r = subprocess.run([SKIFF, "image", "inspect", p], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
            if r.returncode != 0:
                res[p] = {"error": "not installed (scripts/build-image " + p + ")"}
                continue
            info = json.loads(r.stdout)
            res[p] = measure_preset(info, info["build_ms"] / 1000, "recorded at build")
    rows += ["", "| preset | build time | how | rootfs MiB (allocated) | erofs MiB | built |",
             "|---|---|---|---|---|---|"]
    for p, v in res.items():
        if "error" in v:
            rows.append(f"| `{p}` | {v['error']} | | | | |")
        else:
            rows.append(f"| `{p}` | {v['build_s']:.0f} s | {v['how']} | {v['rootfs_mib']:.0f} "
                        f"| {v['erofs_mib']:.0f} | {v['created_at'][:10]} |")
    return res, rows


def measure_preset(info, secs, how):
    rootfs = info["rootfs"]
    erofs = os.path.join(os.path.dirname(rootfs), "rootfs.erofs")
    return {"build_s": secs, "how": how, "rootfs_mib": mib(du_bytes(rootfs)),
            "erofs_mib": mib(os.path.getsize(erofs)) if os.path.exists(erofs) else 0.0,
            "created_at": info.get("created_at", "")}


def block_rows(runs):
    exe = os.path.join(BUILD, "bench", "skiff-block-boot-bench")
    p = subprocess.run([exe, "--image", "base", "--runs", str(runs)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode not in (0, 3):
        raise RuntimeError(f"skiff-block-boot-bench exited {p.returncode}: {p.stderr[-300:]}")
    r = json.loads(p.stdout)

    def boot(fs):
        v = r[fs]
        if "boot_ms_median" not in v:
            return "not measured: " + r.get("boot_error", "no boot succeeded")[:120]
        return f"{v['boot_ms_median']:.0f} ms ({v['boot_ms_min']:.0f}–{v['boot_ms_max']:.0f})"

    rows = ["", "| block image of `base` | size (apparent / allocated) | build | microVM boot "
                f"median (min–max), {runs} runs alternating |", "|---|---|---|---|"]
    for fs, label in (("erofs", "erofs lz4hc"), ("ext4", "ext4, no journal")):
        v = r[fs]
        rows.append(f"| {label} | {v['apparent_mib']:.0f} / {v['allocated_mib']:.0f} MiB "
                    f"| {v['build_ms'] / 1000:.1f} s | {boot(fs)} |")
    return r, rows


def pull_rows(reg, tmp, size_mib, runs):
    layout = os.path.join(tmp, "big-layout")
    big = os.urandom(size_mib << 20)  # incompressible
    oci_layout(layout, [tiny_layer(), tar_bytes({"data/big": (big, 0o644)})], ["PATH=/bin"])
    ref = reg.push(layout, "big")
    rates, installs = [], []
    for i in range(runs):
        store = os.path.join(tmp, f"pull-store-{i}")
        env = dict(os.environ, SKIFF_IMAGES_DIR=store)
        t0 = time.perf_counter()
        r = subprocess.run([SKIFF, "image", "pull", "big", ref], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        installs.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError("skiff image pull failed: " + r.stderr[-300:])
        m = re.search(r"downloaded (\d+) bytes in (\d+) ms", r.stderr)
        if m:
            rates.append(mib(int(m.group(1))) / (max(int(m.group(2)), 1) / 1000))
        shutil.rmtree(store, ignore_errors=True)
    res = {"size_mib": size_mib, "runs": runs, "download_mib_s": statistics.median(rates),
           "install_s": statistics.median(installs)}
    rows = ["", f"| pull from loopback docker-registry ({size_mib} MiB incompressible layer + "
                f"busybox layer, gzip by skopeo), median of {runs} | value |", "|---|---|",
            f"| download + digest check | {res['download_mib_s']:.0f} MiB/s |",
            f"| whole `skiff image pull` (download, diff_id check, unpack, erofs) | "
            f"{res['install_s']:.1f} s ({size_mib / res['install_s']:.0f} MiB/s) |"]
    return ref, res, rows


def first_create_rows(tmp, archive, pull_ref, runs):
    store = os.path.join(tmp, "daemon-store")
    cfg = os.path.join(tmp, "skiff.yaml")
    images = {"arch": archive}
    if pull_ref:
        images["reg"] = pull_ref
    with open(cfg, "w") as f:
        f.write("isolation: jail\nauto_install: true\n")
        f.write(f"images_dir: {store}\nimage_allowlist: [{', '.join(images)}]\ncustom_images:\n")
        for k, v in images.items():
            f.write(f"  {k}: {v}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "skiffd.log"), "w")
    d = subprocess.Popen([SKIFF, "serve", "--port", str(port), "--config", cfg], stdout=log,
                         stderr=subprocess.STDOUT)
    res = {}
    try:
        if not wait_port(port):
            raise RuntimeError("skiffd did not start")

        def create(name):
            t0 = time.perf_counter()
            r = subprocess.run([SKIFF, "create", "--url", url, name], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            dt = (time.perf_counter() - t0) * 1000
            if r.returncode != 0:
                raise RuntimeError(f"skiff create {name}: {r.stderr[-300:]}")
            subprocess.run([SKIFF, "stop", "--url", url, r.stdout.strip()], check=True,
                           stdout=subprocess.DEVNULL)
            return dt

        for name in images:
            cold, warm = [], []
            for _ in range(runs):
                subprocess.run([SKIFF, "image", "--config", cfg, "rm", name],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                cold.append(create(name))
                warm.append(create(name))
            res[name] = {"cold_ms": statistics.median(cold), "cached_ms": statistics.median(warm)}
    finally:
        d.terminate()
        d.wait(timeout=60)
        log.close()
    what = {"arch": "archive import (busybox, 1 layer)", "reg": "registry pull (see pull row)"}
    rows = ["", f"| first create through the daemon (jail), median of {runs} | cold: image not in "
                "the store | cached | ", "|---|---|---|"]
    for name, v in res.items():
        rows.append(f"| {what[name]} | {v['cold_ms']:.0f} ms | {v['cached_ms']:.0f} ms |")
    return res, rows


def image_rows(runs=3, pull_mib=64, rebuild_presets=False):
    """The image section of bench/run: (result dict, markdown lines)."""
    res, lines = {}, []
    res["presets"], rows = preset_rows(rebuild_presets)
    lines += rows
    try:
        res["block"], rows = block_rows(runs)
        lines += rows
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        lines.append(f"\nblock image benchmark failed: {e}")
    with tempfile.TemporaryDirectory(prefix="skiff-bench-images.") as tmp:
        os.chmod(tmp, 0o711)  # the jail's ids traverse to the stores inside
        archive = os.path.join(tmp, "tiny-layout")
        oci_layout(archive, [tiny_layer()], ["PATH=/bin"])
        archive_tar = os.path.join(tmp, "tiny.tar")
        subprocess.run(["tar", "-C", archive, "-cf", archive_tar, "."], check=True)
        reg, ref = None, None
        if shutil.which("docker-registry") and shutil.which("skopeo"):
            reg = Registry(tmp)
        try:
            if reg:
                ref, res["pull"], rows = pull_rows(reg, tmp, pull_mib, runs)
                lines += rows
            else:
                lines.append("\npull: needs docker-registry and skopeo")
            res["first_create"], rows = first_create_rows(tmp, archive_tar, ref, runs)
            lines += rows
        finally:
            if reg:
                reg.close()
    return res, lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pull-mib", type=int, default=64)
    ap.add_argument("--rebuild-presets", action="store_true",
                    help="time a fresh build of each preset into a temporary store (minutes each)")
    a = ap.parse_args()
    res, lines = image_rows(a.runs, a.pull_mib, a.rebuild_presets)
    print("\n".join(lines))
    json.dump(res, sys.stderr, indent=2)


if __name__ == "__main__":
    sys.exit(main())
