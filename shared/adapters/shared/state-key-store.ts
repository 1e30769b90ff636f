import { ConflictError } from "../../kernel/errors.ts";
import {
  type ApiKeyEntry,
  ApiKeySchema,
  type Authenticated,
  authenticatedAs,
  bearerKeyHash,
  type KeyStore,
  keysToRevoke,
  SHA256_HEX,
} from "../../ports/key-store.ts";
import { collectPages, type StateRecord, type StateStore } from "../../ports/state-store.ts";

/**
 * API keys as records of the state store (the state table on AWS, where every function instance
 * reads them): one record per key, keyed by its sha256, under its tenant:
 *
 *   key     apikey#<sha256>     kind "apikey", status "active"
 *   parent  apikeys#<tenant>    (the byParent index lists a tenant's keys)
 *   data    { id, kind, tenant, roles, sha256, createdAt }
 *
 * A request's key is one consistent read by its hash. Listings find keys through the indexes and
 * confirm each with a consistent read (an index may still show a key just revoked); a revoke
 * deletes the record at the version it read. Put a CachedKeyStore in front for per-request use.
 */
export const KEY_RECORD_KIND = "apikey";
export const keyRecordKey = (sha256: string) => `apikey#${sha256}`;
export const tenantKeysParent = (tenant: string) => `apikeys#${tenant}`;

type KeyData = ApiKeyEntry & { createdAt?: string };

export class StateKeyStore implements KeyStore {
  readonly #state: StateStore;
  readonly #clock: () => Date;

  constructor(state: StateStore, options: { clock?: () => Date } = {}) {
    this.#state = state;
    this.#clock = options.clock ?? (() => new Date());
  }

  async authenticate(authorization: string | undefined | null): Promise<Authenticated | undefined> {
    const sha = bearerKeyHash(authorization);
    return sha === undefined ? undefined : this.lookup(sha);
  }

  async lookup(sha256: string): Promise<Authenticated | undefined> {
    if (!SHA256_HEX.test(sha256)) return undefined;
    const entry = entryOf(await this.#state.get<KeyData>(keyRecordKey(sha256)));
    return entry && entry.sha256 === sha256 ? authenticatedAs(entry) : undefined;
  }

  async list(tenant?: string): Promise<ApiKeyEntry[]> {
    return (await this.#confirmed(tenant)).map(([entry]) => entry);
  }

  async add(entry: ApiKeyEntry): Promise<void> {
    const checked = ApiKeySchema.parse(entry);
    const now = this.#clock().toISOString();
    try {
      await this.#state.transact([
        {
          op: "put",
          record: {
            key: keyRecordKey(checked.sha256),
            kind: KEY_RECORD_KIND,
            status: "active",
            parent: tenantKeysParent(checked.tenant),
            updatedAt: now,
            data: { ...checked, createdAt: now } satisfies KeyData,
          },
          expectedVersion: 0,
        },
      ]);
    } catch (error) {
      if (error instanceof ConflictError) throw new ConflictError("That key is known already");
      throw error;
    }
  }

  async revoke(which: string, tenant?: string): Promise<ApiKeyEntry[]> {
    const found = await this.#confirmed(tenant);
    const gone = keysToRevoke(
      found.map(([entry]) => entry),
      which,
      tenant,
      tenant === undefined ? "the state table" : `tenant ${tenant}`,
    );
    const versions = new Map(found.map(([entry, version]) => [entry.sha256, version]));
    await this.#state.transact(
      gone.map((k) => ({
        op: "delete" as const,
        key: keyRecordKey(k.sha256),
        expectedVersion: versions.get(k.sha256) as number,
      })),
    );
    return gone;
  }

  /** The keys the indexes name, each confirmed by a consistent read, with its version; by id, then hash. */
  async #confirmed(tenant: string | undefined): Promise<[ApiKeyEntry, number][]> {
    const listed = await collectPages<StateRecord<KeyData>>((cursor) => {
      const page = cursor === undefined ? {} : { cursor };
      return tenant === undefined
        ? this.#state.byStatus<KeyData>(KEY_RECORD_KIND, "active", page)
        : this.#state.byParent<KeyData>(tenantKeysParent(tenant), page);
    });
    const out: [ApiKeyEntry, number][] = [];
    for (const { key } of listed) {
      const record = await this.#state.get<KeyData>(key);
      const entry = entryOf(record);
      if (record && entry && (tenant === undefined || entry.tenant === tenant))
        out.push([entry, record.version]);
    }
    return out.sort(([a], [b]) => a.id.localeCompare(b.id) || a.sha256.localeCompare(b.sha256));
  }
}

/** The entry a record holds, or undefined when it is none (not a key record, or not valid). */
function entryOf(record: StateRecord<KeyData> | undefined): ApiKeyEntry | undefined {
  if (!record || record.kind !== KEY_RECORD_KIND) return undefined;
  const { createdAt: _, ...rest } = (record.data ?? {}) as KeyData;
  const parsed = ApiKeySchema.safeParse(rest);
  return parsed.success ? parsed.data : undefined;
}
