import { createHash } from "node:crypto";
import { Parser, Store, Writer } from "n3";
import { ConflictError, TooLargeError, UnavailableError, ValidationError } from "../kernel/errors.ts";
import { collectPages, type StateStore } from "../ports/state-store.ts";
import { evaluateBgp } from "./bgp.ts";
import {
  GRAPH_LIMITS,
  type GraphStore,
  type GraphWrite,
  type QueryResult,
  type Triple,
  type TriplePattern,
} from "./graph-store.ts";

/**
 * The graph on the state store port (SQLite locally, DynamoDB on AWS):
 *
 *   head     key `graph#<tenant>`             kind `graph`         {count, bytes, digest}
 *   triple   key `graph#<tenant>#<hash>`      kind `graph-triple`  {nt}  parent `graph#<tenant>`
 *
 * `<hash>` is the SHA-256 of the triple's canonical N-Triples line (n3's writer), so one triple is
 * one record however often it is added. Every add or remove is one transaction that writes the
 * head at the version it read (and each new triple as "must not exist yet", each removed one at
 * its version): two writers never lose each other's triples; the one that loses the race reads
 * again and retries. The head counts triples and bytes, for the caps, and keeps the XOR of the
 * triples' hashes (`digest`).
 *
 * A query reads the head (a consistent read) and lists the triples by parent. On DynamoDB that
 * listing is an index, which may lag the table: the listing is taken only when its count and
 * digest are the head's, else listed again after a pause (and refused, UNAVAILABLE, if it never
 * catches up). The triples are loaded into an n3 Store, kept per tenant with the head's version:
 * while the version holds, a query costs one read.
 */
const HEAD = "graph";
const TRIPLE = "graph-triple";
const ZERO = "0".repeat(64);

interface Head {
  count: number;
  bytes: number;
  digest: string;
}

interface Loaded {
  version: number;
  store: Store;
  /** Record key of each triple's N-Triples line. */
  keys: Map<string, string>;
}

export interface StateGraphStoreOptions {
  clock?: () => Date;
  /** Triples per tenant (default GRAPH_LIMITS.triplesPerTenant). */
  maxTriples?: number;
  /** Bytes of N-Triples per tenant (default GRAPH_LIMITS.bytesPerTenant). */
  maxBytes?: number;
  /** Attempts of a write that loses races (default 30: writers of one tenant take turns at its head). */
  maxAttempts?: number;
  /** Listings of a lagging index before a query gives up (default 6). */
  maxListings?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Triples of loaded graphs kept in memory, over all tenants (default 50,000). */
  cachedTriples?: number;
}

const headKey = (tenant: string) => `graph#${tenant}`;
const tripleKey = (tenant: string, nt: string) => `graph#${tenant}#${sha(nt)}`;
const sha = (text: string) => createHash("sha256").update(text).digest("hex");
const xor = (a: string, b: string) => {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  for (let i = 0; i < x.length; i++) x[i] = (x[i] as number) ^ (y[i] as number);
  return x.toString("hex");
};
const TENANT = /^[A-Za-z0-9_-]{1,128}$/;

/** The canonical N-Triples line of a triple (no newline). */
export function nTriple(t: Triple): string {
  return new Writer({ format: "N-Triples" }).quadToString(t.subject, t.predicate, t.object).trimEnd();
}

export class StateGraphStore implements GraphStore {
  readonly #state: StateStore;
  readonly #clock: () => Date;
  readonly #maxTriples: number;
  readonly #maxBytes: number;
  readonly #maxAttempts: number;
  readonly #maxListings: number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #cachedTriples: number;
  readonly #cache = new Map<string, Loaded>();

  constructor(state: StateStore, options: StateGraphStoreOptions = {}) {
    this.#state = state;
    this.#clock = options.clock ?? (() => new Date());
    this.#maxTriples = options.maxTriples ?? GRAPH_LIMITS.triplesPerTenant;
    this.#maxBytes = options.maxBytes ?? GRAPH_LIMITS.bytesPerTenant;
    this.#maxAttempts = options.maxAttempts ?? 30;
    this.#maxListings = options.maxListings ?? 6;
    this.#sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.#cachedTriples = options.cachedTriples ?? 50_000;
  }

  async add(tenant: string, triples: readonly Triple[]): Promise<GraphWrite> {
    checkTenant(tenant);
    checkCount(triples.length, "add");
    const lines = [...new Set(triples.map(nTriple))];
    // Which triples are there: read once; after a lost race, again. When the head lost, only those
    // found there (another writer may have removed them: counted as "already there", they would not
    // be written, and the add would end without them); one found missing that another writer adds
    // meanwhile fails its own condition (a triple lost), and then all are read again.
    let present: boolean[] | undefined;
    const isThere = (nt: string) => this.#state.get(tripleKey(tenant, nt)).then((r) => r !== undefined);
    return this.#write(tenant, async (head, lost) => {
      if (!present || (lost !== undefined && lost !== headKey(tenant)))
        present = await Promise.all(lines.map(isThere));
      else if (lost !== undefined) {
        const before = present;
        present = await Promise.all(lines.map((nt, i) => (before[i] ? isThere(nt) : false)));
      }
      const known = present;
      const fresh = lines.filter((_, i) => !known[i]);
      const bytes = fresh.reduce((n, nt) => n + Buffer.byteLength(nt), 0);
      if (fresh.length > 0 && head.count + fresh.length > this.#maxTriples)
        throw new TooLargeError(
          `The graph of tenant ${tenant} holds ${head.count} triples; adding ${fresh.length} would pass its cap of ${this.#maxTriples}: remove some first (graph_remove)`,
          { count: head.count, cap: this.#maxTriples },
        );
      if (fresh.length > 0 && head.bytes + bytes > this.#maxBytes)
        throw new TooLargeError(
          `The graph of tenant ${tenant} holds ${head.bytes} bytes; adding ${bytes} would pass its cap of ${this.#maxBytes}: remove some first (graph_remove)`,
          { bytes: head.bytes, cap: this.#maxBytes },
        );
      return {
        added: fresh,
        removed: [],
        unchanged: lines.length - fresh.length,
      };
    });
  }

  async remove(tenant: string, patterns: readonly TriplePattern[]): Promise<GraphWrite> {
    checkTenant(tenant);
    checkCount(patterns.length, "remove");
    return this.#write(tenant, async () => {
      const loaded = await this.#load(tenant);
      const matched = new Set<string>();
      for (const p of patterns) {
        const term = (t: TriplePattern[keyof TriplePattern]) => (t.termType === "Variable" ? null : t);
        for (const q of loaded.store.readQuads(term(p.subject), term(p.predicate), term(p.object), null)) {
          if (!sameVariablesAgree(p, q)) continue;
          matched.add(nTriple(q as unknown as Triple));
        }
      }
      const ordered = [...matched].sort((a, b) =>
        (loaded.keys.get(a) ?? "").localeCompare(loaded.keys.get(b) ?? ""),
      );
      return {
        removed: ordered.slice(0, GRAPH_LIMITS.triplesPerCall),
        added: [],
        unchanged: 0,
        more: ordered.length > GRAPH_LIMITS.triplesPerCall,
        version: loaded.version,
      };
    });
  }

  async query(
    tenant: string,
    patterns: readonly TriplePattern[],
    options: { limit?: number } = {},
  ): Promise<QueryResult> {
    checkTenant(tenant);
    const limit = Math.min(Math.max(1, options.limit ?? 20), GRAPH_LIMITS.resultsPerQuery);
    const loaded = await this.#load(tenant);
    return evaluateBgp(loaded.store, patterns, { limit });
  }

  async count(tenant: string): Promise<number> {
    checkTenant(tenant);
    return (await this.#state.get<Head>(headKey(tenant)))?.data.count ?? 0;
  }

  /**
   * One change, retried while it loses races: `plan` sees the head as read now and says what to
   * add and remove; the transaction writes the head at that version.
   */
  async #write(
    tenant: string,
    /** `lost`: the key of the record whose condition failed in the attempt before, if any. */
    plan: (
      head: Head,
      lost: string | undefined,
    ) => Promise<{
      added: string[];
      removed: string[];
      unchanged: number;
      more?: boolean;
      /** The head version the plan was made from (when it read more than the head). */
      version?: number;
    }>,
  ): Promise<GraphWrite> {
    let lost: string | undefined;
    for (let attempt = 1; ; attempt++) {
      const record = await this.#state.get<Head>(headKey(tenant));
      const version = record?.version ?? 0;
      const head = record?.data ?? { count: 0, bytes: 0, digest: ZERO };
      const change = await plan(head, lost);
      if (change.version !== undefined && change.version !== version) {
        if (attempt >= this.#maxAttempts) throw busy(tenant);
        continue; // the graph moved between the two reads
      }
      const more = change.more === undefined ? {} : { more: change.more };
      if (change.added.length === 0 && change.removed.length === 0)
        return { changed: 0, unchanged: change.unchanged, total: head.count, ...more };
      const removedKeys = change.removed.map((nt) => tripleKey(tenant, nt));
      let digest = head.digest;
      let bytes = head.bytes;
      for (const nt of change.added) {
        digest = xor(digest, sha(nt));
        bytes += Buffer.byteLength(nt);
      }
      for (const nt of change.removed) {
        digest = xor(digest, sha(nt));
        bytes -= Buffer.byteLength(nt);
      }
      const next: Head = { count: head.count + change.added.length - change.removed.length, bytes, digest };
      const updatedAt = this.#clock().toISOString();
      try {
        await this.#state.transact([
          {
            op: "put",
            record: { key: headKey(tenant), kind: HEAD, updatedAt, data: next },
            expectedVersion: version,
          },
          ...change.added.map((nt) => ({
            op: "put" as const,
            record: {
              key: tripleKey(tenant, nt),
              kind: TRIPLE,
              parent: headKey(tenant),
              updatedAt,
              data: { nt },
            },
            expectedVersion: 0,
          })),
          ...removedKeys.map((key) => ({
            op: "delete" as const,
            key,
            expectedVersion: 1, // a triple's record is written once, never updated
          })),
        ]);
      } catch (e) {
        // A store busy for a moment (SQLite locked by another process writing the same file) wrote
        // nothing: taken like a lost race, with everything read again.
        const transient = e instanceof UnavailableError && e.details.retryAfterSeconds !== undefined;
        if (!(e instanceof ConflictError || transient) || attempt >= this.#maxAttempts)
          throw e instanceof ConflictError ? busy(tenant, e) : e;
        // Which record lost (unknown: treated as a triple, so what is there is read again).
        lost = e instanceof ConflictError && typeof e.details.id === "string" ? e.details.id : "?";
        await this.#sleep(Math.random() * Math.min(250, 5 * 2 ** attempt));
        continue;
      }
      this.#applyToCache(tenant, version, version + 1, change.added, change.removed);
      return {
        changed: change.added.length + change.removed.length,
        unchanged: change.unchanged,
        total: next.count,
        ...more,
      };
    }
  }

  /** The tenant's triples in an n3 Store, at the head's version (from memory while it holds). */
  async #load(tenant: string): Promise<Loaded> {
    for (let listing = 1; ; listing++) {
      const record = await this.#state.get<Head>(headKey(tenant));
      if (!record) return { version: 0, store: new Store(), keys: new Map() };
      const cached = this.#cache.get(tenant);
      if (cached?.version === record.version) {
        this.#cache.delete(tenant); // most recently used last
        this.#cache.set(tenant, cached);
        return cached;
      }
      const rows = await collectPages((cursor) =>
        this.#state.byParent<{ nt: string }>(
          headKey(tenant),
          cursor === undefined ? { limit: 1000 } : { limit: 1000, cursor },
        ),
      );
      let digest = ZERO;
      for (const r of rows) digest = xor(digest, sha(r.data.nt));
      if (rows.length === record.data.count && digest === record.data.digest) {
        const store = new Store();
        const keys = new Map<string, string>();
        const parser = new Parser({ format: "N-Triples" });
        for (const r of rows) {
          store.addQuads(parser.parse(r.data.nt));
          keys.set(r.data.nt, r.key);
        }
        const loaded = { version: record.version, store, keys };
        this.#remember(tenant, loaded);
        return loaded;
      }
      if (listing >= this.#maxListings)
        throw new UnavailableError(
          `The graph of tenant ${tenant} is being written, or its index is behind: try again in a moment`,
          { details: { retryAfterSeconds: 1 } },
        );
      await this.#sleep(50 * 2 ** listing);
    }
  }

  #remember(tenant: string, loaded: Loaded): void {
    this.#cache.delete(tenant);
    let held = loaded.store.size;
    for (const c of this.#cache.values()) held += c.store.size;
    // Least recently used first out, until the new one fits.
    for (const [t, c] of this.#cache) {
      if (held <= this.#cachedTriples) break;
      this.#cache.delete(t);
      held -= c.store.size;
    }
    if (held <= this.#cachedTriples) this.#cache.set(tenant, loaded);
  }

  /** Brings the cached graph to the version just written, when it was at the version before. */
  #applyToCache(tenant: string, from: number, to: number, added: string[], removed: string[]): void {
    const cached = this.#cache.get(tenant);
    if (!cached) return;
    if (cached.version !== from) {
      this.#cache.delete(tenant);
      return;
    }
    const parser = new Parser({ format: "N-Triples" });
    for (const nt of added) {
      cached.store.addQuads(parser.parse(nt));
      cached.keys.set(nt, tripleKey(tenant, nt));
    }
    for (const nt of removed) {
      cached.store.removeQuads(parser.parse(nt));
      cached.keys.delete(nt);
    }
    cached.version = to;
  }
}

function checkTenant(tenant: string): void {
  if (!TENANT.test(tenant))
    throw new ValidationError(`${JSON.stringify(tenant.slice(0, 80))} is not a tenant id`);
}

function checkCount(n: number, what: "add" | "remove"): void {
  if (n === 0)
    throw new ValidationError(
      `Nothing to ${what}: give at least one ${what === "add" ? "triple" : "pattern"}`,
    );
  if (n > GRAPH_LIMITS.triplesPerCall)
    throw new ValidationError(
      `One call may ${what} at most ${GRAPH_LIMITS.triplesPerCall} ${what === "add" ? "triples" : "patterns"}, not ${n}: split them over several calls`,
    );
}

/** A pattern that names one variable twice matches only where its terms agree. */
function sameVariablesAgree(
  p: TriplePattern,
  q: { subject: unknown; predicate: unknown; object: unknown },
): boolean {
  const positions = [p.subject, p.predicate, p.object];
  const terms = [q.subject, q.predicate, q.object] as { equals(o: unknown): boolean }[];
  for (let i = 0; i < 3; i++)
    for (let j = i + 1; j < 3; j++) {
      const a = positions[i];
      const b = positions[j];
      if (
        a?.termType === "Variable" &&
        b?.termType === "Variable" &&
        a.value === b.value &&
        !terms[i]?.equals(terms[j])
      )
        return false;
    }
  return true;
}

const busy = (tenant: string, cause?: unknown) =>
  new ConflictError(
    `The graph of tenant ${tenant} is changing under many writers at once: try the call again`,
    { tenant },
    cause === undefined ? {} : { cause },
  );

const perState = new WeakMap<StateStore, StateGraphStore>();
/**
 * The graph store of a state store: one per state store in a process, so the tools, the HTTP API
 * and the CLI of one runtime share one cache of loaded graphs.
 */
export function graphStoreOf(state: StateStore): StateGraphStore {
  let graph = perState.get(state);
  if (!graph) {
    graph = new StateGraphStore(state);
    perState.set(state, graph);
  }
  return graph;
}
