// An example service behind the broker's function driver, in Node.js (no
// dependencies): `handler` for Lambda (the event is the request), and, run as
// `FUNCTION_SECRET=... node service.mjs`, an HTTP target that checks the
// broker's signature. Protocol: internal/drivers/function/protocol.schema.json.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const instances = new Map(); // instance id -> Map(binding id -> credentials); use a database

export function handle(req) {
  const { call, operation: op, instance } = req;
  const bid = req.binding?.id;
  const fail = (description) => ({ version: 1, error: { kind: "permanent", description } });
  if (call === "cleanup" || op.kind === "deprovision" || op.kind === "unbind") {
    if (bid) instances.get(instance.id)?.delete(bid);
    else instances.delete(instance.id);
    return { version: 1, done: true };
  }
  if (op.kind === "provision") {
    if (!instances.has(instance.id)) instances.set(instance.id, new Map());
    // metadata: the instance's labels and attributes, which the platform shows
    return { version: 1, done: true, results: { dashboard_url: `https://example.com/instances/${instance.id}`,
      metadata: { labels: { plan: req.plan?.name ?? "" } } } };
  }
  const bindings = instances.get(instance.id);
  if (!bindings) return fail("The instance does not exist.");
  if (op.kind === "update") return { version: 1, done: true };
  if (!bindings.has(bid)) bindings.set(bid, { username: `u-${bid}`, password: randomBytes(18).toString("base64url") });
  return { version: 1, done: true, results: { credentials: bindings.get(bid) } };
}

export const handler = async (event) => handle(event);

export function verify(secret, header, body, now = Date.now() / 1000) {
  const parts = Object.fromEntries((header ?? "").split(",").map((p) => p.trim().split("=", 2)));
  const want = createHmac("sha256", secret).update(`${parts.t}.`).update(body).digest("hex");
  const got = Buffer.from(parts.v1 ?? "");
  return /^\d+$/.test(parts.t ?? "") && got.length === want.length &&
    timingSafeEqual(got, Buffer.from(want)) && Math.abs(now - Number(parts.t)) <= 300;
}

if (process.argv[1]?.endsWith("service.mjs")) {
  createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c)).on("end", () => {
      const body = Buffer.concat(chunks);
      if (!verify(process.env.FUNCTION_SECRET, req.headers["x-broker-signature"], body)) {
        res.writeHead(401).end();
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(handle(JSON.parse(body))));
    });
  }).listen(Number(process.env.PORT ?? 8081), "127.0.0.1");
}
