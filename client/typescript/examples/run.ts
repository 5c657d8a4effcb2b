// The client's examples, run in order against a gateway by the Go test
// TestTypeScriptClientExamples, which compares what they print with
// examples/output.txt. Each reads the gateway's address and credentials
// from the environment.
import { firstCalls } from "./first-calls.js";
import { idempotentCreate } from "./idempotent-create.js";
import { pageToTheEnd } from "./page-to-the-end.js";
import { rateLimits } from "./rate-limits.js";
import { tombstones } from "./tombstones.js";
import { typedErrors } from "./typed-errors.js";
import { verifiedDelivery } from "./verified-delivery.js";

const examples: Record<string, () => Promise<void>> = {
  firstCalls,
  pageToTheEnd,
  idempotentCreate,
  typedErrors,
  tombstones,
  rateLimits,
  verifiedDelivery,
};

for (const [name, example] of Object.entries(examples)) {
  console.log(`# ${name}`);
  await example();
}
