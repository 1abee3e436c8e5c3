#!/usr/bin/python3
"""skiff's code-interpreter server: the in-sandbox end of E2B's runCode.

Listens on 127.0.0.1:49999 (loopback only) and speaks the wire protocol of
@e2b/code-interpreter (docs/e2b.md#code-interpreter):

  POST   /execute               {code, context_id?, language?, env_vars?}
                                -> 200, one JSON object per line, streamed
  POST   /contexts              {language?, cwd?} -> {id, language, cwd}
  GET    /contexts              -> [{id, language, cwd}, ...]
  DELETE /contexts/{id}         -> 204
  POST   /contexts/{id}/restart -> 204
  GET    /health                -> 200 {"status": "ok", "kernel": K}, K the
                                state of the default python kernel, which
                                starts with the server: starting|ready|failed

Every context is one Jupyter kernel (jupyter_client.KernelManager), so
variables survive between executions. Paths may carry an "/e2b" prefix and
a query string; both are ignored.

  code_interpreter.py [--port N]      serve
  code_interpreter.py --wait SECS     exit 0 once a server answers /health
                                      and its default kernel is no longer
                                      starting (the readiness check)
"""

import argparse
import http.server
import json
import os
import queue
import select
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.request
import uuid

DEFAULT_PORT = 49999
# Languages and the kernels that run them. Only kernels Debian ships.
KERNELS = {"python": "python3"}
ALIASES = {"python3": "python", "py": "python"}
# Jupyter MIME type -> the field of a "result" line.
MIME_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}
MAX_BODY = 8 << 20


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def now_iso():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int((t % 1) * 1e6)


def language_of(name):
    lang = (name or "python").strip().lower()
    lang = ALIASES.get(lang, lang)
    if lang not in KERNELS:
        raise HttpError(400, "language '%s' is not supported (supported: %s)" % (name, ", ".join(sorted(KERNELS))))
    return lang


class Context:
    """One kernel. `lock` serialises executions: a kernel runs one cell at a time."""

    def __init__(self, language, cwd):
        from jupyter_client import KernelManager

        self.id = uuid.uuid4().hex
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        env = dict(os.environ)
        # plt.show() and a figure left at the end of a cell come out as
        # display_data image/png.
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        env.setdefault("PYTHONUNBUFFERED", "1")
        # ipykernel's debugger warns on every kernel start without it.
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        self.km = KernelManager(kernel_name=KERNELS[language])
        self.km.start_kernel(cwd=cwd, env=env)
        self.kc = None
        self._connect()

    def _connect(self):
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=60)
        except RuntimeError as e:
            raise HttpError(500, "kernel did not start: %s" % e)

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def restart(self):
        with self.lock:
            self.kc.stop_channels()
            self.km.restart_kernel(now=True)
            self._connect()

    def shutdown(self):
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)

    def _run_silent(self, code):
        """Runs setup code (env vars) without output or history."""
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        while True:
            reply = self.kc.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"].get("status") == "ok"

    def execute(self, code, env_vars, emit, interrupted):
        """Runs `code`, calling emit(dict) for each output line. `interrupted()`
        says the caller went away: the kernel is then interrupted."""
        with self.lock:
            restore = None
            if env_vars:
                restore = "_skiff_saved_env"
                setup = (
                    "import os as _skiff_os, json as _skiff_json\n"
                    "_skiff_new = _skiff_json.loads(%r)\n"
                    "_skiff_saved_env = {k: _skiff_os.environ.get(k) for k in _skiff_new}\n"
                    "_skiff_os.environ.update(_skiff_new)\n"
                    "del _skiff_new\n" % json.dumps(env_vars)
                )
                if not self._run_silent(setup):
                    raise HttpError(500, "could not apply env_vars")
            try:
                self._execute(code, emit, interrupted)
            finally:
                if restore:
                    self._run_silent(
                        "for _k, _v in _skiff_saved_env.items():\n"
                        "    (_skiff_os.environ.pop(_k, None) if _v is None"
                        " else _skiff_os.environ.__setitem__(_k, _v))\n"
                        "del _skiff_saved_env, _k, _v\n"
                    )

    def _execute(self, code, emit, interrupted):
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False)
        idle = False
        while not idle:
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                if interrupted():
                    self.km.interrupt_kernel()
                if not self.km.is_alive():
                    emit({"type": "error", "name": "KernelDied", "value": "the kernel died", "traceback": ""})
                    break
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            content = msg["content"]
            if kind == "stream":
                emit({"type": content.get("name", "stdout"), "text": content.get("text", ""), "timestamp": now_iso()})
            elif kind in ("execute_result", "display_data"):
                line = {"type": "result", "is_main_result": kind == "execute_result"}
                extra = {}
                for mime, value in content.get("data", {}).items():
                    field = MIME_FIELDS.get(mime)
                    if field:
                        line[field] = value
                    else:
                        extra[mime] = value
                if extra:
                    line["extra"] = extra
                emit(line)
            elif kind == "error":
                emit(
                    {
                        "type": "error",
                        "name": content.get("ename", ""),
                        "value": content.get("evalue", ""),
                        "traceback": "\n".join(content.get("traceback", [])),
                    }
                )
            elif kind == "execute_input":
                emit({"type": "number_of_executions", "execution_count": content.get("execution_count", 0)})
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
        # Drain the shell reply so the next execution does not read it.
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                reply = self.kc.get_shell_msg(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if reply["parent_header"].get("msg_id") == msg_id:
                break


class Contexts:
    def __init__(self, default_cwd):
        self.default_cwd = default_cwd
        self.mu = threading.Lock()
        self.by_id = {}
        self.defaults = {}  # language -> context id
        self.default_starting = threading.Lock()

    def create(self, language, cwd):
        ctx = Context(language, cwd or self.default_cwd)
        with self.mu:
            self.by_id[ctx.id] = ctx
        return ctx

    def get(self, cid):
        with self.mu:
            ctx = self.by_id.get(cid)
        if ctx is None:
            raise HttpError(404, "context '%s' not found" % cid)
        return ctx

    def default(self, language):
        with self.default_starting:
            with self.mu:
                cid = self.defaults.get(language)
                if cid in self.by_id:
                    return self.by_id[cid]
            ctx = self.create(language, None)
            with self.mu:
                self.defaults[language] = ctx.id
            return ctx

    def list(self):
        with self.mu:
            return [c.describe() for c in self.by_id.values()]

    def remove(self, cid):
        with self.mu:
            ctx = self.by_id.pop(cid, None)
        if ctx is None:
            raise HttpError(404, "context '%s' not found" % cid)
        ctx.shutdown()

    def shutdown_all(self):
        with self.mu:
            all_ = list(self.by_id.values())
            self.by_id.clear()
        for ctx in all_:
            try:
                ctx.shutdown()
            except Exception:
                pass


CONTEXTS = None
WARM = {"state": "starting"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "skiff-code-interpreter"

    def log_message(self, fmt, *args):
        sys.stderr.write("code-interpreter: %s %s\n" % (self.address_string(), fmt % args))

    def _path(self):
        path = self.path.split("?", 1)[0]
        if path.startswith("/e2b/"):
            path = path[4:]
        return path.rstrip("/") or "/"

    def _read_chunked(self):
        raw = b""
        while True:
            size = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return raw
            if len(raw) + size > MAX_BODY:
                raise HttpError(413, "body larger than %d bytes" % MAX_BODY)
            raw += self.rfile.read(size)
            self.rfile.readline(8)

    def _body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            try:
                raw = self._read_chunked()
            except ValueError:
                raise HttpError(400, "malformed chunked body")
        else:
            try:
                n = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                raise HttpError(400, "malformed Content-Length")
            if n > MAX_BODY or n < 0:
                raise HttpError(413, "body larger than %d bytes" % MAX_BODY)
            raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise HttpError(400, "body is not JSON: %s" % e)
        if not isinstance(body, dict):
            raise HttpError(400, "body must be a JSON object")
        return body

    def _send(self, status, payload=None):
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _dispatch(self, method):
        try:
            path = self._path()
            parts = [p for p in path.split("/") if p]
            if method == "GET" and parts == ["health"]:
                return self._send(200, {"status": "ok", "kernel": WARM["state"]})
            if method == "POST" and parts == ["execute"]:
                return self._execute(self._body())
            if parts[:1] == ["contexts"]:
                if method == "GET" and len(parts) == 1:
                    return self._send(200, CONTEXTS.list())
                if method == "POST" and len(parts) == 1:
                    body = self._body()
                    cwd = body.get("cwd")
                    if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/")):
                        raise HttpError(400, "cwd: expected an absolute path")
                    ctx = CONTEXTS.create(language_of(body.get("language")), cwd)
                    return self._send(200, ctx.describe())
                if method == "DELETE" and len(parts) == 2:
                    CONTEXTS.remove(parts[1])
                    return self._send(204)
                if method == "POST" and len(parts) == 3 and parts[2] == "restart":
                    CONTEXTS.get(parts[1]).restart()
                    return self._send(204)
            raise HttpError(404, "no route %s %s" % (method, path))
        except HttpError as e:
            self._send(e.status, {"error": e.message})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # a bug or a kernel failure: say so, keep serving
            self._send(500, {"error": "%s: %s" % (type(e).__name__, e)})

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _execute(self, body):
        code = body.get("code")
        if not isinstance(code, str):
            raise HttpError(400, "code: expected a string")
        cid = body.get("context_id")
        lang = body.get("language")
        if cid and lang:
            raise HttpError(400, "give context_id or language, not both")
        env_vars = body.get("env_vars") or {}
        if not isinstance(env_vars, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()
        ):
            raise HttpError(400, "env_vars: expected an object of strings")
        ctx = CONTEXTS.get(cid) if cid else CONTEXTS.default(language_of(lang))

        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        gone = [False]

        def emit(obj):
            if gone[0]:
                return
            line = (json.dumps(obj) + "\n").encode()
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            except OSError:
                gone[0] = True

        def interrupted():
            # A client that closed its end: readable with nothing to read.
            if not gone[0]:
                try:
                    readable, _, _ = select.select([self.connection], [], [], 0)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        gone[0] = True
                except OSError:
                    gone[0] = True
            return gone[0]

        try:
            ctx.execute(code, env_vars, emit, interrupted)
        except HttpError as e:
            emit({"type": "error", "name": "SandboxError", "value": e.message, "traceback": ""})
        emit({"type": "end_of_execution"})
        if not gone[0]:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def wait_ready(port, secs):
    deadline = time.time() + secs
    last = "no answer"
    while time.time() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                state = json.loads(r.read() or b"{}").get("kernel", "ready")
                if r.status == 200 and state != "starting":
                    return 0
                last = "default kernel " + state
        except (OSError, ValueError) as e:
            last = str(e)
        time.sleep(0.05)
    sys.stderr.write("code-interpreter: not ready on 127.0.0.1:%d after %g s (%s)\n" % (port, secs, last))
    return 1


def main():
    global CONTEXTS
    ap = argparse.ArgumentParser(description="skiff code-interpreter server")
    ap.add_argument("--port", type=int, default=int(os.environ.get("SKIFF_CODE_INTERPRETER_PORT", DEFAULT_PORT)))
    ap.add_argument("--wait", type=float, metavar="SECS", help="wait until a server answers, then exit")
    ap.add_argument("--cwd", default=None, help="working directory of new contexts (default: the current one)")
    args = ap.parse_args()
    if args.wait is not None:
        return wait_ready(args.port, args.wait)

    CONTEXTS = Contexts(args.cwd or os.getcwd())
    try:
        server = Server(("127.0.0.1", args.port), Handler)
    except OSError as e:
        sys.stderr.write("code-interpreter: cannot listen on 127.0.0.1:%d: %s\n" % (args.port, e))
        return 1

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # Warm the default python kernel while the first request is on its way.
    threading.Thread(target=lambda: _warm(), daemon=True).start()
    sys.stderr.write("code-interpreter: listening on 127.0.0.1:%d\n" % args.port)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        CONTEXTS.shutdown_all()
    return 0


def _warm():
    try:
        CONTEXTS.default("python")
        WARM["state"] = "ready"
    except Exception as e:
        WARM["state"] = "failed"
        sys.stderr.write("code-interpreter: default kernel: %s\n" % e)


if __name__ == "__main__":
    sys.exit(main())
