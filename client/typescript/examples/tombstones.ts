import { all, createClient, isTombstone } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// With include_deleted=true a page holds the tombstones of removed records
// among the records; isTombstone tells them apart.
export async function tombstones(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_LIVE_TOKEN") });
  let records = 0;
  for await (const item of all((cursor) => api.GET("/v1/jobs", { params: { query: { include_deleted: true, ...cursor } } }))) {
    if (isTombstone(item)) {
      console.log("removed:", item.id, item.object, item.deleted, item.version > 1);
    } else {
      records++;
    }
  }
  console.log(`${records} jobs`);
}
