// The official TypeScript client of practicegw's /v1 API. Its types are
// generated from the OpenAPI document a gateway serves (schema.d.ts, by
// openapi-typescript) and its requests go through openapi-fetch; beside
// them, the helpers the generators leave out: paging to the end of a
// collection, telling a tombstone from a record, a typed error, verifying a
// webhook delivery (Standard Webhooks) and reading the rate-limit headers.
import createFetchClient, { type Client, type ClientOptions } from "openapi-fetch";
import { Webhook } from "standardwebhooks";
import { parseList } from "structured-headers";
import type { components, paths, webhooks } from "./schema.js";

export type { components, paths, webhooks };
export type Schemas = components["schemas"];
/** A recorded event, as GET /v1/events lists it and a webhook delivers it. */
export type Event = Schemas["Event"];
/** What a webhook delivers under each event name, aliases included. */
export type Delivery = {
  [Name in keyof webhooks]: webhooks[Name]["post"]["requestBody"]["content"]["application/json"];
}[keyof webhooks];
export type Tombstone = Schemas["Tombstone"];
export type ErrorBody = Schemas["Error"];
export type ErrorCode = ErrorBody["error"]["code"];
export type PracticegwClient = Client<paths>;

/**
 * A client of the gateway at baseUrl (without /v1) that sends token, a
 * credential's pgw_live_… or pgw_test_… token, with every request.
 */
export function createClient(options: ClientOptions & { baseUrl: string; token: string }): PracticegwClient {
  const { token, ...rest } = options;
  const client = createFetchClient<paths>(rest);
  client.use({
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${token}`);
      return request;
    },
  });
  return client;
}

/** An answer of the gateway that is not a success, as an Error. */
export class PracticegwError extends Error {
  readonly status: number;
  readonly code: ErrorCode | undefined;
  readonly requestId: string | undefined;
  /** The parameter at fault, when there is one. */
  readonly param: string | undefined;
  /** Seconds the answer's Retry-After asks to wait, when it has one. */
  readonly retryAfter: number | undefined;

  constructor(response: Response, body: ErrorBody | undefined) {
    const e = body?.error;
    super(e ? `practicegw: ${response.status} ${e.code}: ${e.message} [${e.request_id}]` : `practicegw: ${response.status} with no error body`);
    this.name = "PracticegwError";
    this.status = response.status;
    this.code = e?.code;
    this.requestId = e?.request_id;
    this.param = e?.param;
    this.retryAfter = retryAfter(response.headers);
  }
}

/** What an openapi-fetch call resolves to. */
type Result<T, E> = { data: T; error?: never; response: Response } | { data?: never; error: E; response: Response };

/** The answer's data, or a PracticegwError thrown for its error. */
export function check<T, E>(result: Result<T, E>): T {
  if (result.error !== undefined || !result.response.ok) {
    throw new PracticegwError(result.response, result.error as ErrorBody | undefined);
  }
  return result.data as T;
}

/** The list envelope every collection answers. */
interface Page<Item> {
  data: Item[];
  has_more: boolean;
  next_cursor: string | null;
}

/**
 * Every item of a collection, page after page: page asks for one, given
 * the cursor to spread into its query ({} for the first), and all follows
 * next_cursor until has_more is false. An answer that is not a success
 * throws a PracticegwError.
 *
 *     for await (const job of all((cursor) => api.GET("/v1/jobs", { params: { query: { limit: 200, ...cursor } } })))
 */
export async function* all<Item, E>(page: (cursor: { cursor?: string }) => Promise<Result<Page<Item>, E>>): AsyncGenerator<Item> {
  let cursor: { cursor?: string } = {};
  for (;;) {
    const p = check(await page(cursor));
    yield* p.data;
    if (!p.has_more || !p.next_cursor) {
      return;
    }
    if (p.next_cursor === cursor.cursor) {
      throw new Error(`practicegw: the page after ${p.next_cursor} named itself as the next`);
    }
    cursor = { cursor: p.next_cursor };
  }
}

/** Whether an item of a page (include_deleted=true) is a removed record's tombstone. */
export function isTombstone<T extends object>(item: T | Tombstone): item is Tombstone {
  return "deleted" in item && item.deleted === true;
}

/**
 * Verifies a webhook delivery as Standard Webhooks says, with the
 * endpoint's whsec_… secret (one of webhook-signature's values signs
 * webhook-id, webhook-timestamp and the body; the timestamp is within five
 * minutes of now), and answers its event. body is the delivery exactly as
 * received; headers are the request's (a fetch Headers, or Node's).
 */
export function verifyWebhook(secret: string, headers: Headers | Record<string, string | string[] | undefined>, body: string | Buffer): Delivery {
  const signed: Record<string, string> = {};
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const v = headers instanceof Headers ? headers.get(name) : headers[name];
    signed[name] = Array.isArray(v) ? v.join(" ") : (v ?? "");
  }
  return new Webhook(secret).verify(body, signed) as Delivery;
}

/** What an answer says of its credential's ceiling (RateLimit-Policy and RateLimit). */
export interface RateLimit {
  policy: string;
  /** q: requests in each window. */
  limit: number | undefined;
  /** w: the window, in seconds. */
  window: number | undefined;
  /** r: requests left now. */
  remaining: number;
  /** t: seconds until the quota is whole again. */
  reset: number | undefined;
}

/** The answer's rate limit, or undefined when it says none it can read. */
export function rateLimit(headers: Headers): RateLimit | undefined {
  const limit = firstItem(headers.get("RateLimit"));
  const remaining = limit?.params.get("r");
  if (!limit || typeof remaining !== "number") {
    return undefined;
  }
  const policy = firstItem(headers.get("RateLimit-Policy"));
  return {
    policy: String(limit.value),
    limit: number(policy?.params.get("q")),
    window: number(policy?.params.get("w")),
    remaining,
    reset: number(limit.params.get("t")),
  };
}

/** Seconds Retry-After asks to wait (given in seconds or as an HTTP date), or undefined. */
export function retryAfter(headers: Headers): number | undefined {
  const v = headers.get("Retry-After");
  if (v === null || v === "") {
    return undefined;
  }
  if (/^\d+$/.test(v)) {
    return Number(v);
  }
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

function firstItem(value: string | null): { value: unknown; params: Map<string, unknown> } | undefined {
  if (!value) {
    return undefined;
  }
  try {
    const first = parseList(value)[0];
    if (!first || Array.isArray(first[0])) {
      return undefined;
    }
    return { value: first[0], params: first[1] };
  } catch {
    return undefined;
  }
}

function number(v: unknown): number | undefined {
  return typeof v === "number" ? v : undefined;
}
