// An example service behind the broker's function driver, in Node.js (no
// dependencies): `handler` for Lambda (the event is the request), and, run as
// `FUNCTION_SECRET=... node service.mjs`, an HTTP target that checks the
// broker's signature (version 2) at its own URL, FUNCTION_URL: the plan's url,
// exactly as the catalog spells it. Protocol:
// internal/drivers/function/protocol.schema.json (versions 1 and 2: the same bodies).
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const instances = new Map(); // instance id -> Map(binding id -> credentials); use a database

// handle answers in the request's version (the broker accepts 1 and 2).
export function handle(req) {
  return { ...answer(req), version: req.version ?? 1 };
}

function answer(req) {
  const { call, operation: op, instance } = req;
  const bid = req.binding?.id;
  const fail = (description) => ({ error: { kind: "permanent", description } });
  if (call === "cleanup" || op.kind === "deprovision" || op.kind === "unbind") {
    if (bid) instances.get(instance.id)?.delete(bid);
    else instances.delete(instance.id);
    return { done: true };
  }
  if (op.kind === "provision") {
    if (!instances.has(instance.id)) instances.set(instance.id, new Map());
    // metadata: the instance's labels and attributes, which the platform shows
    return { done: true, results: { dashboard_url: `https://example.com/instances/${instance.id}`,
      metadata: { labels: { plan: req.plan?.name ?? "" } } } };
  }
  const bindings = instances.get(instance.id);
  if (!bindings) return fail("The instance does not exist.");
  if (op.kind === "update") return { done: true };
  if (!bindings.has(bid)) bindings.set(bid, { username: `u-${bid}`, password: randomBytes(18).toString("base64url") });
  return { done: true, results: { credentials: bindings.get(bid) } };
}

export const handler = async (event) => handle(event);

// verify checks the broker's version 2 signature: HMAC-SHA256 of
// "<t>\n<METHOD>\n<URL>\n<request id>\n<body>" (v1, sent to targets of the
// previous release, is ignored).
export function verify(secret, header, method, url, requestId, body, now = Date.now() / 1000) {
  const parts = Object.fromEntries((header ?? "").split(",").map((p) => p.trim().split("=", 2)));
  const want = createHmac("sha256", secret).update(`${parts.t}\n${method}\n${url}\n${requestId}\n`).update(body).digest("hex");
  const got = Buffer.from(parts.v2 ?? "");
  return /^\d+$/.test(parts.t ?? "") && !!requestId && got.length === want.length &&
    timingSafeEqual(got, Buffer.from(want)) && Math.abs(now - Number(parts.t)) <= 300;
}

const seen = new Map(); // request id -> when it came, for 10 minutes: a replay is refused

export function firstTime(requestId, now = Date.now() / 1000) {
  for (const [id, at] of seen) if (now - at > 600) seen.delete(id);
  if (seen.has(requestId)) return false;
  seen.set(requestId, now);
  return true;
}

if (process.argv[1]?.endsWith("service.mjs")) {
  const port = Number(process.env.PORT ?? 8081);
  const url = process.env.FUNCTION_URL ?? `http://127.0.0.1:${port}/`; // the plan's url, as the catalog spells it
  createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c)).on("end", () => {
      const body = Buffer.concat(chunks);
      const id = req.headers["x-broker-request-id"];
      if (!verify(process.env.FUNCTION_SECRET, req.headers["x-broker-signature"], req.method, url, id, body) || !firstTime(id)) {
        res.writeHead(401).end();
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(handle(JSON.parse(body))));
    });
  }).listen(port, "127.0.0.1");
}
