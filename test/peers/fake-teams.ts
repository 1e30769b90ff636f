import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import type { TeamsSettings } from "../../shared/notify/chat/types.ts";

/**
 * Teams' side of the wire, on one local node:http server (127.0.0.1, a random port):
 *
 *   - the key set Teams signs activity tokens with: an OpenID metadata document at
 *     `/botframework/openid` whose `jwks_uri` is `/botframework/keys` (kid `k1`, endorsed for
 *     `msteams`); `sign(claims, { kid, alg })` signs an activity token with it (or with a key that
 *     is not published, `alg: "none"`, HS256); `activityToken(serviceUrl)` the usual good one;
 *   - the token endpoint Arbor gets its own Bot Connector token from (`POST /token`, client
 *     credentials: the app id and password of `settings()`), each token `bot-token-<n>`;
 *   - the Bot Connector under `serviceUrl` (`/connector/`): `POST /v3/conversations/:id/activities`
 *     (and `/activities/:replyToId`), `PUT /v3/conversations/:id/activities/:activityId`, each
 *     recorded in `activities` with the bearer it came with; a call without a current token is
 *     answered 401; `plan` answers the next calls with a status (429 comes with Retry-After: 1).
 *
 *   const teams = await startFakeTeams({ clock });          // tokens dated by the clock Arbor checks with
 *   const settings = teams.settings({ tenants: { "aad-1": { tenant: "acme" } } });
 *   const auth = `Bearer ${await teams.activityToken(teams.serviceUrl)}`;
 *   teams.plan.push(429); ... teams.activities; await teams.close();
 */
export const APP_ID = "00000000-0000-0000-0000-00000000a11b";
export const APP_PASSWORD = "fake-teams-secret";
export const ISSUER = "https://api.botframework.com";

export interface ConnectorCall {
  method: "POST" | "PUT";
  conversationId: string;
  /** POST: the activity replied to, if any; PUT: the activity replaced. */
  activityId?: string;
  authorization: string;
  body: Record<string, unknown>;
  answered: number;
}

export interface SignOptions {
  kid?: string;
  alg?: "RS256" | "HS256" | "none";
  /** Sign with a key that is not in the published set (under `kid`). */
  unpublished?: boolean;
}

export interface FakeTeams {
  base: string;
  /** The Bot Connector's service URL (with its trailing slash, as Teams sends it). */
  serviceUrl: string;
  metadataUrl: string;
  tokenUrl: string;
  /** Requests for the metadata document and the key set, counted. */
  keyFetches: number;
  tokensIssued: number;
  activities: ConnectorCall[];
  plan: number[];
  settings(overrides?: Partial<TeamsSettings>): TeamsSettings;
  sign(claims: JWTPayload & { serviceurl?: string }, options?: SignOptions): Promise<string>;
  activityToken(serviceUrl: string, claims?: JWTPayload): Promise<string>;
  /** Makes every token issued so far invalid (Arbor must get a new one). */
  revokeTokens(): void;
  close(): Promise<void>;
}

export async function startFakeTeams(options: { clock?: () => Date } = {}): Promise<FakeTeams> {
  const published = await generateKeyPair("RS256", { extractable: true });
  const stranger = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(published.publicKey)), kid: "k1", use: "sig", endorsements: ["msteams"] };
  const valid = new Set<string>();
  const server: Server = createServer();
  // Tokens are dated by the clock Arbor checks them with (tests move it).
  const nowS = () => Math.floor((options.clock?.() ?? new Date()).getTime() / 1000);

  const fake: FakeTeams = {
    base: "",
    serviceUrl: "",
    metadataUrl: "",
    tokenUrl: "",
    keyFetches: 0,
    tokensIssued: 0,
    activities: [],
    plan: [],
    settings: (overrides = {}) => ({
      appId: APP_ID,
      appPassword: APP_PASSWORD,
      openIdMetadataUrl: fake.metadataUrl,
      issuers: [ISSUER],
      tokenUrl: fake.tokenUrl,
      allowedServiceUrls: [fake.serviceUrl],
      tenants: {},
      ...overrides,
    }),
    async sign(claims, options = {}) {
      const alg = options.alg ?? "RS256";
      const kid = options.kid ?? "k1";
      if (alg === "none") {
        const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
        return `${part({ alg: "none", kid, typ: "JWT" })}.${part(claims)}.`;
      }
      const jwt = new SignJWT(claims).setProtectedHeader({ alg, kid, typ: "JWT" });
      if (alg === "HS256") return jwt.sign(new TextEncoder().encode(APP_PASSWORD.padEnd(32, "x")));
      return jwt.sign(options.unpublished ? stranger.privateKey : published.privateKey);
    },
    activityToken: (serviceUrl, claims = {}) =>
      fake.sign({
        iss: ISSUER,
        aud: APP_ID,
        iat: nowS(),
        nbf: nowS() - 5,
        exp: nowS() + 3600,
        serviceurl: serviceUrl,
        ...claims,
      }),
    revokeTokens: () => valid.clear(),
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };

  const send = (res: import("node:http").ServerResponse, status: number, body: unknown, headers = {}) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };

  server.on("request", (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const path = (req.url ?? "").split("?")[0] ?? "";
      if (req.method === "GET" && path === "/botframework/openid") {
        fake.keyFetches += 1;
        send(res, 200, { issuer: ISSUER, jwks_uri: `${fake.base}/botframework/keys` });
        return;
      }
      if (req.method === "GET" && path === "/botframework/keys") {
        send(res, 200, { keys: [jwk] });
        return;
      }
      if (req.method === "POST" && path === "/token") {
        const form = new URLSearchParams(raw);
        const ok =
          form.get("grant_type") === "client_credentials" &&
          form.get("client_id") === APP_ID &&
          form.get("client_secret") === APP_PASSWORD &&
          form.get("scope") === "https://api.botframework.com/.default";
        if (!ok) return send(res, 401, { error: "invalid_client" });
        fake.tokensIssued += 1;
        const token = `bot-token-${fake.tokensIssued}`;
        valid.add(token);
        return send(res, 200, { token_type: "Bearer", expires_in: 3599, access_token: token });
      }
      const m = /^\/connector\/v3\/conversations\/([^/]+)\/activities(?:\/([^/]+))?$/.exec(path);
      if (m && (req.method === "POST" || req.method === "PUT")) {
        const authorization = req.headers.authorization ?? "";
        const planned = fake.plan.shift();
        const status = !valid.has(authorization.replace(/^Bearer /, "")) ? 401 : (planned ?? 200);
        const conversationId = decodeURIComponent(m[1] ?? "");
        const activityId = m[2] ? decodeURIComponent(m[2]) : undefined;
        let body: Record<string, unknown> = {};
        try {
          body = JSON.parse(raw) as Record<string, unknown>;
        } catch {
          return send(res, 400, { error: { code: "BadSyntax", message: "not JSON" } });
        }
        fake.activities.push({
          method: req.method,
          conversationId,
          ...(activityId ? { activityId } : {}),
          authorization,
          body,
          answered: status,
        });
        if (status === 429) return send(res, 429, { error: { code: "Throttled" } }, { "retry-after": "1" });
        if (status >= 300)
          return send(res, status, { error: { code: "Failed", message: `status ${status}` } });
        const id = req.method === "PUT" ? activityId : `act-${fake.activities.length}`;
        return send(res, req.method === "PUT" ? 200 : 201, { id });
      }
      send(res, 404, { error: "not found" });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  fake.base = `http://127.0.0.1:${port}`;
  fake.serviceUrl = `${fake.base}/connector/`;
  fake.metadataUrl = `${fake.base}/botframework/openid`;
  fake.tokenUrl = `${fake.base}/token`;
  return fake;
}
