import type { Assistant } from "../../../domain/resources.ts";
import { teamEntryOf } from "../../../domain/team.ts";
import type { deliveryView } from "../../../notify/deliveries.ts";
import type { keyView } from "../../http/admin-keys.ts";
import { clip, type Html, html, requestPath, time } from "../html.ts";

/**
 * The admins' pages. Each is read on the server as the policy lets the signed-in principal read it
 * (a 403 page for anyone else); each change is a call of the HTTP API's admin route, sent by the
 * page's script with the session (and checked there by the same policy):
 *
 *   team        the assistants with their tools and model; the team file to edit, its change
 *               shown (PUT /v1/admin/team?dryRun=true), then applied: an assistant left out is retired
 *   keys        the tenant's keys (fingerprints); a new key shown once; revoke
 *   deliveries  dead webhook and chat deliveries; redrive one, or all
 *   policy      the policy engine in force and its bundle's revision
 */
export function teamBody(team: Assistant[]): Html {
  const file = { assistants: team.map(teamEntryOf) };
  return html`<h1>Team</h1>
<div class="table-wrap"><table>
<thead><tr><th scope="col">Assistant</th><th scope="col">Purpose</th><th scope="col">Tools</th><th scope="col">Model</th></tr></thead>
<tbody>${team.map((a) => html`<tr><td><strong>${a.meta.name}</strong></td><td>${clip(a.meta.purpose ?? "", 300)}</td><td>${a.tools.length ? a.tools.join(", ") : html`<span class="muted">none</span>`}</td><td>${a.model ?? html`<span class="muted">the default</span>`}</td></tr>`)}</tbody>
</table></div>
<section class="panel" aria-labelledby="team-file">
  <h2 id="team-file">The team file</h2>
  <p class="muted">Edit it and look at the change before you apply it. An assistant left out is retired: never elected again, while the tasks it has finish.</p>
  <form class="api" data-api="PUT /v1/admin/team" data-body="team" data-then="diff">
    <label for="team">Team file (JSON)</label>
    <textarea id="team" name="team" rows="16" spellcheck="false" required>${JSON.stringify(file, null, 2)}</textarea>
    <div class="actions">
      <button type="submit" data-query="dryRun=true">Show the change</button>
      <button type="submit" class="primary" data-confirm="Apply this team file to the tenant?">Apply</button>
    </div>
    <p class="form-error" role="alert" hidden></p>
    <output class="diff" aria-live="polite"></output>
  </form>
</section>`;
}

export function keysBody(keys: ReturnType<typeof keyView>[], tenant: string): Html {
  return html`<h1>API keys</h1>
<section class="panel" aria-labelledby="new-key">
  <h2 id="new-key">A new key</h2>
  <form class="api" data-api="POST /v1/admin/keys" data-then="key">
    <label for="key-id">For (user_&lt;name&gt; for a person, agent_&lt;name&gt; for a remote agent)</label>
    <input id="key-id" name="id" required maxlength="110" pattern="(user|agent)_[A-Za-z0-9._@\\-]{1,100}" placeholder="user_bea">
    <label for="key-roles">Roles (comma-separated; admin for an admin)</label>
    <input id="key-roles" name="roles" data-list="true" maxlength="2000" placeholder="ops">
    <button type="submit" class="primary">Make the key</button>
    <p class="form-error" role="alert" hidden></p>
    <output class="new-key" aria-live="polite"></output>
  </form>
</section>
<h2>The keys of ${tenant}</h2>
<div class="table-wrap"><table>
<thead><tr><th scope="col">Fingerprint</th><th scope="col">For</th><th scope="col">Kind</th><th scope="col">Roles</th><th scope="col"><span class="visually-hidden">Revoke</span></th></tr></thead>
<tbody>${keys.map(
    (
      k,
    ) => html`<tr><td><code>${k.fingerprint}</code></td><td>${k.id}</td><td>${k.kind}</td><td>${k.roles.join(", ")}</td><td>
<form class="api inline" data-api="DELETE /v1/admin/keys/${k.fingerprint}" data-then="reload" data-confirm="Revoke the key ${k.fingerprint} of ${k.id}? Its sessions end too.">
<button type="submit" class="danger">Revoke</button><span class="form-error" role="alert" hidden></span></form></td></tr>`,
  )}</tbody>
</table></div>`;
}

export function deliveriesBody(dead: ReturnType<typeof deliveryView>[], more: boolean): Html {
  return html`<h1>Dead deliveries</h1>
<p class="muted">Webhooks, A2A pushes and chat posts that failed every attempt. Redriven, one is sent again with a new retry window.</p>
${
  dead.length === 0
    ? html`<p class="empty">No dead deliveries.</p>`
    : html`<form class="api" data-api="POST /v1/admin/deliveries/redrive" data-fields='{"all":true}' data-then="reload" data-confirm="Send every dead delivery again?">
  <button type="submit">Redrive all</button><span class="form-error" role="alert" hidden></span></form>
<div class="table-wrap"><table>
<thead><tr><th scope="col">Request</th><th scope="col">Channel</th><th scope="col">To</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col">Dead since</th><th scope="col"><span class="visually-hidden">Redrive</span></th></tr></thead>
<tbody>${dead.map(
        (
          d,
        ) => html`<tr><td><a href="${requestPath(d.rootTaskUrn)}">the request</a></td><td>${d.channel}</td><td>${clip(d.url, 60)}</td><td>${d.attempts}</td><td>${clip(d.lastError ?? (d.lastStatus ? `HTTP ${d.lastStatus}` : ""), 160)}</td><td>${d.deadAt ? time(d.deadAt) : ""}</td><td>
<form class="api inline" data-api="POST /v1/admin/deliveries/${d.id}/redrive" data-then="reload"><button type="submit">Redrive</button><span class="form-error" role="alert" hidden></span></form></td></tr>`,
      )}</tbody>
</table></div>
${more ? html`<p class="muted">More dead deliveries than shown: redrive these, or use <code>arbor notify</code>.</p>` : ""}`
}`;
}

export function policyBody(policy: { engine: string; revision: string }): Html {
  return html`<h1>Policy</h1>
<dl class="facts">
  <div><dt>Engine</dt><dd>${policy.engine === "opa" ? "OPA (Rego compiled to wasm)" : "Cedar"}</dd></div>
  <div><dt>Revision</dt><dd><code>${policy.revision}</code></dd></div>
</dl>
<p>Every page and change of this console is decided by this policy, as every request of the HTTP API, A2A, Slack and Teams is: the console shows a principal only what the policy lets it read.</p>
<p class="muted">The policy's rules and its decision table are in the project's <code>policies/</code> folder; <code>arbor policy</code> tests a decision locally.</p>`;
}
