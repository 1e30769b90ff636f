import { VersionNotSupportedError } from "@a2a-js/sdk/errors";
import { describe, expect, it } from "vitest";
import { arborAgentCard, cardBody, matchesEtag } from "../../../../shared/channels/a2a/a2a-card.ts";
import { negotiateVersion, wrongVersion } from "../../../../shared/channels/a2a/a2a-transport.ts";
import { artifactParts, outputModes, outputModesOf } from "../../../../shared/protocols/a2a/a2a-mapping.ts";

describe("negotiateVersion", () => {
  it("reads no header (or an empty one) as 0.3, ignores patch numbers, and refuses any other version", () => {
    expect(negotiateVersion(undefined, undefined)).toBe("0.3");
    expect(negotiateVersion("", undefined)).toBe("0.3");
    expect(negotiateVersion(" 1.0 ", undefined)).toBe("1.0");
    expect(negotiateVersion("1.0.4", undefined)).toBe("1.0");
    expect(negotiateVersion("0.3.0", undefined)).toBe("0.3");
    expect(negotiateVersion(undefined, "1.0")).toBe("1.0"); // the query parameter
    expect(negotiateVersion("0.3", "1.0")).toBe("0.3"); // the header wins
    for (const bad of ["2.0", "0.2", "1", "v1.0", "1.0-beta", "99.0"]) {
      const v = negotiateVersion(bad, undefined);
      expect(v).toBeInstanceOf(VersionNotSupportedError);
      expect((v as Error).message).toMatch(/send A2A-Version: 1\.0.*no A2A-Version header/);
    }
  });

  it("names, for a method of the other version, the header to send and the method of this one", () => {
    expect(wrongVersion("SendMessage", "0.3", false)).toMatch(
      /^SendMessage is an A2A 1\.0 method, and this request is A2A 0\.3 \(it has no A2A-Version header\): send the header A2A-Version: 1\.0, or call the 0\.3 method message\/send$/,
    );
    expect(wrongVersion("ListTasks", "0.3", true)).toMatch(/it says A2A-Version: 0\.3.*A2A-Version: 1\.0$/);
    expect(wrongVersion("message/send", "1.0", true)).toMatch(
      /without the A2A-Version header .* or call the 1\.0 method SendMessage$/,
    );
    expect(wrongVersion("SendMessage", "1.0", true)).toBeUndefined();
    expect(wrongVersion("message/send", "0.3", false)).toBeUndefined();
    expect(wrongVersion("tasks/explode", "0.3", false)).toBeUndefined(); // the SDK's -32601
  });
});

describe("output modes", () => {
  it("gives text by default, the caller's forms in its order, and refuses a list that names none of Arbor's", () => {
    expect(outputModes([])).toEqual(["text/plain"]);
    expect(outputModes(["*/*"])).toEqual(["text/plain"]);
    expect(outputModes(["application/json"])).toEqual(["application/json"]);
    expect(outputModes(["text/plain", "application/json"])).toEqual(["text/plain", "application/json"]);
    expect(outputModes(["application/json; charset=utf-8", "text/*"])).toEqual([
      "application/json",
      "text/plain",
    ]);
    expect(outputModes(["application/vnd.example+json", "image/png"])).toEqual(["application/json"]);
    expect(() => outputModes(["image/png", "audio/*"])).toThrow(
      /names nothing Arbor answers in: it offers text\/plain and application\/json/,
    );
  });

  it("kept modes are read back; unknown ones are ignored", () => {
    expect(outputModesOf({ arbor: { outputModes: ["application/json", "image/png"] } })).toEqual([
      "application/json",
    ]);
    expect(outputModesOf(undefined)).toEqual(["text/plain"]);
    expect(artifactParts({ output: "42", title: "Sum" }, ["application/json", "text/plain"])).toEqual([
      expect.objectContaining({ content: { $case: "data", value: { result: "42", title: "Sum" } } }),
      expect.objectContaining({ content: { $case: "text", value: "42" } }),
    ]);
  });
});

describe("the card's ETag", () => {
  it("is strong, changes with the card, and If-None-Match matches it (a list, weak or *)", () => {
    const a = cardBody(arborAgentCard("https://a.example"));
    const b = cardBody(arborAgentCard("https://b.example"));
    expect(a.etag).toMatch(/^"[\w-]+"$/);
    expect(a.etag).not.toBe(b.etag);
    expect(cardBody(arborAgentCard("https://a.example")).etag).toBe(a.etag);
    expect(matchesEtag(a.etag, a.etag)).toBe(true);
    expect(matchesEtag(`"x", W/${a.etag}`, a.etag)).toBe(true);
    expect(matchesEtag("*", a.etag)).toBe(true);
    expect(matchesEtag(b.etag, a.etag)).toBe(false);
    expect(matchesEtag(undefined, a.etag)).toBe(false);
  });
});
