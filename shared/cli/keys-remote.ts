import { ArborError, type ErrorCode } from "../errors.ts";

/** A key as the admin routes show it (shared/channels/admin-keys.ts keyView). */
export interface KeyView {
  fingerprint: string;
  id: string;
  kind: "human" | "agent";
  tenant: string;
  roles: string[];
}

/**
 * `arbor keys` against a remote Arbor (ARBOR_URL, ARBOR_KEY): its admin routes, /v1/admin/keys,
 * with an admin key of the tenant. Errors say what to do next: 401, the key is not known there;
 * 403, it is not an admin key of that tenant.
 */
export class RemoteKeys {
  readonly #url: string;
  readonly #key: string;
  readonly #fetch: typeof fetch;

  constructor(url: string, key: string, fetchImpl: typeof fetch = fetch) {
    this.#url = url;
    this.#key = key;
    this.#fetch = fetchImpl;
  }

  async add(options: {
    id: string;
    kind: "human" | "agent";
    tenant: string | undefined;
    roles: string[];
  }): Promise<{ key: string; view: KeyView }> {
    const body = {
      id: options.id,
      kind: options.kind,
      roles: options.roles,
      ...(options.tenant ? { tenant: options.tenant } : {}),
    };
    const { key, ...view } = await this.#call<KeyView & { key: string }>("POST", "", body);
    return { key, view };
  }

  async list(): Promise<KeyView[]> {
    return (await this.#call<{ keys: KeyView[] }>("GET", "")).keys;
  }

  async revoke(which: string): Promise<KeyView[]> {
    return (await this.#call<{ revoked: KeyView[] }>("DELETE", `/${encodeURIComponent(which)}`)).revoked;
  }

  async #call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = `${this.#url}/v1/admin/keys${path}`;
    let res: Response;
    try {
      res = await this.#fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.#key}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (cause) {
      throw new ArborError(
        "UNAVAILABLE",
        `Cannot reach Arbor at ${this.#url} (${(cause as Error).message}): check ARBOR_URL`,
        {
          cause,
        },
      );
    }
    const text = await res.text();
    let json: { error?: { code?: string; message?: string } } & Record<string, unknown> = {};
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      // not JSON: said below
    }
    if (res.ok) return json as T;
    const said = json.error?.message ?? (text.slice(0, 200) || res.statusText);
    if (res.status === 401)
      throw new ArborError(
        "FORBIDDEN",
        `Arbor at ${this.#url} does not know the key in ARBOR_KEY (401): check ARBOR_KEY, or ask an admin of your tenant for a key (on a fresh stack, make the first one with ARBOR_MODE=aws ARBOR_TABLE_NAME=<table> arbor keys add --id user_<you> --role admin)`,
      );
    if (res.status === 403)
      throw new ArborError(
        "FORBIDDEN",
        `Arbor at ${this.#url} refused (403): managing keys needs an admin key of that tenant (a person's key made with --role admin). ${said}`,
      );
    const code = (json.error?.code ?? "INTERNAL") as ErrorCode;
    throw new ArborError(code, `Arbor at ${this.#url} answered ${res.status}: ${said}`);
  }
}
