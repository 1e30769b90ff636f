import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { DOCUMENT_LIMITS } from "../../shared/domain/documents.ts";
import { isUrn } from "../../shared/domain/urn.ts";
import { ConflictError, ValidationError } from "../../shared/kernel/errors.ts";
import {
  addDocument,
  type DocumentSummary,
  deleteDocument,
  documentUrn,
  getDocument,
  listDocuments,
} from "../../shared/knowledge/documents.ts";
import { fetchDocument } from "../../shared/knowledge/fetch-document.ts";
import { processDocument } from "../../shared/knowledge/process-document.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { scriptedModel } from "../../shared/runtime/local/local-parts.ts";
import { createEmbedder } from "../../shared/runtime/models.ts";
import { loadToolsConfig } from "../../shared/tools/service/config.ts";
import { type Command, type Options, UsageError, type Write } from "../command.ts";
import { localConfig, withRuntime } from "./local.ts";
import { checkTenantOption, enc, type Remote } from "./remote.ts";

/**
 * `arbor docs add|ls|rm`: the tenant's documents (shared/knowledge/documents.ts), on the local data
 * folder or, with ARBOR_URL and an admin's ARBOR_KEY, through `/v1/documents`. Adding shows each
 * document's progress until it is ready (or failed, saying why); the exit code is 1 when any failed.
 */
type Sub = "add" | "ls" | "rm";

/** What `add` was given: a file, a URL, or the documents of a folder. */
interface Source {
  name: string;
  url?: string;
  path?: string;
}

const READABLE = /\.(md|markdown|txt|text|html?|pdf)$/i;
/** The most files one folder may add at once. */
const MAX_FILES = 1_000;

function sourcesOf(args: readonly string[], name: string | undefined): Source[] {
  if (args.length === 0) throw new UsageError("Name a file, a folder or a URL to add");
  const sources: Source[] = [];
  for (const arg of args) {
    if (/^https?:\/\//i.test(arg)) {
      sources.push({ name: arg, url: arg });
      continue;
    }
    const path = resolve(arg);
    let stat: ReturnType<typeof statSync>;
    try {
      stat = statSync(path);
    } catch {
      throw new ValidationError(`${arg}: no such file or folder`);
    }
    if (!stat.isDirectory()) {
      sources.push({ name: basename(path), path });
      continue;
    }
    const root = resolve(path, "..");
    for (const file of walk(path))
      sources.push({ name: relative(root, file).split("\\").join("/"), path: file });
  }
  if (sources.length > MAX_FILES)
    throw new ValidationError(`${sources.length} files: add at most ${MAX_FILES} at once`);
  if (name !== undefined) {
    if (sources.length !== 1) throw new UsageError("--name names one document: give one file or URL with it");
    (sources[0] as Source).name = name;
  }
  return sources;
}

/** A folder's readable files, recursively, in name order (hidden ones left out). */
function* walk(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    if (entry.name.startsWith(".")) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile() && READABLE.test(entry.name)) yield path;
  }
}

function readFile(source: Source): Uint8Array {
  const size = statSync(source.path as string).size;
  if (size > DOCUMENT_LIMITS.bytes)
    throw new ValidationError(
      `${source.name} is ${size} bytes; a document may have at most ${DOCUMENT_LIMITS.bytes} (4 MB): split it into parts`,
    );
  return readFileSync(source.path as string);
}

const line = (d: Pick<DocumentSummary, "status" | "chunks" | "pages" | "error">) =>
  d.status === "ready"
    ? `ready, ${d.chunks ?? 0} chunk${d.chunks === 1 ? "" : "s"}${d.pages ? ` from ${d.pages} page${d.pages === 1 ? "" : "s"}` : ""}`
    : d.status === "failed"
      ? `failed: ${d.error ?? "no reason given"}`
      : d.status;

function printList(documents: readonly DocumentSummary[], write: Write): void {
  if (documents.length === 0) {
    write("No documents. Add one with: arbor docs add <file|folder|url>");
    return;
  }
  for (const d of documents) write(`${d.name}  ${line(d)}  ${d.urn}`);
}

export async function docsLocal(
  command: Pick<Command, "name" | "remote">,
  sub: Sub,
  args: readonly string[],
  options: Options,
  write: Write,
): Promise<number> {
  const config = await localConfig(command);
  const tenant = options.tenant ?? config.tenant;
  if (sub === "ls")
    return withRuntime(command, async (rt) => {
      const documents: DocumentSummary[] = [];
      let cursor: string | undefined;
      do {
        const page = await listDocuments(rt, tenant, { ...(cursor ? { cursor } : {}) });
        documents.push(...page.documents);
        cursor = page.cursor;
      } while (cursor);
      printList(documents, write);
      return 0;
    });
  const sources = sub === "add" ? sourcesOf(args, options.name) : [];
  if (sub === "rm" && args.length !== 1)
    throw new UsageError("Name one document (its URN or name) to remove");
  let rt: ReturnType<typeof createLocalRuntime>;
  try {
    rt = createLocalRuntime(config, { lockAs: `arbor docs ${sub}` });
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    throw new ConflictError(
      `${error.message}\nIf that is an \`arbor serve\`, add documents through it: ` +
        `ARBOR_URL=<its URL, e.g. http://127.0.0.1:8787> ARBOR_KEY=<an admin key of ${tenant}> arbor docs ${sub} ...`,
    );
  }
  try {
    // The embedder arbor serve uses on this folder (a model server's, when one is configured): the
    // chunks go into the index it searches.
    const embedder = createEmbedder(config.model);
    const engine = await createLocalEngine(rt, {
      llm: scriptedModel(),
      toolsConfig: loadToolsConfig(config.toolsFile),
      warnToolGaps: false,
      ...(embedder ? { embedder } : {}),
    });
    const deps = engine.deps;
    try {
      if (sub === "rm") {
        const arg = args[0] as string;
        const urn = isUrn(arg) ? arg : documentUrn(tenant, arg);
        await deleteDocument(deps, tenant, urn);
        write(`Removed ${arg} (${urn}) with its chunks.`);
        return 0;
      }
      let failed = 0;
      for (const source of sources) {
        let bytes: Uint8Array;
        let contentType: string | undefined;
        try {
          if (source.url) {
            if (!deps.outboundFetch) throw new ValidationError("This Arbor fetches no URL");
            ({ bytes, contentType } = await fetchDocument(deps.outboundFetch, source.url));
          } else bytes = readFile(source);
          const added = await addDocument(deps, {
            tenant,
            actor: "cli",
            name: source.name,
            bytes,
            ...(contentType ? { contentType } : {}),
          });
          if (added.unchanged) {
            write(`${source.name}: unchanged (${added.status})`);
            continue;
          }
          // Progress while it is processed: the record counts the chunks embedded.
          let said = "";
          const timer = setInterval(() => {
            void getDocument(deps, tenant, added.urn).then((d) => {
              const now = d.embedded !== undefined && d.chunks ? `${d.embedded} of ${d.chunks} chunks` : "";
              if (!now || now === said) return;
              said = now;
              write(`${source.name}: ${now}`);
            });
          }, 1_000);
          try {
            await processDocument(deps, added.urn);
          } finally {
            clearInterval(timer);
          }
          const done = await getDocument(deps, tenant, added.urn);
          if (done.status === "failed") failed++;
          write(`${source.name}: ${line(done)}  ${added.urn}`);
        } catch (error) {
          if (!(error instanceof ValidationError || error instanceof ConflictError) && !isTooLarge(error))
            throw error;
          failed++;
          write(`${source.name}: not added: ${(error as Error).message}`);
        }
      }
      return failed ? 1 : 0;
    } finally {
      await engine.close();
    }
  } finally {
    await rt.close();
  }
}

const isTooLarge = (e: unknown) => (e as { code?: string } | null)?.code === "TOO_LARGE";

export async function docsRemote(
  remote: Remote,
  sub: Sub,
  args: readonly string[],
  options: Options,
  write: Write,
  sleep: (ms: number) => Promise<unknown> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<number> {
  await checkTenantOption(remote, options.tenant);
  if (sub === "ls") {
    const documents: DocumentSummary[] = [];
    let cursor: string | undefined;
    do {
      const page = await remote.get<{ documents: DocumentSummary[]; cursor?: string }>(
        `/v1/documents${cursor ? `?cursor=${enc(cursor)}` : ""}`,
        { documents: "array" },
      );
      documents.push(...page.documents);
      cursor = page.cursor;
    } while (cursor);
    printList(documents, write);
    return 0;
  }
  if (sub === "rm") {
    if (args.length !== 1) throw new UsageError("Name one document (its URN or name) to remove");
    const arg = args[0] as string;
    const { tenant } = await remote.get<{ tenant: string }>("/v1/me", { tenant: "string" });
    const urn = isUrn(arg) ? arg : documentUrn(tenant, arg);
    await remote.delete(`/v1/documents/${enc(urn)}`);
    write(`Removed ${arg} (${urn}) with its chunks.`);
    return 0;
  }
  let failed = 0;
  for (const source of sourcesOf(args, options.name)) {
    type Added = { urn: string; status: string; unchanged: boolean };
    let added: Added;
    try {
      added = source.url
        ? await remote.post<Added>("/v1/documents", {
            url: source.url,
            ...(options.name ? { name: source.name } : {}),
          })
        : await remote.postBytes<Added>(
            `/v1/documents?name=${enc(source.name)}`,
            readFile(source),
            "application/octet-stream",
            { urn: "string" },
          );
    } catch (error) {
      if (!(error instanceof Error) || !("status" in error)) throw error;
      failed++;
      write(`${source.name}: not added: ${error.message}`);
      continue;
    }
    if (added.unchanged) {
      write(`${source.name}: unchanged (${added.status})`);
      continue;
    }
    // Processed by the server's documents step: its state is asked for until it is done.
    let said = "";
    const until = Date.now() + 10 * 60_000;
    for (;;) {
      const d = await remote.get<DocumentSummary>(`/v1/documents/${enc(added.urn)}`, { status: "string" });
      if (d.status === "ready" || d.status === "failed") {
        if (d.status === "failed") failed++;
        write(`${source.name}: ${line(d)}  ${added.urn}`);
        break;
      }
      const now = d.embedded !== undefined && d.chunks ? `${d.embedded} of ${d.chunks} chunks` : d.status;
      if (now !== said) {
        said = now;
        write(`${source.name}: ${now}`);
      }
      if (Date.now() > until) {
        write(`${source.name}: still ${d.status} after 10 minutes; see arbor docs ls`);
        break;
      }
      await sleep(1_000);
    }
  }
  return failed ? 1 : 0;
}
