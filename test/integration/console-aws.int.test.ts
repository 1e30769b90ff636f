import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import { type AwsWorld, apiGuard, guarded, startAwsWorld } from "./aws-world.ts";

/**
 * The console through the API function, as API Gateway's HTTP API invokes it (payload format 2.0:
 * cookies handed over apart, Set-Cookie handed back in `cookies`), on the AWS adapters against
 * DynamoDB Local and s3rver: sessions in the state table, so two function instances know the same
 * session, and a sign-out on one ends it on the other. The same pages in a browser against
 * `arbor serve`: test/process/console-browser.test.ts.
 */
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
const eve = newApiKey({ id: "user_eve", kind: "human", tenant: "evil", roles: ["admin"] });

describe("the console behind API Gateway (the API function)", () => {
  let world: AwsWorld;
  let rt: AwsRuntime;
  let one: ApiHandler;
  let two: ApiHandler;

  const instance = (): ApiHandler =>
    guarded(
      apiGuard(world),
      createApiHandler({
        config: () => world.config,
        clients: world.clients,
        engine: { clients: world.engineClients },
      }),
    );

  const call = async (handler: ApiHandler, event: APIGatewayProxyEventV2) => {
    const res = await handler(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return {
      status: res.statusCode,
      headers: (res.headers ?? {}) as Record<string, string>,
      cookies: ((res as { cookies?: string[] }).cookies ?? []) as string[],
      body,
    };
  };

  /** Signs in on `handler`: the cookie as the browser sends it back, and the page's CSRF token. */
  async function signIn(handler: ApiHandler, key: string) {
    const res = await call(handler, apiEvent("POST", "/console/login", { form: { key, next: "/console" } }));
    expect(res.status).toBe(303);
    expect(res.cookies[0]).toMatch(
      /^__Host-arbor_session=[A-Za-z0-9_-]{43}; .*HttpOnly; Secure; SameSite=Strict/,
    );
    const cookie = (res.cookies[0] as string).split(";")[0] as string;
    const page = await call(handler, apiEvent("GET", "/console", { cookies: [cookie] }));
    expect(page.status).toBe(200);
    const csrf = /name="arbor-csrf" content="([^"]+)"/.exec(page.body)?.[1] as string;
    return { cookie, csrf };
  }

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-console",
      bus: "arbor-console-test",
      env: { ARBOR_TENANT: "acme", ARBOR_PUBLIC_URL: PUBLIC_URL },
    });
    rt = createAwsRuntime(world.config, world.clients);
    const table = new StateKeyStore(rt.state);
    for (const k of [ada, eve]) await table.add(k.entry);
    one = instance();
    two = instance();
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await rt?.close();
    await world?.close();
  });

  it("serves its pages and files, signs in, and takes a request made with the session and its CSRF token", async () => {
    const login = await call(one, apiEvent("GET", "/console/login"));
    expect(login.status).toBe(200);
    expect(login.headers["content-security-policy"]).toContain("script-src 'self'");
    const js = await call(one, apiEvent("GET", "/console/assets/console.js"));
    expect(js.status).toBe(200);
    expect(js.body).toContain("EventSource");
    const away = await call(one, apiEvent("GET", "/console"));
    expect(away.status).toBe(303);
    expect(away.headers.location).toBe("/console/login?next=%2Fconsole");

    const { cookie, csrf } = await signIn(one, ada.key);
    const refused = await call(
      one,
      apiEvent("POST", "/v1/messages", { cookies: [cookie], body: { text: "Plan the lunch" } }),
    );
    expect(refused.status).toBe(403);
    const sent = await call(
      one,
      apiEvent("POST", "/v1/messages", {
        cookies: [cookie],
        headers: { "x-arbor-csrf": csrf },
        body: { text: "Plan the team lunch <script>x()</script>", mode: "lazy" },
      }),
    );
    expect(sent.status).toBe(202);
    const { rootTaskId } = JSON.parse(sent.body) as { rootTaskId: string };

    // Another instance of the function knows the session (the state table) and lists the request.
    const list = await call(two, apiEvent("GET", "/console?scope=all", { cookies: [cookie] }));
    expect(list.status).toBe(200);
    expect(list.body).toContain("Plan the team lunch &lt;script&gt;x()&lt;/script&gt;");
    // The request's page, its URN in the path (API Gateway hands it over decoded).
    const page = await call(
      two,
      apiEvent("GET", `/console/requests/${encodeURIComponent(rootTaskId)}`, { cookies: [cookie] }),
    );
    expect(page.status).toBe(200);
    expect(page.body).toContain("waiting to start");
    expect(page.body).toContain(`data-events="/v1/tasks/${encodeURIComponent(rootTaskId)}/events"`);
    const timeline = await call(
      two,
      apiEvent("GET", `/console/tasks/${encodeURIComponent(rootTaskId)}`, { cookies: [cookie] }),
    );
    expect(timeline.status).toBe(200);
    for (const admin of ["team", "keys", "deliveries", "policy"])
      expect(
        (await call(two, apiEvent("GET", `/console/admin/${admin}`, { cookies: [cookie] }))).status,
        admin,
      ).toBe(200);

    // Another tenant's admin: not found.
    const theirs = await signIn(two, eve.key);
    const hidden = await call(
      one,
      apiEvent("GET", `/console/requests/${encodeURIComponent(rootTaskId)}`, { cookies: [theirs.cookie] }),
    );
    expect(hidden.status).toBe(404);
    expect(hidden.body).not.toContain("team lunch");
  });

  it("ends a session on every instance at sign-out", async () => {
    const { cookie, csrf } = await signIn(one, ada.key);
    expect((await call(two, apiEvent("GET", "/console", { cookies: [cookie] }))).status).toBe(200);
    const out = await call(two, apiEvent("POST", "/console/logout", { cookies: [cookie], form: { csrf } }));
    expect(out.status).toBe(303);
    expect(out.cookies[0]).toMatch(/^__Host-arbor_session=; .*Max-Age=0/);
    expect((await call(one, apiEvent("GET", "/console", { cookies: [cookie] }))).status).toBe(303);
    expect((await call(one, apiEvent("GET", "/v1/me", { cookies: [cookie] }))).status).toBe(401);
  });

  it("shows a request at once on its page while a lagging index has not listed it yet", async () => {
    const lagged = await startAwsWorld({
      name: "arbor-console-lag",
      bus: "arbor-console-lag",
      lag: 50,
      env: { ARBOR_TENANT: "acme", ARBOR_PUBLIC_URL: PUBLIC_URL },
    });
    const laggedRt = createAwsRuntime(lagged.config, lagged.clients);
    await new StateKeyStore(laggedRt.state).add(ada.entry);
    const handler = guarded(
      apiGuard(lagged),
      createApiHandler({
        config: () => lagged.config,
        clients: lagged.clients,
        engine: { clients: lagged.engineClients },
      }),
    );
    try {
      const { cookie, csrf } = await signIn(handler, ada.key);
      const sent = await call(
        handler,
        apiEvent("POST", "/v1/messages", {
          cookies: [cookie],
          headers: { "x-arbor-csrf": csrf },
          body: { text: "Plan the picnic" },
        }),
      );
      expect(sent.status).toBe(202);
      const { rootTaskId } = JSON.parse(sent.body) as { rootTaskId: string };
      // The list reads the index (not there yet); the request's own page reads base records.
      expect((await call(handler, apiEvent("GET", "/console", { cookies: [cookie] }))).body).not.toContain(
        "Plan the picnic",
      );
      const page = await call(
        handler,
        apiEvent("GET", `/console/requests/${encodeURIComponent(rootTaskId)}`, { cookies: [cookie] }),
      );
      expect(page.status).toBe(200);
      expect(page.body).toContain("waiting to start");
      lagged.lagging?.settle();
      expect((await call(handler, apiEvent("GET", "/console", { cookies: [cookie] }))).body).toContain(
        "Plan the picnic",
      );
    } finally {
      await handler.close();
      await laggedRt.close();
      await lagged.close();
    }
  });
});
