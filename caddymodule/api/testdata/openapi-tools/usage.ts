// What an integration writes against the client generated from the
// served document: TestOpenAPITypeScriptClientTypeChecks generates ./api.ts
// with openapi-typescript next to a copy of this file and runs tsc on both.
import type { components, paths, webhooks } from "./api";

// A read.
type Job = paths["/v1/jobs/{id}"]["get"]["responses"][200]["content"]["application/json"];
type JobPage = paths["/v1/jobs"]["get"]["responses"][200]["content"]["application/json"];

// A page's items are records or, with include_deleted=true, tombstones:
// "deleted" narrows them.
type Tombstone = components["schemas"]["Tombstone"];

export function openJobs(page: JobPage): Job[] {
  return page.data.filter((job): job is Job => !("deleted" in job) && job.closed_at === null);
}

export function removed(page: JobPage): Tombstone[] {
  return page.data.filter((item): item is Tombstone => "deleted" in item);
}

// An event payload, as a webhook receiver gets it.
type StageChanged = webhooks["job.stage_changed"]["post"]["requestBody"]["content"]["application/json"];
type Signature = webhooks["job.stage_changed"]["post"]["parameters"]["header"]["webhook-signature"];

export function describeMove(event: StageChanged, signature: Signature): string {
  const job: Job = event.data.object;
  return `${event.id} ${job.title}: ${event.data.previous_stage} -> ${event.data.stage} at ${event.occurred_at} (${signature})`;
}

// Events listed by GET /v1/events narrow on their kind.
type Event = components["schemas"]["Event"];

export function settled(event: Event): string | null {
  switch (event.event) {
    case "invoice.paid":
      return `${event.data.object.number}: ${event.data.object.total.amount} ${event.data.object.total.currency} via ${event.data.settled_via}`;
    case "engagement.signed":
      return event.data.released_jobs.join(", ");
  }
  return null;
}

// The types are exact: a renamed field or an unknown kind does not compile.
export function misspelt(event: StageChanged, other: Event): unknown[] {
  return [
    // @ts-expect-error the field is previous_stage
    event.data.previousStage,
    // @ts-expect-error job.stage_changed carries no settled_via
    event.data.settled_via,
    // @ts-expect-error no such event kind
    other.event === "invoice.refunded",
  ];
}
