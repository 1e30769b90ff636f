import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, type CfnResource, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import type { IConstruct } from "constructs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp, readTeam, readToolRegistry, SettingsError } from "../../../infra/app.ts";
import { PROJECT_ROOT } from "../../../infra/constructs/function-bundle.ts";
import { DEPLOYED_TEAM_FILE } from "../../../infra/constructs/team-file.ts";
import type { EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { ROUTES } from "../../../shared/engine/routes.ts";
import { readTeamFile } from "../../../shared/store/team-file.ts";
import { DEFAULT_TOOLS } from "../../../shared/tools/service/config.ts";

/**
 * `-c team=<file>`: the deployment's default team, validated at synth exactly as the functions
 * validate ARBOR_TEAM_FILE, shipped as team.json in the bundle of the API function, which takes a
 * tenant's first request (and so gives it the default team); no other function reads it.
 */
const cdkJson = JSON.parse(readFileSync(new URL("../../../cdk.json", import.meta.url), "utf8")) as {
  context: Record<string, unknown>;
};
const TEAM = "test/fixtures/team/team.json";
const tmp = mkdtempSync(join(tmpdir(), "arbor-infra-team-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const file = (name: string, content: unknown) => {
  const path = join(tmp, name);
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content));
  return path;
};
/** Reads the context as createApp does, without synthesizing anything. */
const read = (context: Record<string, unknown>) => {
  const app = new App({ context });
  return readTeam(app, readToolRegistry(app));
};

interface Fn {
  Environment: { Variables: Record<string, unknown> };
  Code: { S3Key: string };
}

describe("-c team=<file>", () => {
  let app: App;
  let engine: EngineStack;
  let template: Template;
  beforeAll(() => {
    ({ app, engine } = createApp({
      context: { ...cdkJson.context, stage: "prod", team: TEAM },
      processEnv: {},
    }));
    app.synth(); // cdk-nag runs here and throws on any finding
    template = Template.fromStack(engine);
  });

  const fnProps = (c: IConstruct) => {
    const id = Stack.of(c).getLogicalId((c.node.defaultChild ?? c) as CfnResource);
    return (template.toJSON().Resources as Record<string, { Properties: Fn }>)[id]?.Properties as Fn;
  };

  it("ships the validated team in the API function's bundle as team.json, which ARBOR_TEAM_FILE names", () => {
    const expected = readTeamFile(join(PROJECT_ROOT, TEAM), Object.keys(DEFAULT_TOOLS.tools));
    const props = fnProps(engine.api.function.function);
    expect(props.Environment.Variables.ARBOR_TEAM_FILE).toBe(DEPLOYED_TEAM_FILE);
    const bundle = join(app.outdir, `asset.${props.Code.S3Key.replace(/\.zip$/, "")}`);
    // What the function reads at cold start, as it reads it.
    expect(readTeamFile(join(bundle, "team.json"), Object.keys(DEFAULT_TOOLS.tools))).toEqual(expected);
    expect(DEPLOYED_TEAM_FILE).toBe("/var/task/team.json");
    // The other functions take no request, so they never give a tenant its first team.
    const others = [...ROUTES.map((r) => engine.steps[r.name]), engine.watchdog, engine.tools.handler];
    for (const fn of others)
      expect(fnProps(fn.function).Environment.Variables).not.toHaveProperty("ARBOR_TEAM_FILE");
  });

  it("leaves ARBOR_TEAM_FILE out without the key", () => {
    expect(read({})).toBeUndefined();
  });

  it("refuses a missing file, naming it and the key", () => {
    expect(() => read({ team: join(tmp, "nope.json") })).toThrow(SettingsError);
    expect(() => read({ team: join(tmp, "nope.json") })).toThrow(/nope\.json.*-c team=/s);
  });

  it("refuses a file that is not JSON", () => {
    expect(() => read({ team: file("broken.json", "{ assistants: ") })).toThrow(/broken\.json.*not JSON/s);
  });

  it("refuses bad fields, naming the file and each field", () => {
    const bad = file("bad.json", {
      assistants: [
        { name: "", purpose: "x", extra: 1 },
        { name: "A", purpose: "y", id: "no spaces" },
      ],
    });
    const error = (() => {
      try {
        read({ team: bad });
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(SettingsError);
    expect(error?.message).toContain(bad);
    expect(error?.message).toMatch(/assistants\.0\.name/);
    expect(error?.message).toMatch(/assistants\.0: Unrecognized key: "extra"/);
    expect(error?.message).toMatch(/assistants\.1\.id/);
  });

  it("checks tools against the registry the functions will have: the built-ins, or -c tools", () => {
    const team = { assistants: [{ name: "Pricer", purpose: "Quote prices", tools: ["quote_price"] }] };
    const withLambdaTool = file("pricer.json", team);
    expect(() => read({ team: withLambdaTool })).toThrow(
      /assistants\.0\.tools\.0: unknown tool "quote_price"/,
    );
    const deployed = read({ team: withLambdaTool, tools: "test/fixtures/tools/deployed-tools.json" });
    expect(deployed?.team.assistants[0]?.tools).toEqual(["quote_price"]);
  });
});
