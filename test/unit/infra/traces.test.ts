import { App } from "aws-cdk-lib";
import { describe, expect, it } from "vitest";
import { readTraces, SettingsError } from "../../../infra/app.ts";
import { tracesEnvironment } from "../../../infra/stacks/engine-stack.ts";
import { synthesized } from "../../fixtures/synth.ts";
import { list } from "../../support/cdk.ts";

/**
 * `-c traces`: every function of the engine stack sends its spans where the setting says, and,
 * for X-Ray, holds the right to (two actions, nothing else); without it nothing changes.
 */
type Fn = { Properties: { Environment?: { Variables?: Record<string, unknown> }; Role?: unknown } };
type Policy = {
  Properties: {
    PolicyDocument: { Statement: { Sid?: string; Action: unknown; Resource: unknown }[] };
    Roles?: unknown[];
  };
};

const functions = (template: ReturnType<typeof synthesized>["template"]) =>
  Object.values(template.findResources("AWS::Lambda::Function") as Record<string, Fn>).filter(
    // CDK's own helper functions (log retention) are not Arbor's.
    (f) => f.Properties.Environment?.Variables?.ARBOR_MODE === "aws",
  );

describe("-c traces", () => {
  it("reads off (default), xray, or an OTLP/HTTP endpoint, and refuses anything else naming the key", () => {
    const read = (traces?: string) =>
      readTraces(new App({ context: traces === undefined ? {} : { traces } }));
    expect(read()).toBeUndefined();
    expect(read("off")).toBeUndefined();
    expect(read("xray")).toEqual({ to: "xray" });
    expect(read("https://otlp.example.com:4318")).toEqual({
      to: "otlp",
      endpoint: "https://otlp.example.com:4318",
    });
    expect(read("http://localhost:4318")).toEqual({ to: "otlp", endpoint: "http://localhost:4318" });
    for (const bad of ["http://collector.internal:4318", "jaeger", "ftp://x"]) {
      expect(() => read(bad)).toThrow(SettingsError);
      expect(() => read(bad)).toThrow(/xray.*OTLP\/HTTP endpoint.*at traces/s);
    }
  });

  it("xray: every function sends to X-Ray and may call xray:PutSpans; cdk-nag passes", () => {
    const { engine, template } = synthesized({ stage: "dev-traces", traces: "xray" });
    const fns = functions(template);
    expect(fns.length).toBeGreaterThanOrEqual(9);
    for (const f of fns) expect(f.Properties.Environment?.Variables?.ARBOR_TRACES).toBe("xray");
    const policies = Object.entries(
      template.findResources("AWS::IAM::ManagedPolicy") as Record<string, Policy>,
    );
    const [id, traces] =
      policies.find(([, p]) => p.Properties.PolicyDocument.Statement.some((s) => s.Sid === "Traces")) ?? [];
    expect(traces?.Properties.PolicyDocument.Statement).toEqual([
      {
        Sid: "Traces",
        Effect: "Allow",
        Action: ["xray:PutSpans", "xray:PutSpansForIndexing"],
        Resource: "*",
      },
    ]);
    // Attached to each function's role, and to nothing else.
    const roles = new Set(fns.map((f) => JSON.stringify(f.Properties.Role)));
    const attached = Object.values(
      template.findResources("AWS::IAM::Role") as Record<
        string,
        { Properties: { ManagedPolicyArns?: unknown[] } }
      >,
    ).filter((r) =>
      list(r.Properties.ManagedPolicyArns ?? []).some((a) => JSON.stringify(a).includes(id as string)),
    );
    expect(attached.length).toBe(roles.size);
    expect(engine.tracesPolicy).toBeDefined();
  }, 300_000);

  it("an OTLP endpoint: the functions send OTLP http/protobuf there, with no X-Ray right", () => {
    // (The same environment goes to every function as the xray case shows; one synthesis is enough.)
    expect(tracesEnvironment({ to: "otlp", endpoint: "https://otlp.example.com:4318" })).toEqual({
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://otlp.example.com:4318",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    });
    expect(tracesEnvironment(undefined)).toEqual({});
  });
});
