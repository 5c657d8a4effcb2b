import { check, createClient } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// A filtered page of jobs, and one of them moved to another stage.
export async function firstCalls(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_SANDBOX_TOKEN") });
  const page = check(await api.GET("/v1/jobs", { params: { query: { stage: "in_progress", limit: 2 } } }));
  console.log(page.data.length, page.has_more);
  const job = page.data[0];
  if (!job || "deleted" in job) {
    throw new Error("no job in progress");
  }
  const moved = check(
    await api.POST("/v1/jobs/{id}/stage", {
      params: { path: { id: job.id } },
      body: { stage: "in_review", note: "Ready for partner review" },
    }),
  );
  console.log(moved.id === job.id, moved.stage);
}
