import { check, createClient, PracticegwError } from "../src/index.js";
import { baseUrl, env } from "./env.js";

// Errors are typed: an error body's code is one of the contract's, and
// check throws a PracticegwError for an answer that is not a success.
export async function typedErrors(): Promise<void> {
  const api = createClient({ baseUrl, token: env("PRACTICEGW_SANDBOX_TOKEN") });
  const { error, response } = await api.POST("/v1/clients", { body: { name: "" } });
  if (error?.error.code === "parameter_invalid") {
    console.log(response.status, error.error.code, error.error.param);
  }
  try {
    check(await api.GET("/v1/jobs/{id}", { params: { path: { id: "job_nosuchjob" } } }));
  } catch (e) {
    if (!(e instanceof PracticegwError)) {
      throw e;
    }
    console.log(e.status, e.code, e.requestId?.startsWith("req_"));
  }
}
