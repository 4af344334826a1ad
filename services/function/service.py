"""An example service behind the broker's function driver, in Python (stdlib only).

The same `handle(request) -> answer` serves as a Lambda handler (lambda_handler)
and as an HTTP target (python3 service.py, which checks the broker's signature).
It "provisions" an entry in a dict; a real one would create a schema, a tenant,
an account... Every call must be idempotent per operation id.
Protocol: internal/drivers/function/protocol.schema.json (version 1).
"""
import hashlib, hmac, json, os, secrets, time
from http.server import BaseHTTPRequestHandler, HTTPServer

INSTANCES = {}  # instance id -> {"bindings": {binding id: credentials}}; use a database


def handle(req):
    op, call = req["operation"], req["call"]
    iid = req["instance"]["id"]
    bid = (req.get("binding") or {}).get("id")
    kind = op["kind"]
    if call == "cleanup" or kind == "deprovision":
        if bid:
            INSTANCES.get(iid, {}).get("bindings", {}).pop(bid, None)
        else:
            INSTANCES.pop(iid, None)
        return {"version": 1, "done": True}
    if kind == "provision":
        INSTANCES.setdefault(iid, {"bindings": {}})
        return {"version": 1, "done": True, "state": {"created_at": int(time.time())},
                "results": {"dashboard_url": f"https://example.com/instances/{iid}",
                            # the instance's labels and attributes, which the platform shows
                            "metadata": {"labels": {"plan": (req.get("plan") or {}).get("name", "")}}}}
    if kind == "update":
        if iid not in INSTANCES:
            return {"version": 1, "error": {"kind": "permanent", "description": "The instance does not exist."}}
        return {"version": 1, "done": True}
    if kind == "bind":
        inst = INSTANCES.get(iid)
        if inst is None:
            return {"version": 1, "error": {"kind": "permanent", "description": "The instance does not exist."}}
        creds = inst["bindings"].setdefault(bid, {"username": f"u-{bid}", "password": secrets.token_urlsafe(24)})
        return {"version": 1, "done": True, "results": {"credentials": creds}}
    if kind == "unbind":
        INSTANCES.get(iid, {}).get("bindings", {}).pop(bid, None)
        return {"version": 1, "done": True}
    return {"version": 1, "error": {"kind": "permanent", "description": f"Unknown operation {kind}."}}


def lambda_handler(event, context):  # Lambda: the event is the request
    return handle(event)


def verify(secret, header, body, now=None):
    parts = dict(p.strip().split("=", 1) for p in (header or "").split(",") if "=" in p)
    t, sig = parts.get("t", ""), parts.get("v1", "")
    want = hmac.new(secret, t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return t.isdigit() and hmac.compare_digest(sig, want) and abs((now or time.time()) - int(t)) <= 300


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verify(os.environ["FUNCTION_SECRET"].encode(), self.headers.get("X-Broker-Signature"), body):
            self.send_response(401); self.end_headers(); return
        out = json.dumps(handle(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


if __name__ == "__main__":  # FUNCTION_SECRET=... python3 service.py
    HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8081"))), Handler).serve_forever()
