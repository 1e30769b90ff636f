import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Stage } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import type { TeamFile } from "../../shared/domain/team.ts";
import { ConfigError } from "../../shared/kernel/errors.ts";
import { LAMBDA_TASK_ROOT } from "./tool-registry.ts";

/**
 * The deployment's default team (`-c team=<file>`): validated at synth as the functions validate
 * ARBOR_TEAM_FILE (shared/store/team-file.ts, against the deployed tool registry), written
 * into each bundle as `team.json`, with ARBOR_TEAM_FILE pointing at it. The engine gives it to
 * every tenant that has no assistants, before that tenant's first request is planned.
 */
export interface DeployedTeam {
  /** What readTeamFile returned for the file. */
  readonly team: TeamFile;
  /** Where it was read from, as given: for messages only, never in a template. */
  readonly source: string;
}

/** The team's name inside each function bundle. */
export const BUNDLED_TEAM_FILE = "team.json";

/** ARBOR_TEAM_FILE of a function deployed with a team. */
export const DEPLOYED_TEAM_FILE = `${LAMBDA_TASK_ROOT}/${BUNDLED_TEAM_FILE}`;

/**
 * Writes the team, as validated, where the functions' bundling copies it from
 * (`cdk.out/team.<sha256>.json`): the same team gives the same file and bundle. Returns that path.
 */
export function stageTeamFile(scope: IConstruct, team: TeamFile): string {
  const json = `${JSON.stringify(team, null, 2)}\n`;
  const sha256 = createHash("sha256").update(json).digest("hex");
  const stage = Stage.of(scope);
  if (!stage)
    throw new ConfigError(
      `${scope.node.path} is not in a CDK app: the team file has nowhere to go; add the stack to an App`,
    );
  mkdirSync(stage.assetOutdir, { recursive: true });
  const path = join(stage.assetOutdir, `team.${sha256}.json`);
  writeFileSync(path, json);
  return path;
}
