import { DOCUMENT_LIMITS } from "../../domain/documents.ts";
import type { Actor } from "../../domain/events.ts";
import type { Caller } from "../../domain/principal.ts";
import type { Engine } from "../../engine/engine.ts";
import { ForbiddenError, isArborError } from "../../kernel/errors.ts";
import { addDocument, documentUrn } from "../../knowledge/documents.ts";
import { fetchDocument } from "../../knowledge/fetch-document.ts";
import { principalOf, ResourceAccess } from "../../store/resource-access.ts";

/**
 * Files a person shares with the bot in a chat (Slack's files, Teams' file attachments) become
 * their tenant's documents (shared/knowledge/documents.ts), as `arbor docs add` makes them: each
 * downloaded through the outbound guard within DOCUMENT_LIMITS, by the tenant's admins only (the
 * policy decides, as over the HTTP API). Answers one line per file, to tell the person.
 */
export interface SharedFile {
  name: string;
  /** Bytes, as the platform says (checked before anything is downloaded). */
  size?: number;
  /** Where to download it; absent when the platform gave none Arbor may use. */
  url?: string;
  /** What the platform says it is. */
  contentType?: string;
  /** Sent with the download (Slack's bot token). */
  headers?: Record<string, string>;
}

/** At most this many files of one message are taken. */
export const MAX_SHARED_FILES = 10;

export async function addSharedFiles(
  engine: Engine,
  person: { actor: Actor; caller: Required<Caller> },
  files: readonly SharedFile[],
): Promise<string[]> {
  const lines: string[] = [];
  const tenant = person.caller.tenant;
  for (const file of files.slice(0, MAX_SHARED_FILES)) {
    const name = file.name.slice(0, DOCUMENT_LIMITS.nameChars);
    try {
      await new ResourceAccess(engine.deps.resources, engine.deps.policy).authorize(
        principalOf(person.actor, person.caller, tenant),
        "resource.write",
        documentUrn(tenant, name),
      );
      if (file.size !== undefined && file.size > DOCUMENT_LIMITS.bytes) {
        lines.push(
          `${name}: not added, it is ${file.size} bytes and a document may have at most ${DOCUMENT_LIMITS.bytes} (4 MB). Split it into parts.`,
        );
        continue;
      }
      if (!file.url || !engine.deps.outboundFetch) {
        lines.push(`${name}: not added, the chat gave no download link Arbor may use for it.`);
        continue;
      }
      const { bytes, contentType } = await fetchDocument(engine.deps.outboundFetch, file.url, file.headers);
      const type = file.contentType ?? contentType;
      const added = await addDocument(engine.deps, {
        tenant,
        actor: person.actor.id,
        name,
        bytes,
        ...(type ? { contentType: type } : {}),
      });
      lines.push(
        added.unchanged
          ? `${name}: already among the documents, unchanged.`
          : `${name}: added to the documents; it is being read, and assistants will find it in a moment.`,
      );
    } catch (error) {
      if (!isArborError(error)) throw error;
      // The policy's refusal is said plainly; the outbound guard's (also FORBIDDEN) says where.
      const why = error instanceof ForbiddenError ? "only the tenant's admins add documents" : error.message;
      lines.push(`${name}: not added, ${why.replace(/\s+/g, " ")}.`);
    }
  }
  await engine.deps.untilDurable();
  return lines;
}
