import { createInterface } from "node:readline/promises";
import { changesAnything, type TeamDiff, type TeamFile, teamEntryOf } from "../../shared/domain/team.ts";
import { activeAssistants } from "../../shared/engine/team.ts";
import { ConflictError, ValidationError } from "../../shared/kernel/errors.ts";
import type { LocalConfig } from "../../shared/runtime/config.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { scriptedModel } from "../../shared/runtime/local/local-parts.ts";
import { readTeamJson } from "../../shared/store/team-file.ts";
import { loadToolsConfig } from "../../shared/tools/service/config.ts";
import { UsageError } from "../command.ts";
import type { Remote } from "./remote.ts";
import { heading, note } from "./render.ts";

/**
 * `arbor team apply <file> [--yes] [--dry-run]` and `arbor team show`: a tenant's team, on the local
 * data folder (ARBOR_TENANT, or --tenant) or, with ARBOR_URL and an admin's ARBOR_KEY, on a remote
 * Arbor through `GET` / `PUT /v1/admin/team`. The change is shown before it is applied; without
 * --yes it is applied only when the person at the terminal says yes.
 */

type Write = (line: string) => void;

export interface TeamApplyOptions {
  file: string | undefined;
  yes: boolean;
  dryRun: boolean;
}

/** How a diff reads, one line per assistant, then the totals. */
export function describeDiff(diff: TeamDiff, write: Write): void {
  for (const e of diff.added) write(`  + ${e.name.padEnd(24)} ${note(`added   ${e.urn}`)}`);
  for (const e of diff.changed) write(`  ~ ${e.name.padEnd(24)} ${note(`changed ${e.fields.join(", ")}`)}`);
  for (const e of diff.removed)
    write(`  - ${e.name.padEnd(24)} ${note("removed (retired: no longer elected; tasks it has finish)")}`);
  for (const e of diff.unchanged) write(`  = ${e.name.padEnd(24)} ${note("unchanged")}`);
  write(
    `${diff.added.length} to add, ${diff.changed.length} to change, ${diff.removed.length} to remove, ${diff.unchanged.length} unchanged`,
  );
}

/** Yes from the terminal (y/N), --yes, or a refusal when nobody can be asked. */
async function confirmed(yes: boolean, write: Write): Promise<boolean> {
  if (yes) return true;
  if (!process.stdin.isTTY) {
    write("Not applied: nobody at a terminal to confirm it. Pass --yes to apply it without asking.");
    return false;
  }
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await rl.question("Apply this change? [y/N] ");
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

interface Target {
  where: string;
  plan(raw: unknown): Promise<TeamDiff>;
  apply(raw: unknown): Promise<TeamDiff>;
}

async function applyWith(target: Target, options: TeamApplyOptions, write: Write): Promise<number> {
  const raw = readTeamJson(options.file as string);
  const planned = await target.plan(raw).catch((error: Error) => {
    // A file the server refused (400 naming the fields) or the local engine did: say which file.
    const refused = (error as { code?: string; status?: number }).code === "VALIDATION";
    throw refused
      ? new ValidationError(`${options.file} was refused, nothing was applied. ${error.message}`)
      : error;
  });
  write(`${heading("Team")} of ${target.where}, from ${options.file}:`);
  describeDiff(planned, write);
  if (!changesAnything(planned)) {
    write("Nothing to change.");
    return 0;
  }
  if (options.dryRun) {
    write(note("Dry run: nothing was applied."));
    return 0;
  }
  if (!(await confirmed(options.yes, write))) return 2;
  const applied = await target.apply(raw);
  if (changeOf(applied) !== changeOf(planned)) {
    // Someone changed the team between the diff shown and the apply: say what was really done.
    write(
      "The team changed after the diff above was shown (another admin applied a file?): the apply did this instead:",
    );
    describeDiff(applied, write);
    write(note("The team is now what the file says. Check it with `arbor team show`."));
    return 1;
  }
  write(
    `Applied: ${applied.added.length} added, ${applied.changed.length} changed, ${applied.removed.length} retired.`,
  );
  return 0;
}

/** What a diff changes (which assistants are added, changed, retired), comparable as a string. */
const changeOf = (d: TeamDiff): string =>
  JSON.stringify([d.added, d.changed, d.removed].map((l) => l.map((e) => e.urn).sort()));

export async function teamApplyLocal(
  config: LocalConfig,
  tenant: string,
  options: TeamApplyOptions,
  write: Write,
): Promise<number> {
  if (!options.file) throw new UsageError();
  readTeamJson(options.file); // a missing or broken file is said before the data folder is opened
  let rt: ReturnType<typeof createLocalRuntime>;
  try {
    rt = createLocalRuntime(config, { lockAs: "arbor team apply" });
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    throw new ConflictError(
      `${error.message}\nIf that is an \`arbor serve\`, change its team through it: ` +
        `ARBOR_URL=<its URL, e.g. http://127.0.0.1:8787> ARBOR_KEY=<an admin key of ${tenant}> arbor team apply ${options.file}`,
    );
  }
  try {
    // The team is checked against the tools this folder's Arbor has (ARBOR_TOOLS_FILE); no model runs.
    const engine = await createLocalEngine(rt, {
      llm: scriptedModel(),
      toolsConfig: loadToolsConfig(config.toolsFile),
    });
    try {
      return await applyWith(
        {
          where: `tenant ${tenant} in ${config.dataDir}`,
          plan: (raw) => engine.applyTeam(tenant, raw, { dryRun: true }),
          apply: (raw) => engine.applyTeam(tenant, raw),
        },
        options,
        write,
      );
    } finally {
      await engine.close();
    }
  } finally {
    await rt.close();
  }
}

export async function teamApplyRemote(
  remote: Remote,
  options: TeamApplyOptions,
  write: Write,
): Promise<number> {
  if (!options.file) throw new UsageError();
  const put = async (raw: unknown, dryRun: boolean) =>
    (
      await remote.put<{ tenant: string; diff: TeamDiff }>(
        `/v1/admin/team${dryRun ? "?dryRun=true" : ""}`,
        raw,
        { diff: "object" },
      )
    ).diff;
  return applyWith(
    { where: `Arbor at ${remote.url}`, plan: (raw) => put(raw, true), apply: (raw) => put(raw, false) },
    options,
    write,
  );
}

/** The team as a team file (it applies as it is). */
export async function teamShowLocal(config: LocalConfig, tenant: string, write: Write): Promise<void> {
  const rt = createLocalRuntime(config); // reads only: no lock, works beside a running server
  try {
    const team: TeamFile = { assistants: (await activeAssistants(rt, tenant)).map(teamEntryOf) };
    write(JSON.stringify(team, null, 2));
    if (team.assistants.length === 0)
      write(note(`Tenant ${tenant} has no team yet: its first request gets the default team.`));
  } finally {
    await rt.close();
  }
}

export async function teamShowRemote(remote: Remote, write: Write): Promise<void> {
  const { team } = await remote.get<{ team: TeamFile }>("/v1/admin/team", { team: "object" });
  write(JSON.stringify(team, null, 2));
}
