import * as z from "zod";
import { ValidationError } from "../kernel/errors.ts";
import { endOfLife } from "./model-catalogue.ts";
import { type Assistant, DescriptorsSchema, formatIssues, ToolCallSchema, withMeta } from "./resources.ts";
import { tenantUrn, type Urn } from "./urn.ts";

/**
 * A team file: the assistants of a tenant, as `arbor team apply <file>`, `PUT /v1/admin/team`,
 * `-c team=<file>` and ARBOR_TEAM_FILE take them.
 *
 *   { "assistants": [ { "name": "Writer", "id": "writer", "purpose": "Write and edit texts",
 *                       "applicability": "...", "tools": ["word_count"], "model": "..." } ] }
 *
 * Validated with zod (each bad field named), then against the tool registry the runtime has (a
 * tool nobody can call is refused). The diff against what a tenant has stored (teamDiff) is what a
 * person sees before anything is applied.
 */
export const MAX_TEAM_ASSISTANTS = 100;
export const MAX_ASSISTANT_TOOLS = 64;
/** The largest team file read from disk (a request body has the HTTP API's own bound). */
export const MAX_TEAM_FILE_BYTES = 1024 * 1024;

const ASSISTANT_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const TeamAssistantSchema = z
  .object({
    name: z.string().trim().min(1, "must not be empty").max(200),
    /** The assistant's id in its URN (`cld:common.Tenant.t/common.Assistant.<id>`); default: a hash of the name. */
    id: z.string().regex(ASSISTANT_ID, "1-64 of a-z A-Z 0-9 _ -").optional(),
    /** What it is for: election compares this (with the other descriptors) to each task's. */
    purpose: z.string().trim().min(1, "must say what the assistant is for").max(4000),
    instructions: DescriptorsSchema.shape.instructions,
    applicability: DescriptorsSchema.shape.applicability,
    evaluation: DescriptorsSchema.shape.evaluation,
    tools: z.array(ToolCallSchema.shape.name).max(MAX_ASSISTANT_TOOLS).optional(),
    model: z
      .string()
      .min(1)
      .max(200)
      .superRefine((model, ctx) => {
        const retired = endOfLife(model);
        if (retired) ctx.addIssue({ code: "custom", message: retired });
      })
      .optional(),
  })
  .strict();
export type TeamAssistant = z.infer<typeof TeamAssistantSchema>;

export const TeamFileSchema = z
  .object({
    assistants: z
      .array(TeamAssistantSchema)
      .min(1, "a team needs at least one assistant")
      .max(MAX_TEAM_ASSISTANTS),
  })
  .strict()
  .superRefine((team, ctx) => {
    const names = new Map<string, number>();
    const ids = new Map<string, number>();
    for (const [i, a] of team.assistants.entries()) {
      const name = a.name.toLowerCase();
      const sameName = names.get(name);
      if (sameName !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["assistants", i, "name"],
          message: `"${a.name}" is also the name of assistants.${sameName}: names must differ`,
        });
      else names.set(name, i);
      if (a.id !== undefined) {
        const sameId = ids.get(a.id);
        if (sameId !== undefined)
          ctx.addIssue({
            code: "custom",
            path: ["assistants", i, "id"],
            message: `"${a.id}" is also the id of assistants.${sameId}: ids must differ`,
          });
        else ids.set(a.id, i);
      }
      const tools = new Set<string>();
      for (const [j, tool] of (a.tools ?? []).entries()) {
        if (tools.has(tool))
          ctx.addIssue({
            code: "custom",
            path: ["assistants", i, "tools", j],
            message: `"${tool}" is listed twice`,
          });
        tools.add(tool);
      }
    }
  });
export type TeamFile = z.infer<typeof TeamFileSchema>;

/**
 * Parses a team and checks its tools against `toolNames` (the registry the runtime has). Throws
 * ValidationError naming each bad field (`assistants.2.tools.0: unknown tool "fetch" ...`).
 */
export function parseTeam(raw: unknown, toolNames: readonly string[], source = "The team"): TeamFile {
  const parsed = TeamFileSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(`${source} is not valid`, formatIssues(parsed.error));
  const known = new Set(toolNames);
  const unknown = parsed.data.assistants.flatMap((a, i) =>
    (a.tools ?? []).flatMap((tool, j) =>
      known.has(tool)
        ? []
        : [
            `assistants.${i}.tools.${j}: unknown tool "${tool}"; the tool registry has ${
              toolNames.length ? [...toolNames].sort().join(", ") : "no tools"
            } (add it to ARBOR_TOOLS_FILE, or -c tools at deploy)`,
          ],
    ),
  );
  if (unknown.length > 0) throw new ValidationError(`${source} is not valid`, unknown);
  return parsed.data;
}

/** An assistant that lists tools the tool registry does not have, and which. */
export interface MissingTools {
  assistant: string;
  tools: string[];
}

/**
 * The assistants of a team (a file's, or a tenant's stored one) that list tools the registry
 * (`toolNames`) does not have: the model is never offered such a tool. Without a tools file the
 * registry is the built-ins; a tools file replaces them, so a team written for the built-ins may
 * list tools that are no longer there.
 */
export function missingTools(
  assistants: readonly { name: string; tools?: readonly string[] | undefined }[],
  toolNames: readonly string[],
): MissingTools[] {
  const known = new Set(toolNames);
  return assistants.flatMap((a) => {
    const tools = (a.tools ?? []).filter((t) => !known.has(t));
    return tools.length > 0 ? [{ assistant: a.name, tools }] : [];
  });
}

/** The URN an entry of a tenant's team is stored under. */
export const teamAssistantUrn = (tenant: string, a: Pick<TeamAssistant, "id" | "name">): Urn =>
  withMeta({ type: "common.Assistant", name: a.name, parent: tenantUrn(tenant), id: a.id }).id;

/**
 * The Assistant resource an entry becomes: its descriptors, tools and model; what the file does
 * not speak of (limits) is kept from `existing`, and a retired assistant that comes back is active.
 */
export function teamAssistantResource(tenant: string, a: TeamAssistant, existing?: Assistant): Assistant {
  const meta = withMeta({
    type: "common.Assistant",
    name: a.name,
    parent: tenantUrn(tenant),
    id: a.id,
    purpose: a.purpose,
    instructions: a.instructions,
    applicability: a.applicability,
    evaluation: a.evaluation,
  });
  return {
    meta: { ...meta, type: "common.Assistant" },
    tools: a.tools ?? [],
    ...(a.model ? { model: a.model } : {}),
    limits: existing?.limits ?? {},
  };
}

/** The fields a team file sets, in the order a diff names them. */
export const TEAM_FIELDS = [
  "name",
  "purpose",
  "instructions",
  "applicability",
  "evaluation",
  "tools",
  "model",
] as const;
export type TeamField = (typeof TEAM_FIELDS)[number];

function fieldsOf(a: Assistant): Record<TeamField, string | undefined> {
  return {
    name: a.meta.name,
    purpose: a.meta.purpose,
    instructions: a.meta.instructions,
    applicability: a.meta.applicability,
    evaluation: a.meta.evaluation,
    // The order tools are listed in means nothing to an assistant.
    tools: JSON.stringify([...a.tools].sort()),
    model: a.model,
  };
}

export interface TeamEntry {
  urn: Urn;
  name: string;
}
export interface TeamDiff {
  /** In the file, not active in the tenant (new, or retired before and back). */
  added: TeamEntry[];
  /** In both, with the fields that differ. */
  changed: (TeamEntry & { fields: TeamField[] })[];
  /** Active in the tenant, not in the file: applying retires them. */
  removed: TeamEntry[];
  unchanged: TeamEntry[];
}

/** Whether an assistant has been retired (removed from its team): kept, never elected. */
export const isRetired = (a: Assistant): boolean => a.retiredAt !== undefined;

/** What applying `team` to a tenant whose stored assistants are `stored` would change. */
export function teamDiff(tenant: string, stored: readonly Assistant[], team: TeamFile): TeamDiff {
  const byUrn = new Map(stored.map((a) => [a.meta.id as string, a]));
  const diff: TeamDiff = { added: [], changed: [], removed: [], unchanged: [] };
  const inFile = new Set<string>();
  for (const entry of team.assistants) {
    const wanted = teamAssistantResource(tenant, entry);
    const urn = wanted.meta.id as Urn;
    inFile.add(urn);
    const existing = byUrn.get(urn);
    if (!existing || isRetired(existing)) {
      diff.added.push({ urn, name: entry.name });
      continue;
    }
    const before = fieldsOf(existing);
    const after = fieldsOf(wanted);
    const fields = TEAM_FIELDS.filter((f) => before[f] !== after[f]);
    if (fields.length > 0) diff.changed.push({ urn, name: entry.name, fields });
    else diff.unchanged.push({ urn, name: entry.name });
  }
  for (const a of stored)
    if (!inFile.has(a.meta.id) && !isRetired(a))
      diff.removed.push({ urn: a.meta.id as Urn, name: a.meta.name });
  return diff;
}

/** Whether applying the diff would change anything. */
export const changesAnything = (d: TeamDiff): boolean =>
  d.added.length + d.changed.length + d.removed.length > 0;

/** A stored assistant as a team file entry (what `arbor team show` prints: a file that applies as is). */
export function teamEntryOf(a: Assistant): TeamAssistant {
  const m = a.meta;
  return {
    name: m.name,
    id: m.hash,
    purpose: m.purpose ?? m.name,
    ...(m.instructions !== undefined ? { instructions: m.instructions } : {}),
    ...(m.applicability !== undefined ? { applicability: m.applicability } : {}),
    ...(m.evaluation !== undefined ? { evaluation: m.evaluation } : {}),
    tools: [...a.tools],
    ...(a.model !== undefined ? { model: a.model } : {}),
  };
}
