import { hash } from "node:crypto";
import { deepFreeze } from "../domain/immutable.ts";
import {
  type AnyResource,
  parseResource,
  parseResourceAs,
  type ResourceOf,
  type ResourceType,
} from "../domain/resources.ts";
import {
  ancestors,
  descendantPrefix,
  lastElement,
  objectKey,
  qualifiedType,
  type Urn,
  urnFromKey,
} from "../domain/urn.ts";
import { ValidationError } from "../kernel/errors.ts";
import { listAll, type ObjectStore } from "../ports/object-store.ts";
import type { ResourceAnnouncer, ResourceNotice } from "./resource-events.ts";

/**
 * Typed resources over the object store: validated on write (nothing is written when invalid)
 * and on read, and returned as the type their `meta.type` names.
 *
 * Resources come back frozen (they may be shared): change a copy, `{ ...resource, field }`, and
 * put that. When the object store hands back the very bytes it was given or read before (the
 * local store's cache does), the resource parsed from them is reused instead of parsed again.
 *
 * With an announcer (the composition roots give one over the bus: resource-events.ts), every put
 * the announcer wants and every delete of something that was there is announced once it is
 * stored, as RESOURCE_PUT / RESOURCE_DELETE: every writer announces the same way, on both runtimes.
 */
export interface PutResult {
  urn: Urn;
  /** sha256 of the stored document. */
  contentHash: string;
  /** What was stored, as a read of it returns it (validated, frozen). */
  resource: AnyResource;
}

export class ResourceStore {
  readonly #objects: ObjectStore;
  /** Bytes -> the frozen resource they hold; entries go when the object store lets go of the bytes. */
  readonly #parsed = new WeakMap<Uint8Array, AnyResource>();

  readonly #announcer: ResourceAnnouncer | undefined;

  constructor(objects: ObjectStore, options: { announcer?: ResourceAnnouncer | undefined } = {}) {
    this.#objects = objects;
    this.#announcer = options.announcer;
  }

  async put(given: unknown): Promise<PutResult> {
    const parsed = parseResource(given);
    const body = Buffer.from(JSON.stringify(parsed));
    await this.#objects.put(objectKey(parsed.meta.id), body, { contentType: "application/json" });
    const resource = deepFreeze(parsed);
    this.#parsed.set(body, resource);
    let digest: string | undefined;
    const written: PutResult = {
      urn: parsed.meta.id as Urn,
      resource,
      // Worked out when asked for: a task's transcript is never announced.
      get contentHash() {
        digest ??= hash("sha256", body);
        return digest;
      },
    };
    const { meta } = parsed;
    if (this.#announcer?.announces(meta))
      await this.#announcer.announce("RESOURCE_PUT", {
        urn: meta.id,
        resourceType: meta.type,
        name: meta.name,
        contentHash: written.contentHash,
      });
    return written;
  }

  /**
   * Resolves once the notices of the writes so far are published (a deferred announcer's: the AWS
   * runtime's); throws the first that failed. A function awaits it before its invocation ends.
   */
  settled(): Promise<void> {
    return this.#announcer?.settled() ?? Promise.resolve();
  }

  async get(urn: string): Promise<AnyResource | undefined> {
    const [doc] = await this.getMany([urn]);
    return doc;
  }

  /** Like get, but the resource must exist and be of `type`. */
  async getAs<T extends ResourceType>(type: T, urn: string): Promise<ResourceOf<T> | undefined> {
    const bytes = await this.#objects.get(objectKey(urn));
    if (bytes === undefined) return undefined;
    const known = this.#parsed.get(bytes);
    if (known?.meta.type === type && known.meta.id === urn) return known as ResourceOf<T>;
    return this.#remember(bytes, parseResourceAs(type, decode(urn, bytes))) as ResourceOf<T>;
  }

  async getMany(urns: readonly string[]): Promise<(AnyResource | undefined)[]> {
    const docs = await this.#objects.getMany(urns.map(objectKey));
    return docs.map((bytes, i) => (bytes === undefined ? undefined : this.#read(urns[i] as string, bytes)));
  }

  #read(urn: string, bytes: Uint8Array): AnyResource {
    const known = this.#parsed.get(bytes);
    if (known?.meta.id === urn) return known;
    return this.#remember(bytes, readResource(urn, bytes));
  }

  #remember(bytes: Uint8Array, resource: AnyResource): AnyResource {
    const frozen = deepFreeze(resource);
    this.#parsed.set(bytes, frozen);
    return frozen;
  }

  /** The ancestors that exist, root first. */
  async ancestorsOf(urn: string): Promise<AnyResource[]> {
    return (await this.getMany(ancestors(urn))).filter((r): r is AnyResource => r !== undefined);
  }

  /** URNs directly below `urn` (one level), optionally of one type, in key order. */
  async childUrns(urn: string, type?: ResourceType): Promise<Urn[]> {
    // Of one type: only keys that start with it are listed (a tenant's assistants, not its conversations).
    return this.#listUrns(`${descendantPrefix(urn)}${type ? `${type}.` : ""}`, "/", type);
  }

  /**
   * One page of the URNs directly below `urn`, in key order: at most `limit`, after `cursor` (the
   * previous page's). For a caller that pages through a level too large to read at once.
   */
  async childPage(
    urn: string,
    options: { limit: number; cursor?: string },
  ): Promise<{ urns: Urn[]; cursor?: string }> {
    const prefix = descendantPrefix(urn);
    const page = await this.#objects.list(prefix, {
      delimiter: "/",
      limit: options.limit,
      ...(options.cursor ? { cursor: options.cursor } : {}),
    });
    // A cursor comes from the caller: whatever it points at, only keys under the prefix count.
    const urns = page.keys.flatMap((key) => {
      const child = key.startsWith(prefix) && !key.includes("/", prefix.length) ? urnFromKey(key) : undefined;
      return child ? [child] : [];
    });
    return { urns, ...(page.cursor ? { cursor: page.cursor } : {}) };
  }

  /** URNs anywhere below `urn`, optionally of one type, in key order. */
  async descendantUrns(urn: string, type?: ResourceType): Promise<Urn[]> {
    return this.#listUrns(descendantPrefix(urn), undefined, type);
  }

  async children(urn: string, type?: ResourceType): Promise<AnyResource[]> {
    return this.#load(await this.childUrns(urn, type));
  }

  async descendants(urn: string, type?: ResourceType): Promise<AnyResource[]> {
    return this.#load(await this.descendantUrns(urn, type));
  }

  /**
   * Removes a resource; true when it was there. Announced (RESOURCE_DELETE, naming the hash of
   * what was removed) only when it was: deleting what is absent changes nothing and says nothing.
   */
  async delete(urn: string): Promise<boolean> {
    const key = objectKey(urn);
    const bytes = await this.#objects.get(key);
    if (bytes === undefined) return false;
    await this.#objects.delete(key);
    if (this.#announcer)
      await this.#announcer.announce("RESOURCE_DELETE", deletedNotice(urn, bytes, this.#parsed.get(bytes)));
    return true;
  }

  async #listUrns(prefix: string, delimiter: string | undefined, type?: ResourceType): Promise<Urn[]> {
    const out: Urn[] = [];
    for await (const page of listAll(this.#objects, prefix, delimiter ? { delimiter } : {})) {
      for (const key of page.keys) {
        const urn = urnFromKey(key);
        if (urn && (type === undefined || qualifiedType(lastElement(urn)) === type)) out.push(urn);
      }
    }
    return out;
  }

  async #load(urns: Urn[]): Promise<AnyResource[]> {
    // A resource deleted between listing and reading is simply not returned.
    return (await this.getMany(urns)).filter((r): r is AnyResource => r !== undefined);
  }
}

/** What a delete's notice says of the document removed (one that no longer parses: its URN's type). */
function deletedNotice(urn: string, bytes: Uint8Array, known: AnyResource | undefined): ResourceNotice {
  let meta: { type: string; name: string } | undefined = known?.meta.id === urn ? known.meta : undefined;
  if (!meta) {
    try {
      meta = readResource(urn, bytes).meta;
    } catch {
      const last = lastElement(urn);
      meta = { type: qualifiedType(last), name: last.id };
    }
  }
  return { urn, resourceType: meta.type, name: meta.name, contentHash: hash("sha256", bytes) };
}

function decode(urn: string, bytes: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch (cause) {
    throw new ValidationError(`Stored resource ${urn} is not valid JSON`, [], { cause });
  }
}

function readResource(urn: string, bytes: Uint8Array): AnyResource {
  const resource = parseResource(decode(urn, bytes));
  if (resource.meta.id !== urn) {
    throw new ValidationError(`Stored resource under ${urn} names itself ${resource.meta.id}`);
  }
  return resource;
}
