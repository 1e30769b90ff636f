import type { DatasetInfo } from "../../../evals/datasets.ts";
import type { Experiment } from "../../../evals/experiment.ts";
import { percent as pct } from "../../../evals/scorers.ts";
import { CONSOLE, clip, costOf, duration, type Html, html, requestPath, time } from "../html.ts";

/**
 * The tenant's experiments (`arbor eval run`, shared/evals/), for its admins: the list with each
 * experiment's score, and one experiment's runs, each with its scores and reasons and a link to
 * the request it sent (its tree and timeline, like every request's).
 */
export const experimentPath = (id: string) => `${CONSOLE}/admin/evals/${encodeURIComponent(id)}`;

export function experimentsBody(experiments: Omit<Experiment, "runs">[], datasets: DatasetInfo[]): Html {
  return html`<h1>Experiments</h1>
<p class="muted">Datasets of cases run here or with <code>arbor eval run</code>, each run scored; <code>arbor eval compare</code> shows what got better or worse between two.</p>
<section class="panel" aria-labelledby="run-dataset">
  <h2 id="run-dataset">Run a dataset</h2>
  ${
    datasets.length === 0
      ? html`<p class="empty">No datasets kept yet: keep one below (or <code>arbor eval upload</code>).</p>`
      : html`<form class="api" data-api="POST /v1/evals/experiments" data-then="experiment">
    <label for="dataset">Dataset</label>
    <select id="dataset" name="dataset" required>${datasets.map(
      (d) => html`<option value="${d.name}">${d.name} (${d.cases} case${d.cases === 1 ? "" : "s"})</option>`,
    )}</select>
    <fieldset class="inline">
      <label>Label <input name="label" maxlength="200" placeholder="a branch, a prompt's version"></label>
      <label>Repeat <input name="repeat" type="number" min="1" max="20" value="1"></label>
      <label>At once <input name="concurrency" type="number" min="1" max="16" value="4"></label>
    </fieldset>
    <p class="muted">Every case's request is yours, its questions answered as the case says; each run is scored as it ends.</p>
    <button type="submit" class="primary">Run</button>
    <p class="form-error" role="alert" hidden></p>
  </form>
  <div class="table-wrap"><table>
<thead><tr><th scope="col">Dataset</th><th scope="col">Cases</th><th scope="col">Size</th><th scope="col">Kept</th><th scope="col">By</th></tr></thead>
<tbody>${datasets.map(
          (d) =>
            html`<tr><td><code>${d.name}</code></td><td>${d.cases}</td><td>${Math.ceil(d.bytes / 1024)} KB</td><td>${time(d.updatedAt)}</td><td>${d.updatedBy}</td></tr>`,
        )}</tbody></table></div>`
  }
  <details class="keep-dataset"><summary>Keep a dataset</summary>
  <form class="api" data-api="PUT /v1/evals/datasets/{name}">
    <label for="dataset-name">Name</label>
    <input id="dataset-name" name="name" required pattern="[A-Za-z0-9._\\-]{1,100}" placeholder="offsite">
    <label for="dataset-text">Cases (JSONL or YAML; docs/evals.md)</label>
    <textarea id="dataset-text" name="text" rows="8" spellcheck="false" required placeholder='{"id":"where","request":"Where is the offsite?","expect":{"contains":["Lisbon"]}}'></textarea>
    <button type="submit">Keep</button>
    <p class="form-error" role="alert" hidden></p>
  </form></details>
</section>
${
  experiments.length === 0
    ? html`<p class="empty">No experiments yet: <code>npx arbor eval run examples/offsite/eval.jsonl --example offsite</code> runs one.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Experiment</th><th scope="col">Score</th><th scope="col">Dataset</th><th scope="col">Model</th><th scope="col">Runs</th><th scope="col">Cost</th><th scope="col">Took</th><th scope="col">Started</th></tr></thead>
<tbody>${[...experiments]
        .reverse()
        .map(
          (e) =>
            html`<tr><td><a href="${experimentPath(e.id)}"><code>${e.id}</code></a>${e.label ? html` <span class="tag">${clip(e.label, 60)}</span>` : ""}</td><td>${e.status === "running" ? html`<span class="tag">running</span>` : pct(e.score)}</td><td>${e.dataset}</td><td>${e.model}</td><td>${e.cases} × ${e.repeat}</td><td>${costOf(e)}</td><td>${duration(e.durationMs)}</td><td>${time(e.startedAt)}</td></tr>`,
        )}</tbody></table></div>`
}`;
}

export function experimentBody(e: Experiment): Html {
  const running = e.status === "running";
  return html`<p class="crumbs"><a href="${CONSOLE}/admin/evals">Experiments</a> ›</p>
<h1>Experiment <code>${e.id}</code></h1>
${
  running
    ? html`<p class="notice" data-reload-every="3" role="status">Running: ${e.progress?.scored ?? e.runs.length} of ${e.progress?.runs ?? "?"} runs scored so far (this page refreshes itself).</p>
${
  e.stopped
    ? html`<p class="muted">Stopped by ${e.stopped.by}: it ends once the requests still running are canceled.</p>`
    : html`<form class="api inline" data-api="POST /v1/evals/experiments/${e.id}/stop" data-confirm="Stop this experiment? No more runs are launched and the running requests are canceled.">
  <button type="submit">Stop</button><p class="form-error" role="alert" hidden></p></form>`
}`
    : e.status === "stopped"
      ? html`<p class="notice" role="status">Stopped${e.stopped ? html` by ${e.stopped.by}` : ""}: only the runs scored before are counted.</p>`
      : ""
}
<dl class="facts">
  <div><dt>Score</dt><dd>${pct(e.score)}${running ? html` <span class="muted">so far</span>` : ""}</dd></div>
  <div><dt>Dataset</dt><dd>${e.dataset}</dd></div>
  <div><dt>Model</dt><dd>${e.model}</dd></div>
  <div><dt>Cost</dt><dd>${costOf(e)}</dd></div>
  <div><dt>Took</dt><dd>${duration(e.durationMs)}</dd></div>
  ${e.label ? html`<div><dt>Label</dt><dd>${e.label}</dd></div>` : ""}
</dl>
<h2>Scorers</h2>
<ul class="plain">${Object.entries(e.scorers)
    .sort()
    .map(([name, score]) => html`<li><strong>${name}</strong> ${pct(score)}</li>`)}</ul>
<h2>Runs</h2>
<div class="table-wrap"><table>
<thead><tr><th scope="col">Case</th><th scope="col">Score</th><th scope="col">State</th><th scope="col">What fell short</th><th scope="col">Cost</th><th scope="col">Took</th></tr></thead>
<tbody>${e.runs.map(
    (r) =>
      html`<tr class="${r.score < 1 ? "bad" : ""}"><td><a href="${requestPath(r.rootTaskId)}">${r.caseId}</a>${r.repeat > 1 ? html` <span class="muted">#${r.repeat}</span>` : ""}</td><td>${pct(r.score)}</td><td>${r.status}</td><td>${
        r.scores.filter((s) => s.score < 1).length
          ? html`<ul class="plain">${r.scores
              .filter((s) => s.score < 1)
              .map(
                (s) => html`<li><strong>${s.scorer}</strong> ${pct(s.score)}: ${clip(s.reason, 300)}</li>`,
              )}</ul>`
          : html`<span class="muted">nothing</span>`
      }</td><td>${costOf(r)}</td><td>${duration(r.wallMs)}</td></tr>`,
  )}</tbody></table></div>`;
}
