import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { App, RemovalPolicy } from "aws-cdk-lib";
import type { Template } from "aws-cdk-lib/assertions";
import { AwsSolutionsChecks } from "cdk-nag";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import type { IConstruct } from "constructs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp, DEFAULT_MODEL, readToolRegistry, SettingsError } from "../../../infra/app.ts";
import {
  buildFunctionBundle,
  checkBundledFiles,
  PROJECT_ROOT,
} from "../../../infra/constructs/function-bundle.ts";
import { SENDS_NO_COMMAND } from "../../../infra/constructs/grants.ts";
import { DEPLOYED_TOOLS_FILE } from "../../../infra/constructs/tool-registry.ts";
import { EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { StorageStack } from "../../../infra/stacks/storage-stack.ts";
import { ROUTES } from "../../../shared/engine/routes.ts";
import { loadToolsConfig, parseToolsConfig } from "../../../shared/tools/service/config.ts";
import { synthesized } from "../../fixtures/synth.ts";
import { list, logicalId } from "../../support/cdk.ts";

// The same feature flags `cdk synth` gets from cdk.json, so the tests see the same templates.
const cdkJson = JSON.parse(readFileSync(new URL("../../../cdk.json", import.meta.url), "utf8")) as {
  context: Record<string, unknown>;
};

/** Relative to the project root, as `-c tools=...` takes it. */
const REGISTRY = "test/fixtures/tools/deployed-tools.json";
const registryJson = () => JSON.parse(readFileSync(join(PROJECT_ROOT, REGISTRY), "utf8")) as unknown;

interface Synthesized {
  app: App;
  engine: EngineStack;
  template: Template;
}

/**
 * The app as infra/app.ts builds it, synthesized (cdk-nag runs and throws on any finding): once per
 * test worker and context, shared with the other infra test files (test/fixtures/synth.ts).
 */
const synth = (context: Record<string, unknown>): Synthesized => synthesized(context);

const tmp = mkdtempSync(join(tmpdir(), "arbor-infra-tools-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
function registryFile(name: string, content: unknown): string {
  const file = join(tmp, name);
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

interface Fn {
  Environment: { Variables: Record<string, unknown> };
  Code: { S3Key: string };
}
const props = (s: Synthesized, c: IConstruct) =>
  (s.template.toJSON().Resources as Record<string, { Properties: Record<string, unknown> }>)[logicalId(c)]
    ?.Properties ?? {};
const fnProps = (s: Synthesized, c: IConstruct) => props(s, c) as unknown as Fn;
/** The functions that call the model: they get no registry and no grant on the tools' functions. */
const functions = (s: Synthesized) => [
  ...ROUTES.map((r) => [r.name, s.engine.steps[r.name]] as const),
  ["watchdog", s.engine.watchdog] as const,
];
const toolFn = (s: Synthesized) => s.engine.tools.handler;
/** The directory CDK bundled a function's code into (its asset, named by the hash of that output). */
const bundleOf = (s: Synthesized, c: IConstruct) =>
  join(s.app.outdir, `asset.${fnProps(s, c).Code.S3Key.replace(/\.zip$/, "")}`);

let withTools: Synthesized;
/** The same registry, given by its absolute path. */
let again: Synthesized;
/** Another registry, with no `lambda` tool. */
let withoutLambda: Synthesized;

// Three syntheses, each bundling the two entries again (a few seconds in all); the refusals need none.
beforeAll(() => {
  withTools = synth({ stage: "prod", tools: REGISTRY });
  again = synth({ stage: "prod", tools: join(PROJECT_ROOT, REGISTRY) });
  const other = registryFile("no-lambda.json", {
    tools: {
      weather: {
        kind: "http",
        url: "https://api.example.com/weather",
        description: "Today's weather for a city",
        parameters: { type: "object", properties: { city: { type: "string" } } },
      },
      venue_desk: { kind: "a2a", url: "https://venues.example.com" },
    },
  });
  withoutLambda = synth({ stage: "prod", tools: other });
}, 600_000);

describe("a deployed tool registry", () => {
  it("reaches the tool function only, as tools.json in its bundle, which ARBOR_TOOLS_FILE names", () => {
    const expected = parseToolsConfig(registryJson());
    const fn = toolFn(withTools).function;
    expect(fnProps(withTools, fn).Environment.Variables.ARBOR_TOOLS_FILE).toBe(DEPLOYED_TOOLS_FILE);
    const bundle = bundleOf(withTools, fn);
    // Read by the function's own loader: what runs on Lambda is the registry as validated at synth.
    expect(loadToolsConfig(join(bundle, "tools.json"))).toEqual(expected);
    // Beside the files every bundle has: the Cedar wasm is still there.
    expect(existsSync(join(bundle, "cedar_wasm_bg.wasm"))).toBe(true);
    expect(DEPLOYED_TOOLS_FILE).toBe("/var/task/tools.json");
    // The functions that call the model have neither the file nor the variable.
    for (const [name, step] of functions(withTools)) {
      const vars = fnProps(withTools, step.function).Environment.Variables;
      expect([name, "ARBOR_TOOLS_FILE" in vars]).toEqual([name, false]);
      expect([name, existsSync(join(bundleOf(withTools, step.function), "tools.json"))]).toEqual([
        name,
        false,
      ]);
    }
  });

  it("is a file, not an environment variable (Lambda caps them all at 4 KB)", () => {
    for (const fn of [...functions(withTools).map(([, f]) => f), toolFn(withTools)]) {
      const vars = JSON.stringify(fnProps(withTools, fn.function).Environment.Variables);
      expect(vars).not.toContain("venues.example.com");
      expect(vars).not.toContain("quote-price");
    }
  });

  it("changes the tool function's code when the registry changes, and nothing else", () => {
    const counterpart = (s: Synthesized, fn: IConstruct) =>
      fnProps(s, s.engine.node.findChild(fn.node.id).node.findChild("Function"));
    for (const [name, fn] of functions(withTools)) {
      const a = fnProps(withTools, fn.function);
      const b = counterpart(withoutLambda, fn);
      expect([name, a.Code.S3Key]).toEqual([name, b.Code.S3Key]);
      expect(a.Environment).toEqual(b.Environment);
    }
    const tool = (s: Synthesized) => fnProps(s, toolFn(s).function);
    expect(tool(withTools).Code.S3Key).not.toBe(tool(withoutLambda).Code.S3Key);
    expect(tool(withTools).Environment).toEqual(tool(withoutLambda).Environment);
    // The same registry, wherever it is read from: the same code, so nothing is deployed again.
    expect(tool(again).Code.S3Key).toBe(tool(withTools).Code.S3Key);
    // One bundle for the six steps, one for the watchdog, as without a registry.
    const keys = new Set(functions(withTools).map(([, fn]) => fnProps(withTools, fn.function).Code.S3Key));
    expect(keys.size).toBe(2);
  });

  it("grants InvokeFunction on exactly the registry's functions, qualified as the tools invoke them", () => {
    const policy = withTools.engine.toolPolicy;
    expect(policy).toBeDefined();
    const document = props(withTools, policy as IConstruct).PolicyDocument as {
      Statement: { Sid: string; Effect: string; Action: unknown; Resource: unknown }[];
    };
    expect(document.Statement).toHaveLength(1);
    const [statement] = document.Statement;
    expect(statement).toMatchObject({
      Sid: "ToolFunctions",
      Effect: "Allow",
      Action: "lambda:InvokeFunction",
    });
    expect(
      list(statement?.Resource)
        .map((r) => flattenCfnReference(r))
        .sort(),
    ).toEqual(
      [
        // by name: the stack's region, account and partition
        "arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:quote-price",
        // by ARN with a qualifier: that alias only
        "arn:aws:lambda:eu-west-1:123456789012:function:stock-level:live",
        // by name:version in another region: that version, in that region
        "arn:<AWS::Partition>:lambda:us-east-2:<AWS::AccountId>:function:shipping-rates:7",
      ].sort(),
    );
  });

  it("gives it to the tool function only; the steps that run tools (a leaf's inner loop: ready, turn, and plan, which runs a request's first leaf; a fire-and-forget activity) may call that function, nothing else", () => {
    const ref = (c: IConstruct) => ({ Ref: logicalId(c) });
    const { watchdogDataPolicy, commandsPolicy, modelPolicy, toolPolicy, tools, stepDataPolicies } =
      withTools.engine;
    expect(ROUTES.filter((r) => r.runsTools).map((r) => r.name)).toEqual([
      "plan",
      "ready",
      "turn",
      "activity",
    ]);
    for (const route of ROUTES) {
      expect(props(withTools, withTools.engine.steps[route.name].role).ManagedPolicyArns).toEqual([
        ref(stepDataPolicies[route.name]),
        ...(SENDS_NO_COMMAND.has(route.name) ? [] : [ref(commandsPolicy)]),
        ...(route.callsModel ? [ref(modelPolicy)] : []),
        ...(route.runsTools ? [ref(tools.invokePolicy)] : []),
      ]);
    }
    expect(props(withTools, withTools.engine.watchdog.role).ManagedPolicyArns).toEqual([
      ref(watchdogDataPolicy),
      ref(commandsPolicy),
      ref(modelPolicy),
    ]);
    expect(props(withTools, tools.handler.role).ManagedPolicyArns).toEqual([
      ref(withTools.engine.toolDataPolicy),
      ref(toolPolicy as IConstruct),
    ]);
  });

  it("covers the Invoke the lambda tool sends", () => {
    const source = readFileSync(join(PROJECT_ROOT, "shared/adapters/aws/lambda-invoker.ts"), "utf8");
    const commands = new Set([...source.matchAll(/\b([A-Z][A-Za-z0-9]*Command)\b/g)].map((m) => m[1]));
    expect([...commands]).toEqual(["InvokeCommand"]);
    expect(props(withTools, withTools.engine.toolPolicy as IConstruct)).toMatchObject({
      PolicyDocument: { Statement: [{ Action: "lambda:InvokeFunction" }] },
    });
  });

  it("adds no invoke policy for a registry without lambda tools, yet ships that registry", () => {
    expect(withoutLambda.engine.toolPolicy).toBeUndefined();
    const invokes = Object.values(withoutLambda.template.findResources("AWS::IAM::ManagedPolicy")).flatMap(
      (p) =>
        (
          p.Properties.PolicyDocument as { Statement: { Sid: string; Action: string | string[] }[] }
        ).Statement.filter((s) => list(s.Action).some((a) => a.startsWith("lambda:"))),
    );
    // Only the steps' grant on the tool function itself.
    expect(invokes.map((s) => s.Sid)).toEqual(["ToolService"]);
    const fn = toolFn(withoutLambda).function;
    expect(loadToolsConfig(join(bundleOf(withoutLambda, fn), "tools.json")).tools).toHaveProperty(
      "venue_desk",
    );
  });

  it("passes cdk-nag with no acknowledgement added: no wildcard anywhere in the grant", () => {
    expect(
      new AwsSolutionsChecks(undefined, { verbose: true }).validateScope(withTools.app).violations,
    ).toEqual([]);
    const document = JSON.stringify(props(withTools, withTools.engine.toolPolicy as IConstruct));
    expect(document).not.toContain("*");
  });
});

describe("-c tools=<file>", () => {
  const app = (tools: unknown) =>
    createApp({ context: { ...cdkJson.context, stage: "dev-bad", tools }, processEnv: {} });

  it("is read relative to the project root, or as an absolute path", () => {
    const root = mkdtempSync(join(tmpdir(), "arbor-root-"));
    writeFileSync(join(root, "tools.json"), JSON.stringify(registryJson()));
    const registry = readToolRegistry(new App({ context: { tools: "tools.json" } }), root);
    expect(registry?.source).toBe(join(root, "tools.json"));
    expect(registry?.config).toEqual(parseToolsConfig(registryJson()));
    expect(
      readToolRegistry(new App({ context: { tools: join(root, "tools.json") } }), "/nowhere")?.source,
    ).toBe(join(root, "tools.json"));
    expect(readToolRegistry(new App())).toBeUndefined();
    rmSync(root, { recursive: true, force: true });
  });

  it("refuses a missing file or one that is not JSON, naming it and the key", () => {
    expect(() => app("no/such/tools.json")).toThrow(SettingsError);
    expect(() => app("no/such/tools.json")).toThrow(
      new RegExp(
        `Cannot read the tool registry ${join(PROJECT_ROOT, "no/such/tools.json")} \\(-c tools=no/such/tools.json\\): ENOENT.*relative to`,
      ),
    );
    const broken = registryFile("broken.json", "{ tools: ");
    expect(() => app(broken)).toThrow(new RegExp(`${broken} .*it is not JSON`));
    expect(() => app("")).toThrow(/Invalid CDK context tools="".*leave the key out for the built-in tools/s);
  });

  it("refuses a bad entry, naming the file, the entry and the field", () => {
    const bad = registryFile("bad.json", {
      tools: {
        quote_price: {
          kind: "lambda",
          function: "arn:aws:s3:::a-bucket",
          description: "x",
          parameters: { type: "object" },
        },
        weather: { kind: "http", url: "ftp://example.com", description: "w", parameters: { type: "object" } },
      },
    });
    expect(() => app(bad)).toThrow(SettingsError);
    expect(() => app(bad)).toThrow(
      new RegExp(
        `The tool registry ${bad} \\(-c tools=${bad}\\) is not valid; fix these fields.*\\n  tools\\.quote_price\\.function: a Lambda function name.*\\n  tools\\.weather\\.url: `,
        "s",
      ),
    );
  });

  it("refuses a stdio MCP server, which cannot run on Lambda, and says to use streamable HTTP", () => {
    const stdio = registryFile("stdio.json", {
      tools: {
        lookup_venue: { kind: "mcp", transport: "stdio", command: "node", args: ["venues-server.js"] },
        search_docs: { kind: "mcp", transport: "http", url: "https://mcp.example.com/mcp" },
      },
    });
    expect(() => app(stdio)).toThrow(SettingsError);
    let message = "";
    try {
      app(stdio);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain(stdio);
    expect(message).toMatch(
      /tools\.lookup_venue: a stdio MCP server cannot run on Lambda \(its command "node"/,
    );
    expect(message).toMatch(/"transport": "http" with the "url" of its streamable HTTP endpoint/);
    expect(message).not.toContain("search_docs");
  });

  it("is refused by the engine stack too, when handed to it directly", () => {
    const scope = new App();
    const storage = new StorageStack(scope, "S", {
      stage: "dev-direct",
      removalPolicy: RemovalPolicy.DESTROY,
      deletionProtection: false,
    });
    const config = parseToolsConfig({
      tools: { local: { kind: "mcp", transport: "stdio", command: "./srv" } },
    });
    expect(
      () =>
        new EngineStack(scope, "E", {
          stage: "dev-direct",
          removalPolicy: RemovalPolicy.DESTROY,
          storage,
          model: { provider: "bedrock", id: DEFAULT_MODEL },
          tools: { config, source: "handmade.json" },
        }),
    ).toThrow(/handmade\.json cannot be deployed:\n {2}tools\.local: a stdio MCP server/);
  });
});

describe("a function's bundle", () => {
  it("is the handler, its chunks, the Cedar wasm, the tokenizers and the files given, each in its place", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-bundle-"));
    try {
      const registry = join(dir, "tools.abc.json");
      writeFileSync(registry, '{"tools":{}}\n');
      const out = join(dir, "out");
      const meta = buildFunctionBundle(join(PROJECT_ROOT, "functions/tool.ts"), out, {
        "tools.json": registry,
      });
      expect(readFileSync(join(out, "tools.json"), "utf8")).toBe('{"tools":{}}\n');
      for (const file of [
        "index.mjs",
        "index.mjs.map",
        "cedar_wasm_bg.wasm",
        "node_modules/gpt-tokenizer/package.json",
        "node_modules/tiktoken/lite/tiktoken_bg.wasm",
      ])
        expect([file, existsSync(join(out, file))]).toEqual([file, true]);
      // Chunks beside the handler (their __dirname is the bundle's root, where the wasm is), and
      // what is loaded with import() (the MCP client) among them, not in the handler's own file.
      const outputs = Object.keys(meta.outputs).filter((f) => f.endsWith(".mjs"));
      expect(outputs.length).toBeGreaterThan(2);
      for (const f of outputs) expect([f, dirname(resolve(PROJECT_ROOT, f))]).toEqual([f, out]);
      const handler = Object.entries(meta.outputs).find(([, o]) =>
        o.entryPoint?.endsWith("functions/tool.ts"),
      );
      expect(
        Object.keys(handler?.[1].inputs ?? {}).some((i) => i.includes("@modelcontextprotocol/sdk")),
      ).toBe(false);
      // What import() loads by name has its names: a CommonJS package lazily imported straight from
      // its chunk would export a default only (its functions undefined at the first call), so such
      // packages go through an ESM module of named exports (shared/outbound/undici.ts, cedar-wasm.ts).
      const lazy = new Set(
        Object.values(meta.outputs).flatMap((o) =>
          o.imports.filter((i) => i.kind === "dynamic-import" && !i.external).map((i) => i.path),
        ),
      );
      expect(lazy.size).toBeGreaterThan(3);
      for (const chunk of lazy)
        expect([chunk, meta.outputs[chunk]?.exports]).not.toEqual([chunk, ["default"]]);
      // The tokenizers ship without their source maps and type declarations, and load from the
      // bundle as its chunks import them (shared/engine/window/tokens.ts): each counts a text.
      expect(existsSync(join(out, "node_modules/gpt-tokenizer/esm/BytePairEncodingCore.d.ts"))).toBe(false);
      writeFileSync(
        join(out, "count.mjs"),
        [
          'const { countTokens } = await import("gpt-tokenizer/encoding/o200k_base");',
          'const { getTokenizer } = await import("@anthropic-ai/tokenizer");',
          'const claude = getTokenizer().encode("Plan the offsite", [], []).length;',
          'process.stdout.write(JSON.stringify([countTokens("Plan the offsite"), claude]));',
        ].join("\n"),
      );
      const counted = execFileSync(process.execPath, [join(out, "count.mjs")], {
        cwd: tmpdir(),
        env: { PATH: process.env.PATH ?? "" },
        encoding: "utf8",
      });
      expect(JSON.parse(counted)).toEqual([expect.any(Number), expect.any(Number)]);
      expect((JSON.parse(counted) as number[]).every((n) => n >= 3 && n <= 5)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a name that is not a plain file name, or a source that is not an absolute path", () => {
    expect(() => checkBundledFiles({ "../tools.json": "/a.json" })).toThrow(/plain file name/);
    expect(() => checkBundledFiles({ ".env": "/a.json" })).toThrow(/plain file name/);
    expect(() => checkBundledFiles({ "tools.json": "relative.json" })).toThrow(/absolute path/);
  });
});
