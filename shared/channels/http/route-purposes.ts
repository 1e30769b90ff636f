/**
 * What each route of the one app (createServerApp in http-server.ts: the HTTP API, A2A, Slack and
 * Teams, the console) is for, in a line. docs/http-api.md's table of routes is made from the app's own routes
 * and these lines (`npm run docs:tables`, scripts/doc-tables.ts); test/unit/house/routes-table.test.ts
 * fails when a route has no line here, when a line names a route the app no longer has, or when
 * the table in the doc is not what they make. A route added: a line here, then the command.
 *
 * Keys are `<METHOD> <path>` as Hono has them (`:name` for a path parameter); the order of the
 * table is the app's.
 */
export const ROUTE_PURPOSES: Readonly<Record<string, string>> = {
  // Slack and Teams (shared/channels/chat/): each checks its own caller; 404 where not configured.
  "POST /slack/events":
    "Slack's Events API: a mention in a channel or a direct message starts or continues a request (Slack's signature)",
  "POST /slack/commands":
    "the `/arbor` slash command: a request, `help`, or `watch <task URN>` (Slack's signature)",
  "POST /slack/interactivity":
    "Slack's buttons and modals: the answers to Arbor's questions (Slack's signature)",
  "POST /teams/messages":
    "the Teams bot's messaging endpoint: messages and Adaptive Card answers (a Bot Framework token)",
  // The web console (shared/channels/console/): HTML pages for a signed-in person (docs/console.md).
  "GET /console/assets/:name": "the console's script and style sheet (public)",
  "GET /console/login": "the console's sign-in form: an API key, exchanged for a session",
  "POST /console/login":
    "signs in with an API key (a form post): a session cookie (HttpOnly, Secure, SameSite=Strict), then on to `next`",
  "POST /console/logout": "ends the console session (with its CSRF token)",
  "GET /console": "the console's requests (mine, or the tenant's for admins) by state, and a new request",
  "GET /console/requests/:urn": "a request's tree, live, with its questions, cost and answer",
  "GET /console/tasks/:urn":
    "a task's timeline: events, model turns, tool calls, questions and who answered, deliveries",
  "GET /console/questions": "the questions waiting for the signed-in person",
  "GET /console/questions/:urn": "one question as it stands (answered: by whom and how)",
  "GET /console/admin/team": "the team, and its team file edited, its change shown, then applied (admins)",
  "GET /console/admin/keys": "the tenant's API keys: make one (shown once), revoke (admins)",
  "GET /console/admin/deliveries": "dead webhook and chat deliveries, redriven one by one or all (admins)",
  "GET /console/admin/policy": "the policy engine in force and its revision (admins)",
  "GET /console/admin/evals": "the tenant's experiments and their scores (admins)",
  "GET /console/admin/evals/:id": "one experiment's runs: each case's scores, reasons and request (admins)",
  // The HTTP API (http-api.ts and the routes it mounts): an API key under /v1, except the callbacks.
  "GET /healthz":
    "whether Arbor can write (200, or 503 with the reason) and the model's state; no key needed",
  "POST /v1/a2a-callbacks/:id":
    "where a remote A2A agent called by the `a2a` tool pushes its task's changes (the call's own token, not an API key)",
  "POST /v1/messages": "a request: starts a conversation or continues one; 202 with the root task's link",
  "GET /v1/tasks/:urn": "a task's view (status, assistant, usage) and its output",
  "GET /v1/tasks/:urn/interactions":
    "the questions waiting anywhere below a task, each with its `links.answer`",
  "GET /v1/tasks/:urn/tree": "a task's whole tree, breadth first, at most `maxTasks` tasks",
  "POST /v1/tasks/:urn/cancel": "cancels a task and everything below it (202)",
  "POST /v1/interactions/:urn/answer": "answers a question: an option, or a value (204)",
  "GET /v1/me": "who the key stands for: actor, tenant, roles",
  "GET /v1/resources/:urn": "one resource",
  "GET /v1/resources/:urn/children": "the resources one level below a URN, a page at a time",
  "GET /v1/tasks/:urn/events":
    "a task's event log, a page at a time (JSON); with `Accept: text/event-stream`, its tree's events live, resumable",
  "GET /v1/admin/team": "the tenant's team as a team file (admins)",
  "PUT /v1/admin/team": "a team file applied, or with `dryRun=true` only its change shown (admins)",
  "GET /v1/tools": "the tenant's tools, of one namespace or all",
  "GET /v1/graph": "the tenant's graph: the triples matching one pattern (admins)",
  "POST /v1/documents":
    "add a document (Markdown, text, HTML, PDF: its bytes, or {url}) to the tenant's knowledge; 202 while it is read (admins)",
  "GET /v1/documents": "the tenant's documents and their state (admins)",
  "GET /v1/documents/:urn":
    "one document's state: pending, processing (chunks embedded), ready or failed (admins)",
  "DELETE /v1/documents/:urn": "remove a document with its chunks (admins)",
  "GET /v1/tasks/:urn/artifacts":
    "the files a task made (a request's root: every file of its tree), with their links",
  "GET /v1/artifacts/:urn": "one file a task made: its bytes, as an attachment",
  "GET /v1/search":
    "search what the tenant knows by meaning (passages, results, tasks, questions, tools; the caller's own requests and conversations), each result one the caller may read",
  "GET /v1/memories":
    "what assistants remembered about the caller (admins: ?about=<person>, ?scope=tenant, ?scope=assistant&assistant=<urn>)",
  "DELETE /v1/memories/:urn": "forget a memory: the person it is about, or an admin",
  "POST /v1/evals/experiments":
    "runs a dataset (a kept one by name, or its text) on this runtime; its scores come as its runs end (admins)",
  "POST /v1/evals/experiments/:id/stop":
    "stops a running experiment: no more runs launched, those running canceled (admins)",
  "GET /v1/evals/datasets": "the datasets the tenant keeps: name, cases, size, who uploaded (admins)",
  "GET /v1/evals/datasets/:name": "one kept dataset, with its text (admins)",
  "PUT /v1/evals/datasets/:name": "keeps a dataset under a name once it parses as one (admins)",
  "DELETE /v1/evals/datasets/:name":
    "forgets a kept dataset; experiments that ran it keep its cases (admins)",
  "GET /v1/evals/experiments":
    "the tenant's experiments (`arbor eval run`, or started here): their scores, oldest first (admins)",
  "GET /v1/evals/experiments/:id":
    "one experiment with its runs: each case's request, answer, scores (admins)",
  "GET /v1/resource-events":
    "resource writes at and below a URN prefix, live, as server-sent events (501 on AWS)",
  "POST /v1/tasks/:urn/conversation/truncate":
    "a leaf's conversation with its model: keep only the newest turns",
  "POST /v1/tasks/:urn/conversation/clear": "a leaf's conversation with its model: start it afresh",
  "POST /v1/admin/keys": "a new API key of the tenant, shown this once (admins)",
  "GET /v1/admin/keys": "the tenant's API keys: fingerprints, ids, roles, never a key (admins)",
  "DELETE /v1/admin/keys/:which": "revokes a principal's keys, or one key by its fingerprint (admins)",
  "GET /v1/callbacks/secret": "the secret that signs this key's webhooks",
  "POST /v1/callbacks/secret/rotate": "a new signing secret for this key (the old one signs along for 24 h)",
  "GET /v1/admin/callbacks/secret":
    "the tenant's signing secret, for callbacks recorded before secrets were per key (admins)",
  "POST /v1/admin/callbacks/secret/rotate":
    "a new signing secret for any key of the tenant, or the tenant's (admins)",
  "GET /v1/admin/deliveries": "the tenant's webhook deliveries in one status, dead by default (admins)",
  "POST /v1/admin/deliveries/redrive": "every dead delivery of the tenant sent again (admins)",
  "POST /v1/admin/deliveries/:id/redrive": "one dead delivery sent again (admins)",
  // A2A (shared/channels/a2a/a2a-server.ts).
  "GET /.well-known/agent-card.json": "the A2A agent card, 1.0 or 0.3 by `A2A-Version`; public",
  "POST /a2a":
    "A2A JSON-RPC, 1.0 with `A2A-Version: 1.0`, else 0.3: messages, tasks, streams, push notifications",
  "POST /a2a/": "the same as `POST /a2a`",
};
