"""An example service behind the broker's function driver, in Python (stdlib only).

The same `handle(request) -> answer` serves as a Lambda handler (lambda_handler)
and as an HTTP target (python3 service.py, which checks the broker's signature,
version 2, at its own URL, FUNCTION_URL: the plan's url, exactly as the catalog
spells it).
It "provisions" an entry in a dict; a real one would create a schema, a tenant,
an account... Every call must be idempotent per operation id.
Protocol: internal/drivers/function/protocol.schema.json (versions 1 and 2: the same bodies).
"""
import hashlib, hmac, json, os, secrets, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer

INSTANCES = {}  # instance id -> {"bindings": {binding id: credentials}}; use a database


def handle(req):
    answer = _handle(req)
    answer["version"] = req.get("version", 1)  # answer in the request's version (1 and 2 are both accepted)
    return answer


def _handle(req):
    op, call = req["operation"], req["call"]
    iid = req["instance"]["id"]
    bid = (req.get("binding") or {}).get("id")
    kind = op["kind"]
    if call == "cleanup" or kind == "deprovision":
        if bid:
            INSTANCES.get(iid, {}).get("bindings", {}).pop(bid, None)
        else:
            INSTANCES.pop(iid, None)
        return {"done": True}
    if kind == "provision":
        INSTANCES.setdefault(iid, {"bindings": {}})
        return {"done": True, "state": {"created_at": int(time.time())},
                "results": {"dashboard_url": f"https://example.com/instances/{iid}",
                            # the instance's labels and attributes, which the platform shows
                            "metadata": {"labels": {"plan": (req.get("plan") or {}).get("name", "")}}}}
    if kind == "update":
        if iid not in INSTANCES:
            return {"error": {"kind": "permanent", "description": "The instance does not exist."}}
        return {"done": True}
    if kind == "bind":
        inst = INSTANCES.get(iid)
        if inst is None:
            return {"error": {"kind": "permanent", "description": "The instance does not exist."}}
        creds = inst["bindings"].setdefault(bid, {"username": f"u-{bid}", "password": secrets.token_urlsafe(24)})
        return {"done": True, "results": {"credentials": creds}}
    if kind == "unbind":
        INSTANCES.get(iid, {}).get("bindings", {}).pop(bid, None)
        return {"done": True}
    return {"error": {"kind": "permanent", "description": f"Unknown operation {kind}."}}


def lambda_handler(event, context):  # Lambda: the event is the request
    return handle(event)


def verify(secret, header, method, url, request_id, body, now=None):
    """The broker's version 2 signature: HMAC-SHA256 of "<t>\\n<METHOD>\\n<URL>\\n<request id>\\n<body>"."""
    parts = dict(p.strip().split("=", 1) for p in (header or "").split(",") if "=" in p)
    t, sig = parts.get("t", ""), parts.get("v2", "")  # v1, sent to targets of the previous release, is ignored
    signed = "\n".join([t, method, url, request_id or ""]).encode() + b"\n" + body
    want = hmac.new(secret, signed, hashlib.sha256).hexdigest()
    return bool(t.isdigit() and request_id and hmac.compare_digest(sig, want) and abs((now or time.time()) - int(t)) <= 300)


SEEN, SEEN_LOCK = {}, threading.Lock()  # request id -> when it came, for 10 minutes: a replay is refused


def first_time(request_id, now=None):
    now = now or time.time()
    with SEEN_LOCK:
        for rid in [r for r, at in SEEN.items() if now - at > 600]:
            del SEEN[rid]
        if request_id in SEEN:
            return False
        SEEN[request_id] = now
        return True


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        rid = self.headers.get("X-Broker-Request-Id")
        if not verify(os.environ["FUNCTION_SECRET"].encode(), self.headers.get("X-Broker-Signature"), self.command, URL, rid, body) \
                or not first_time(rid):
            self.send_response(401); self.end_headers(); return
        out = json.dumps(handle(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


PORT = int(os.environ.get("PORT", "8081"))
URL = os.environ.get("FUNCTION_URL", f"http://127.0.0.1:{PORT}/")  # the plan's url, as the catalog spells it

if __name__ == "__main__":  # FUNCTION_SECRET=... python3 service.py
    HTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
