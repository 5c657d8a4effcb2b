import { createClient, rateLimit } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// Every answer says what is left of the credential's ceiling; past it, a
// 429 says when to try again.
export async function rateLimits(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_LIMITED_TOKEN") }); // 1 request a minute
  for (let i = 0; i < 2; i++) {
    const { error, response } = await api.GET("/v1/jobs", { params: { query: { limit: 1 } } });
    const rl = rateLimit(response.headers);
    console.log(response.status, rl?.policy, rl?.limit, rl?.window, rl?.remaining);
    if (error) {
      const wait = Number(response.headers.get("Retry-After"));
      console.log(error.error.code, wait > 0 && wait <= 60);
    }
  }
}
