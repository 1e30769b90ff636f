import { type MissingTools, missingTools } from "../domain/team.ts";
import { DEFAULT_TOOLS } from "../tools/service/config.ts";
import type { EngineDeps } from "./context.ts";
import { DEFAULT_TEAM } from "./default-team.ts";
import { activeAssistants } from "./team.ts";

/**
 * Teams that list tools the tool registry does not have. A tools file (ARBOR_TOOLS_FILE, `-c tools`)
 * replaces the built-in tools, while the built-in team (or a tenant's team applied earlier) may still
 * list them: the model is then never offered those tools, and nothing else says so. Found when
 * Arbor starts, and said in the log (and by `arbor serve` in what it prints), naming the assistants.
 */
export interface TeamToolGap {
  /** Whose team: "the default team" or "tenant <id>'s team". */
  team: string;
  /** The tenant whose stored team it is; absent for the default team. */
  tenant?: string;
  missing: MissingTools[];
}

type GapDeps = Pick<EngineDeps, "settings" | "tools">;

const registryNames = (deps: GapDeps) => deps.tools.list().map((t) => t.name);

/** The gap of the team a tenant without assistants gets (settings.defaultTeam, else DEFAULT_TEAM), if any. */
export function defaultTeamToolGap(deps: GapDeps): TeamToolGap | undefined {
  const assistants = deps.settings.defaultTeam?.assistants ?? DEFAULT_TEAM;
  const missing = missingTools(assistants, registryNames(deps));
  return missing.length > 0 ? { team: "the default team", missing } : undefined;
}

/** The gaps of the default team and of the stored teams of `tenants` (their active assistants). */
export async function teamToolGaps(
  deps: GapDeps & Pick<EngineDeps, "resources">,
  tenants: readonly string[],
): Promise<TeamToolGap[]> {
  const gaps: TeamToolGap[] = [];
  const fallback = defaultTeamToolGap(deps);
  if (fallback) gaps.push(fallback);
  const names = registryNames(deps);
  for (const tenant of tenants) {
    const stored = (await activeAssistants(deps, tenant)).map((a) => ({ name: a.meta.name, tools: a.tools }));
    const missing = missingTools(stored, names);
    if (missing.length > 0) gaps.push({ team: `tenant ${tenant}'s team`, tenant, missing });
  }
  return gaps;
}

/** One gap, said so that a person knows what is wrong and what to do. */
export function toolGapMessage(gap: TeamToolGap): string {
  const tools = [...new Set(gap.missing.flatMap((m) => m.tools))];
  const who = gap.missing.map((m) => `${m.assistant} (${m.tools.join(", ")})`).join(", ");
  const builtins = tools.filter((t) => t in DEFAULT_TOOLS.tools);
  const example = builtins
    .slice(0, 2)
    .map((t) => `"${t}": ${JSON.stringify(DEFAULT_TOOLS.tools[t])}`)
    .join(", ");
  return (
    `The tool registry has no ${tools.join(", ")}, which ${gap.team} lists: ${who}. ` +
    "Those assistants will not be offered these tools. A tools file (ARBOR_TOOLS_FILE, -c tools at deploy) " +
    "replaces the built-in tools: add them to it" +
    (example ? ` (built-ins are entries such as ${example})` : "") +
    ", or give the team tools the registry has (ARBOR_TEAM_FILE, or arbor team apply <file>)."
  );
}
