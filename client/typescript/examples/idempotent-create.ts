import { check, createClient } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// A client created twice with one Idempotency-Key is created once: the
// second answer replays the first.
export async function idempotentCreate(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_SANDBOX_TOKEN") });
  const create = () =>
    api.POST("/v1/clients", {
      params: { header: { "Idempotency-Key": "typescript-create-1" } },
      body: { name: "Quill & Rowe LLP", contacts: [{ name: "Sam Quill", role: "primary" }] },
    });
  const first = check(await create());
  const again = check(await create());
  console.log(first.id === again.id, again.name);
}
