"""JSON-lines request/reply loop shared by the trusted server and the untrusted runner."""

import json
import os
import sys
import traceback


class HarnessError(Exception):
    """An error reported to the Rust side as {"ok": false, "error": ...}."""


def serve(handlers, inp, out):
    """Answers one JSON request per line until EOF or a shutdown request."""
    for line in inp:
        req = None
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "shutdown":
                _write(out, {"ok": True})
                return
            handler = handlers.get(cmd)
            if handler is None:
                raise HarnessError(f"unknown command {cmd!r}")
            reply = handler(req)
            reply.setdefault("ok", True)
        except HarnessError as e:
            reply = {"ok": False, "error": str(e)}
        except Exception as e:
            reply = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=8),
            }
        if isinstance(req, dict) and "id" in req:
            reply["id"] = req["id"]  # lets the caller reject lines it did not ask for
        _write(out, reply)


def _write(out, obj):
    out.write(json.dumps(obj, allow_nan=False, default=_default) + "\n")
    out.flush()


def _default(o):
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def main_loop(handlers):
    """Runs `serve` on the pipes the process was started with (fds 0 and 1), moved to private
    descriptors first: fd 1 then goes to stderr (the log) and fd 0 reads /dev/null, so task code
    that prints (print, jax.debug.print, C code writing to fd 1) or reads stdin cannot touch the
    protocol channel."""
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    serve(handlers, proto_in, proto_out)
