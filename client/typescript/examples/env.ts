// What the examples are given: the gateway's base URL and credentials.
export function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
}

export const baseUrl = env("PRACTICEGW_URL");
