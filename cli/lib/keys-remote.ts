import type { RemoteConfig } from "../../shared/runtime/config.ts";
import { checkTenantOption, Remote, RemoteError, type RemoteOptions } from "./remote.ts";

/** A key as the admin routes show it (shared/channels/http/admin-keys.ts keyView). */
export interface KeyView {
  fingerprint: string;
  id: string;
  kind: "human" | "agent";
  tenant: string;
  roles: string[];
  name?: string;
}

/**
 * `arbor keys` against a remote Arbor (ARBOR_URL, ARBOR_KEY): its admin routes, /v1/admin/keys,
 * with an admin key of the tenant, through the CLI's one client of the HTTP API (remote.ts: its
 * retries, and no redirect followed with the key). Errors say what to do next: 401, the key is
 * not known there; 403, it is not an admin key of that tenant.
 */
export class RemoteKeys {
  readonly #remote: Remote;

  constructor(config: RemoteConfig, options: RemoteOptions = {}) {
    this.#remote = new Remote(config, options);
  }

  async add(options: {
    id: string;
    kind: "human" | "agent";
    tenant: string | undefined;
    roles: string[];
    name?: string | undefined;
  }): Promise<{ key: string; view: KeyView }> {
    const body = {
      id: options.id,
      kind: options.kind,
      roles: options.roles,
      ...(options.tenant ? { tenant: options.tenant } : {}),
      ...(options.name === undefined ? {} : { name: options.name }),
    };
    const { key, ...view } = await this.#call(() =>
      this.#remote.post<KeyView & { key: string }>("/v1/admin/keys", body, { shape: { key: "string" } }),
    );
    return { key, view };
  }

  /** A --tenant that is not the admin key's own is refused (remote.ts checkTenantOption). */
  checkTenant(tenant: string | undefined): Promise<void> {
    return this.#call(() => checkTenantOption(this.#remote, tenant));
  }

  async list(): Promise<KeyView[]> {
    return (
      await this.#call(() => this.#remote.get<{ keys: KeyView[] }>("/v1/admin/keys", { keys: "array" }))
    ).keys;
  }

  async revoke(which: string): Promise<KeyView[]> {
    const path = `/v1/admin/keys/${encodeURIComponent(which)}`;
    return (await this.#call(() => this.#remote.delete<{ revoked: KeyView[] }>(path, { revoked: "array" })))
      .revoked;
  }

  async #call<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (e) {
      if (!(e instanceof RemoteError)) throw e;
      const url = this.#remote.url;
      if (e.status === 401)
        throw new RemoteError(
          `Arbor at ${url} does not know the key in ARBOR_KEY (401): check ARBOR_KEY, or ask an admin of your tenant for a key (on a fresh stack, make the first one with ARBOR_MODE=aws ARBOR_TABLE_NAME=<table> arbor keys add --id user_<you> --role admin)`,
          401,
          e.code,
        );
      if (e.status === 403)
        throw new RemoteError(
          `Arbor at ${url} refused (403): managing keys needs an admin key of that tenant (a person's key made with --role admin). ${e.message}`,
          403,
          e.code,
        );
      throw e;
    }
  }
}
