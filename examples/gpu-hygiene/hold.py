# A stand-in server for bmx's GPU-hygiene check: it holds GPU memory through
# torch, answers /health and a trivial chat completion, and misbehaves at
# teardown as HOLD_MODE says.
import json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

import torch

mode = os.environ.get("HOLD_MODE", "plain")
gib = int(os.environ.get("HOLD_GIB", "20"))
x = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print(f"[{mode}] pid {os.getpid()} holds {gib} GiB on {torch.cuda.get_device_name()}", flush=True)

if mode == "child-hold":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "setsid-child":
    env = dict(os.environ, HOLD_MODE="child-hold", HOLD_GIB="10")
    child = subprocess.Popen([sys.executable, __file__], env=env, start_new_session=True)
    print(f"[{mode}] started setsid child {child.pid}", flush=True)
    time.sleep(8)  # let the child take its memory

port = int(sys.argv[sys.argv.index("--port") + 1])


class H(BaseHTTPRequestHandler):
    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._json({})
        elif self.path == "/v1/models":
            self._json({"data": [{"id": "hold"}]})
        else:
            self.send_error(404)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._json({"choices": [{"message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}]})


HTTPServer(("127.0.0.1", port), H).serve_forever()
