import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { check, createClient, verifyWebhook } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// A webhook receiver verifies each delivery's Standard Webhooks signature
// with the endpoint's secret before it trusts the event.
export async function verifiedDelivery(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_SANDBOX_TOKEN") });
  let secret = "";
  let delivered: (line: string) => void = () => {};
  const received = new Promise<string>((resolve) => (delivered = resolve));
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const event = verifyWebhook(secret, req.headers, Buffer.concat(chunks));
        res.writeHead(204).end();
        delivered(`verified ${event.event}`);
      } catch (e) {
        res.writeHead(400).end();
        delivered(`refused: ${String(e)}`);
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = receiver.address() as AddressInfo;
    const endpoint = check(
      await api.POST("/v1/webhook_endpoints", { body: { url: `http://127.0.0.1:${port}/hooks`, events: ["job.stage_changed"] } }),
    );
    secret = endpoint.secret;
    check(await api.POST("/v1/sandbox/trigger", { body: { event: "job.stage_changed" } }));
    const timeout = new Promise<string>((resolve) => setTimeout(resolve, 30_000, "no delivery").unref());
    console.log(await Promise.race([received, timeout]));
  } finally {
    receiver.close();
  }
}
