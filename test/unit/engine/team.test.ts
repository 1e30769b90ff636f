import { describe, expect, it } from "vitest";
import type { Assistant } from "../../../shared/domain/resources.ts";
import {
  changesAnything,
  MAX_TEAM_ASSISTANTS,
  parseTeam,
  type TeamFile,
  teamAssistantResource,
  teamAssistantUrn,
  teamDiff,
  teamEntryOf,
} from "../../../shared/domain/team.ts";
import { DEFAULT_TEAM } from "../../../shared/engine/default-team.ts";
import { ValidationError } from "../../../shared/kernel/errors.ts";
import { DEFAULT_TOOLS } from "../../../shared/tools/service/config.ts";

const TOOLS = ["calculator", "word_count", "send_email"];
const team: TeamFile = {
  assistants: [
    { name: "Writer", id: "writer", purpose: "Write texts", tools: ["word_count", "send_email"] },
    { name: "Analyst", purpose: "Numbers", tools: ["calculator"], model: "m1" },
  ],
};

/** The issues parseTeam names for `raw`, or [] when it accepts it. */
function issues(raw: unknown, tools: readonly string[] = TOOLS): string[] {
  try {
    parseTeam(raw, tools);
    return [];
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return [...(e as ValidationError).issues];
  }
}

const stored = (file: TeamFile, tenant = "acme"): Assistant[] =>
  file.assistants.map((a) => teamAssistantResource(tenant, a));

describe("the team file schema", () => {
  it("accepts a team and keeps what it says", () => {
    expect(parseTeam(team, TOOLS)).toEqual(team);
  });

  it("names each bad field", () => {
    const found = issues({
      assistants: [
        { name: "", purpose: "x" },
        { name: "B", purpose: "   " },
        { name: "C", purpose: "x", id: "has space" },
        { name: "D", purpose: "x", tools: ["not a tool name"] },
        { name: "E", purpose: "x", colour: "blue" },
        { name: "F", purpose: 7 },
        { name: "G", purpose: "x", instructions: "y".repeat(8001) },
      ],
    });
    for (const path of [
      "assistants.0.name",
      "assistants.1.purpose",
      "assistants.2.id",
      "assistants.3.tools.0",
      'assistants.4: Unrecognized key: "colour"',
      "assistants.5.purpose",
      "assistants.6.instructions",
    ])
      expect(
        found.some((i) => i.startsWith(path)),
        `${path} in ${found.join(" | ")}`,
      ).toBe(true);
  });

  it("refuses what is not a team: no list, an empty one, unknown top-level keys, another type", () => {
    expect(issues({})).toEqual(["assistants: Invalid input: expected array, received undefined"]);
    expect(issues({ assistants: [] })[0]).toMatch(/^assistants: a team needs at least one assistant/);
    expect(issues({ assistants: team.assistants, tools: {} })[0]).toMatch(/Unrecognized key: "tools"/);
    expect(issues([team])[0]).toMatch(/^\(root\)/);
    expect(issues(null)[0]).toMatch(/^\(root\)/);
  });

  it("refuses duplicate names (whatever their case) and ids, and a tool listed twice", () => {
    const found = issues({
      assistants: [
        { name: "Writer", id: "w", purpose: "x", tools: ["calculator", "calculator"] },
        { name: "writer", purpose: "y" },
        { name: "Other", id: "w", purpose: "z" },
      ],
    });
    expect(found).toEqual([
      'assistants.0.tools.1: "calculator" is listed twice',
      'assistants.1.name: "writer" is also the name of assistants.0: names must differ',
      'assistants.2.id: "w" is also the id of assistants.0: ids must differ',
    ]);
  });

  it("refuses tools the registry does not have, naming the ones it has", () => {
    const found = issues({ assistants: [{ name: "A", purpose: "x", tools: ["calculator", "fetch_page"] }] });
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(
      /^assistants\.0\.tools\.1: unknown tool "fetch_page"; the tool registry has calculator, send_email, word_count/,
    );
    expect(issues(team, [])[0]).toMatch(/the tool registry has no tools/);
  });

  it("bounds its size", () => {
    const many = Array.from({ length: MAX_TEAM_ASSISTANTS + 1 }, (_, i) => ({ name: `A${i}`, purpose: "x" }));
    expect(issues({ assistants: many })[0]).toMatch(/^assistants: Too big/);
    expect(issues({ assistants: many.slice(0, MAX_TEAM_ASSISTANTS) })).toEqual([]);
    const tools = Array.from({ length: 65 }, (_, i) => `t${i}`);
    expect(issues({ assistants: [{ name: "A", purpose: "x", tools }] }, tools)[0]).toMatch(
      /^assistants\.0\.tools: Too big/,
    );
  });
});

describe("the diff of a team against what a tenant has", () => {
  it("adds everything to a tenant without assistants", () => {
    const diff = teamDiff("acme", [], team);
    expect(diff.added.map((e) => e.name)).toEqual(["Writer", "Analyst"]);
    expect(diff.added[0]?.urn).toBe("cld:common.Tenant.acme/common.Assistant.writer");
    expect(diff.added[1]?.urn).toBe(teamAssistantUrn("acme", { name: "Analyst" }));
    expect([diff.changed, diff.removed, diff.unchanged]).toEqual([[], [], []]);
    expect(changesAnything(diff)).toBe(true);
  });

  it("finds nothing to change when the tenant has the file's team (tool order does not count)", () => {
    const reordered: TeamFile = {
      assistants: [
        { ...(team.assistants[0] as TeamFile["assistants"][0]), tools: ["send_email", "word_count"] },
        team.assistants[1] as TeamFile["assistants"][0],
      ],
    };
    const diff = teamDiff("acme", stored(team), reordered);
    expect(diff.unchanged.map((e) => e.name)).toEqual(["Writer", "Analyst"]);
    expect(changesAnything(diff)).toBe(false);
  });

  it("names the fields that changed, and removes what the file no longer lists", () => {
    const next: TeamFile = {
      assistants: [
        {
          name: "Writer",
          id: "writer",
          purpose: "Write and edit texts",
          tools: ["word_count"],
          applicability: "Prose",
        },
        { name: "Engineer", id: "engineer", purpose: "Code" },
      ],
    };
    const diff = teamDiff("acme", stored(team), next);
    expect(diff.changed).toEqual([
      {
        urn: "cld:common.Tenant.acme/common.Assistant.writer",
        name: "Writer",
        fields: ["purpose", "applicability", "tools"],
      },
    ]);
    expect(diff.added.map((e) => e.name)).toEqual(["Engineer"]);
    expect(diff.removed.map((e) => e.name)).toEqual(["Analyst"]);
    expect(diff.unchanged).toEqual([]);
  });

  it("a rename under the same id is a change of name; a model dropped is a change of model", () => {
    const next: TeamFile = {
      assistants: [
        { name: "Author", id: "writer", purpose: "Write texts", tools: ["word_count", "send_email"] },
        { name: "Analyst", purpose: "Numbers", tools: ["calculator"] },
      ],
    };
    const diff = teamDiff("acme", stored(team), next);
    expect(diff.changed.map((e) => [e.name, e.fields])).toEqual([
      ["Author", ["name"]],
      ["Analyst", ["model"]],
    ]);
  });

  it("takes back a retired assistant as added, and does not remove it again", () => {
    const [writer, analyst] = stored(team) as [Assistant, Assistant];
    const retired = { ...analyst, retiredAt: "2026-06-01T09:00:00.000Z" };
    expect(teamDiff("acme", [writer, retired], team).added.map((e) => e.name)).toEqual(["Analyst"]);
    const onlyWriter: TeamFile = { assistants: [team.assistants[0] as TeamFile["assistants"][0]] };
    const diff = teamDiff("acme", [writer, retired], onlyWriter);
    expect(diff.removed).toEqual([]);
    expect(changesAnything(diff)).toBe(false);
  });

  it("is per tenant: the same file is all new in another tenant", () => {
    expect(teamDiff("beta", stored(team, "acme"), team).added).toHaveLength(2);
  });

  it("shows a stored team as a file that applies as it is", () => {
    const shown: TeamFile = { assistants: stored(team).map(teamEntryOf) };
    expect(changesAnything(teamDiff("acme", stored(team), parseTeam(shown, TOOLS)))).toBe(false);
  });
});

describe("the built-in team", () => {
  it("is a valid team of the default tools, and every assistant can read back a stored or stubbed result", () => {
    const tools = Object.keys(DEFAULT_TOOLS.tools);
    expect(() => parseTeam({ assistants: DEFAULT_TEAM }, tools)).not.toThrow();
    for (const a of DEFAULT_TEAM) expect(a.tools).toContain("read_resource");
  });
});
