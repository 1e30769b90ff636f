import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  MAX_SLACK_BODY_BYTES,
  parseSlackJson,
  readBody,
  signSlackBody,
  verifySlackRequest,
} from "../../../../../shared/channels/chat/slack/verify.ts";

/** Slack's request signing: the raw body, HMAC-SHA256 with the signing secret, a 300 s window. */
const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW = new Date("2026-06-01T09:00:00.000Z");
const nowS = Math.floor(NOW.getTime() / 1000);
const body = "token=x&team_id=T1&text=hello%20world";

const headersFor = (b: string, ts: number, secret = SECRET) => {
  const h = signSlackBody(secret, b, ts);
  return { timestamp: h["x-slack-request-timestamp"], signature: h["x-slack-signature"] };
};

describe("verifySlackRequest", () => {
  it("takes a request signed with the secret on its raw body, within the window", () => {
    expect(verifySlackRequest(SECRET, headersFor(body, nowS), body, NOW)).toBeUndefined();
    expect(verifySlackRequest(SECRET, headersFor(body, nowS - 300), body, NOW)).toBeUndefined();
    expect(verifySlackRequest(SECRET, headersFor(body, nowS + 300), body, NOW)).toBeUndefined();
  });

  it("matches Slack's documented example signature", () => {
    // https://api.slack.com/authentication/verifying-requests-from-slack (the worked example)
    const example =
      "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const ts = 1531420618;
    expect(
      verifySlackRequest(
        "8f742231b10e8888abcd99yyyzzz85a5",
        {
          timestamp: String(ts),
          signature: "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
        },
        example,
        new Date(ts * 1000),
      ),
    ).toBeUndefined();
  });

  it("refuses a body changed after signing, another secret, a timestamp 301 s off either way", () => {
    expect(verifySlackRequest(SECRET, headersFor(body, nowS), `${body}&x=1`, NOW)).toMatch(/does not match/);
    expect(verifySlackRequest(SECRET, headersFor(body, nowS, "another-secret-123"), body, NOW)).toMatch(
      /does not match/,
    );
    expect(verifySlackRequest(SECRET, headersFor(body, nowS - 301), body, NOW)).toMatch(
      /301 s from our clock/,
    );
    expect(verifySlackRequest(SECRET, headersFor(body, nowS + 301), body, NOW)).toMatch(
      /301 s from our clock/,
    );
  });

  it("refuses missing and garbled headers with a message saying what is wrong", () => {
    const good = headersFor(body, nowS);
    expect(verifySlackRequest(SECRET, { ...good, signature: undefined }, body, NOW)).toMatch(/required/);
    expect(verifySlackRequest(SECRET, { ...good, timestamp: undefined }, body, NOW)).toMatch(/required/);
    expect(verifySlackRequest(SECRET, { ...good, timestamp: "soon" }, body, NOW)).toMatch(/whole seconds/);
    expect(verifySlackRequest(SECRET, { ...good, signature: "v1=abc" }, body, NOW)).toMatch(/v0=<64 hex/);
    expect(
      verifySlackRequest(
        SECRET,
        { ...good, signature: good.signature.toUpperCase().replace("V0", "v0") },
        body,
        NOW,
      ),
    ).toMatch(/v0=<64 hex/);
  });
});

describe("readBody and parseSlackJson", () => {
  it("reads up to the limit and refuses past it", async () => {
    const ok = new Request("http://x/", { method: "POST", body: "a".repeat(100) });
    expect(await readBody(ok, 100)).toBe("a".repeat(100));
    const big = new Request("http://x/", { method: "POST", body: "a".repeat(MAX_SLACK_BODY_BYTES + 1) });
    expect(await readBody(big, MAX_SLACK_BODY_BYTES)).toBe("too-large");
    // A body streamed without a length is counted as it is read.
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 10; i++) c.enqueue(new Uint8Array(64));
        c.close();
      },
    });
    const chunked = new Request("http://x/", { method: "POST", body: stream, duplex: "half" } as RequestInit);
    expect(await readBody(chunked, 300)).toBe("too-large");
  });

  it("refuses JSON that is not JSON or nests deeper than any Slack payload", () => {
    expect(parseSlackJson("{nope")).toMatchObject({ ok: false });
    const deep = `${"[".repeat(200)}${"]".repeat(200)}`;
    expect(parseSlackJson(deep)).toEqual({ ok: false, problem: expect.stringMatching(/nests deeper/) });
    expect(parseSlackJson('{"type":"url_verification"}')).toEqual({
      ok: true,
      value: { type: "url_verification" },
    });
  });
});

describe("verifySlackRequest, property-based", () => {
  it("takes every body signed within the window, and refuses it once any byte of it changes", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 2000 }),
        fc.integer({ min: -300, max: 300 }),
        fc.nat(),
        fc.integer({ min: 1, max: 0xffff }),
        (b, skew, at, delta) => {
          const headers = headersFor(b, nowS + skew);
          expect(verifySlackRequest(SECRET, headers, b, NOW)).toBeUndefined();
          if (b.length === 0) return;
          const i = at % b.length;
          const changed = `${b.slice(0, i)}${String.fromCharCode((b.charCodeAt(i) + delta) % 0x10000)}${b.slice(i + 1)}`;
          if (Buffer.from(changed).equals(Buffer.from(b))) return; // lone surrogates encode alike
          expect(verifySlackRequest(SECRET, headers, changed, NOW)).toMatch(/does not match/);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("refuses any header that is not a signature, whatever the body", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), fc.string({ maxLength: 100 }), (b, signature) => {
        expect(verifySlackRequest(SECRET, { timestamp: String(nowS), signature }, b, NOW)).toBeDefined();
      }),
      { numRuns: 300 },
    );
  });
});
