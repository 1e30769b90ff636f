import { hash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import type { Actor } from "../domain/events.ts";
import { formatIssues } from "../domain/resources.ts";
import { ConfigError } from "../errors.ts";
import type { Caller } from "../use-cases/resource-access.ts";

/**
 * Who calls the HTTP and A2A entry points: each API key stands for one person or one remote agent
 * of one tenant, with roles. Only the key's sha256 is kept, so the file holds no secret:
 *
 *   { "keys": [
 *       { "id": "user_ada", "kind": "human", "tenant": "acme", "roles": ["admin"],
 *         "sha256": "<hex sha256 of the key>" },
 *       { "id": "agent_partner-planner", "kind": "agent", "tenant": "acme", "sha256": "..." } ] }
 *
 * A request names its key as `Authorization: Bearer <key>`. The tenant and roles it stands for are
 * what the entry points pass to the engine as the caller (policy and tenant boundary decide from
 * there); a request never chooses its own tenant.
 */
const ApiKeySchema = z
  .object({
    /** The principal: `user_<name>` for a person, `agent_<name>` for a remote agent. */
    id: z.string().regex(/^(user|agent)_[A-Za-z0-9._@-]{1,100}$/, "user_<name> or agent_<name>"),
    kind: z.enum(["human", "agent"]),
    tenant: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a tenant id: 1-64 of A-Z a-z 0-9 _ -"),
    roles: z.array(z.string().min(1).max(64)).max(50).default([]),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, "the lowercase hex sha256 of the key"),
  })
  .strict()
  .refine((k) => k.id.startsWith(k.kind === "human" ? "user_" : "agent_"), {
    message: "a person's id starts with user_, an agent's with agent_",
    path: ["id"],
  });

export const ApiKeysSchema = z.object({ keys: z.array(ApiKeySchema).max(10_000) }).strict();
export type ApiKeysFile = z.infer<typeof ApiKeysSchema>;

/** Who a request is from, once its key is known. */
export interface Authenticated {
  actor: Actor;
  caller: Required<Caller>;
}

export class ApiKeys {
  #byHash: Map<string, Authenticated>;

  constructor(file: ApiKeysFile) {
    this.#byHash = byHash(file);
  }

  /** Takes the keys of a changed file: new keys work, removed ones stop, from the next request on. */
  replace(file: ApiKeysFile): void {
    this.#byHash = byHash(file);
  }

  /** Parses the keys; throws ConfigError naming each bad field and `source`. */
  static parse(raw: unknown, source = "the API keys"): ApiKeys {
    return new ApiKeys(parseApiKeys(raw, source));
  }

  /** The keys of a JSON file (ARBOR_API_KEYS_FILE); a missing file is a ConfigError too. */
  static load(file: string): ApiKeys {
    const read = readApiKeysFile(file);
    if (!read) throw new ConfigError(`There is no API keys file ${file}: create one with \`arbor keys add\``);
    return new ApiKeys(read);
  }

  get size(): number {
    return this.#byHash.size;
  }

  /**
   * Who an `Authorization` header stands for, or undefined (no header, not a bearer key, unknown
   * key). Keys are looked up by their sha256: how long a lookup takes says nothing about a key.
   */
  authenticate(authorization: string | undefined | null): Authenticated | undefined {
    const match = /^Bearer\s+(\S{16,512})\s*$/i.exec(authorization ?? "");
    return match ? this.#byHash.get(hash("sha256", match[1] as string)) : undefined;
  }
}

/** Checks parsed JSON as a keys file; throws ConfigError naming each bad field and `source`. */
export function parseApiKeys(raw: unknown, source: string): ApiKeysFile {
  const parsed = ApiKeysSchema.safeParse(raw);
  if (!parsed.success)
    throw new ConfigError(`${source} are not valid: ${formatIssues(parsed.error).join("; ")}`);
  return parsed.data;
}

/** The keys file, validated; undefined when there is none. */
export function readApiKeysFile(file: string): ApiKeysFile | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ConfigError(`The API keys file ${file} cannot be read: ${(cause as Error).message}`, { cause });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    throw new ConfigError(
      `The API keys file ${file} is not JSON (${(cause as Error).message}): fix or remove it`,
      {
        cause,
      },
    );
  }
  return parseApiKeys(raw, `The API keys in ${file}`);
}

function byHash(file: ApiKeysFile): Map<string, Authenticated> {
  return new Map(
    file.keys.map((k) => [
      k.sha256,
      { actor: { id: k.id, kind: k.kind }, caller: { tenant: k.tenant, roles: k.roles } },
    ]),
  );
}

/** A new random key and the entry that stands for it (the key itself is shown once, never stored). */
export function newApiKey(entry: Omit<ApiKeysFile["keys"][number], "sha256">): {
  key: string;
  entry: ApiKeysFile["keys"][number];
} {
  const key = `arbor_${randomBytes(24).toString("base64url")}`;
  return { key, entry: { ...entry, sha256: hash("sha256", key) } };
}
