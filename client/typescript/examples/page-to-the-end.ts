import { all, createClient } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// Every job, 200 a page: all follows next_cursor to the last page.
export async function pageToTheEnd(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_SANDBOX_TOKEN") });
  let jobs = 0;
  const owners = new Set<string>();
  for await (const job of all((cursor) => api.GET("/v1/jobs", { params: { query: { limit: 200, ...cursor } } }))) {
    jobs++;
    // owner is null when no one is responsible for the job.
    if (!("deleted" in job) && job.owner !== null) {
      owners.add(job.owner);
    }
  }
  console.log(`${jobs} jobs, ${owners.size} owners`);
}
