// Arbor's console: the one script of its pages (served by shared/channels/console/assets.ts).
// The pages are made on the server; this script adds three things (and reloads a page of work
// still going, `[data-reload-every]`):
// 1. Changes: a `form.api` is sent to the HTTP API (`data-api="METHOD /v1/..."`) as JSON, with the
//    session's CSRF token; an error is shown in the form, in its own words.
// 2. Live requests: `#live[data-events]` follows the request's event stream (server-sent events)
//    and fetches its part of the page again (`data-part`) after each burst of events.
// 3. The plan editor: a lazy plan edited task by task, sent as the answer's `inputValue` (JSON).
// Every piece of text it puts in the page goes in as text (textContent), never as markup; the
// markup it swaps in comes from the server, where every value is escaped.
(() => {
  const csrf = document.querySelector('meta[name="arbor-csrf"]')?.getAttribute("content") ?? "";

  // ---- times in the reader's own zone ----
  function localTimes(root) {
    for (const t of root.querySelectorAll("time[datetime]")) {
      const at = new Date(t.getAttribute("datetime"));
      if (!Number.isNaN(at.getTime())) {
        t.title = t.textContent;
        t.textContent = at.toLocaleString();
      }
    }
  }

  // ---- changes through the HTTP API ----
  /**
   * A form's data-* attribute. Not form.dataset: a form's control named "dataset" (or "body")
   * shadows the form's own properties of that name.
   */
  const data = (form, name) => form.getAttribute(`data-${name}`) ?? undefined;

  function showError(form, text) {
    const slot = form.querySelector(".form-error");
    if (!slot) {
      window.alert(text);
      return;
    }
    slot.textContent = text;
    slot.hidden = false;
  }

  function clearError(form) {
    const slot = form.querySelector(".form-error");
    if (slot) {
      slot.textContent = "";
      slot.hidden = true;
    }
  }

  /** The JSON body a form sends: its fields (empty ones left out), a field's JSON, or fixed fields. */
  function bodyOf(form, submitter) {
    if (data(form, "fields")) return JSON.parse(data(form, "fields"));
    if (data(form, "body")) {
      const field = form.elements.namedItem(data(form, "body"));
      try {
        return JSON.parse(field.value);
      } catch (e) {
        throw new Error(`The ${data(form, "body")} is not valid JSON: ${e.message}`);
      }
    }
    const body = {};
    const entries = new FormData(form, submitter?.name ? submitter : undefined);
    for (const [name, value] of entries) {
      if (typeof value !== "string" || value.trim() === "") continue;
      const field = form.elements.namedItem(name);
      if (field?.dataset?.list) {
        const items = value
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
        if (items.length) body[name] = items;
      } else body[name] = value;
    }
    const plan = data(form, "plan") && document.getElementById(data(form, "plan"));
    if (plan && body.selectedOptionId === "approve") {
      const edited = plan.arborPlan ? plan.arborPlan.current() : undefined;
      if (edited !== undefined && edited !== plan.arborPlan.original) body.inputValue = edited;
    }
    return body;
  }

  async function send(form, submitter, body) {
    const [method, template] = data(form, "api").split(" ");
    // A `{field}` in the path is that field's value (taken out of the body).
    const path = template.replace(/\{(\w+)\}/g, (_, field) => {
      const value = String(body?.[field] ?? "");
      if (body) delete body[field];
      return encodeURIComponent(value);
    });
    const extra = submitter?.dataset.query ? `?${submitter.dataset.query}` : "";
    const response = await fetch(path + extra, {
      method,
      credentials: "same-origin",
      headers: { "content-type": "application/json", accept: "application/json", "x-arbor-csrf": csrf },
      body: method === "GET" || method === "DELETE" ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) {
      location.assign(`/console/login?next=${encodeURIComponent(location.pathname + location.search)}`);
      return undefined;
    }
    const text = await response.text();
    let json;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      json = {};
    }
    if (!response.ok) {
      const error = json.error || {};
      const problem = new Error(error.message || `The server answered ${response.status}`);
      problem.status = response.status;
      throw problem;
    }
    return json;
  }

  const then = {
    reload: () => (document.getElementById("live") ? refreshLive() : location.reload()),
    request: (json) => location.assign(`/console/requests/${encodeURIComponent(json.rootTaskId)}`),
    experiment: (json) => location.assign(`/console/admin/evals/${encodeURIComponent(json.experiment.id)}`),
    diff: (json, form) => {
      const out = form.querySelector("output.diff");
      const d = json.diff || {};
      const names = (list) => (list || []).map((e) => e.name).join(", ") || "none";
      const changed =
        (d.changed || []).map((e) => `${e.name} (${(e.fields || []).join(", ")})`).join(", ") || "none";
      out.textContent =
        `${json.applied ? "Applied." : "Not applied yet: this is what Apply would do."}\n` +
        `Adds: ${names(d.added)}\nChanges: ${changed}\nRetires: ${names(d.removed)}\nUnchanged: ${names(d.unchanged)}`;
    },
    key: (json, form) => {
      const out = form.querySelector("output.new-key");
      out.textContent = `The key of ${json.id}, shown this once: copy it now.\n${json.key}\n(fingerprint ${json.fingerprint}; reload the page to see it listed)`;
      form.reset();
    },
  };

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("api")) return;
    event.preventDefault();
    const submitter = event.submitter;
    const question = submitter?.dataset.confirm || data(form, "confirm");
    if (question && !window.confirm(question)) return;
    clearError(form);
    let body;
    try {
      body = bodyOf(form, submitter); // before the buttons are disabled: a disabled button sends nothing
    } catch (e) {
      showError(form, e.message);
      return;
    }
    const buttons = [...form.querySelectorAll("button")];
    for (const b of buttons) b.disabled = true;
    try {
      const json = await send(form, submitter, body);
      if (json !== undefined) await then[data(form, "then") || "reload"](json, form);
    } catch (e) {
      showError(form, e.message);
      const article = form.closest("article.question");
      if (e.status === 409 && article) await refreshQuestion(article);
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  });

  // ---- the live request ----
  let refreshing = false;
  let again = false;

  async function fetchPart(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { accept: "text/html" } });
    if (response.status === 401)
      location.assign(`/console/login?next=${encodeURIComponent(location.pathname)}`);
    if (!response.ok) throw new Error(`The page answered ${response.status}`);
    return new DOMParser().parseFromString(await response.text(), "text/html");
  }

  async function refreshLive() {
    const live = document.getElementById("live");
    if (!live) return;
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    try {
      const fresh = await fetchPart(live.dataset.part);
      // A question still open is kept as it is: it does not change while it waits, and the person
      // may be typing into it (or about to click it).
      for (const old of live.querySelectorAll("article.question")) {
        const now = fresh.getElementById(old.id);
        if (now?.querySelector("form") && old.querySelector("form")) now.replaceWith(old);
      }
      live.replaceChildren(...fresh.body.childNodes);
      setUp(live);
    } catch {
      // The next event, or the next reconnect, tries again.
    } finally {
      refreshing = false;
      if (again) {
        again = false;
        setTimeout(refreshLive, 50);
      }
    }
  }

  /** After a 409: the question as it stands now (who answered), saying this answer was not taken. */
  async function refreshQuestion(article) {
    try {
      const fresh = await fetchPart(article.dataset.part);
      const now = fresh.getElementById(article.id);
      const note = document.createElement("p");
      note.className = "notice error";
      note.setAttribute("role", "alert");
      note.textContent = "Your answer was not taken: the question was answered first.";
      if (now) {
        article.replaceWith(now);
        now.prepend(note);
        setUp(now);
      } else article.prepend(note);
    } catch {
      // The error is shown in the form already.
    }
  }

  let timer;
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(refreshLive, 250);
  }

  function follow() {
    const live = document.getElementById("live");
    if (!live?.dataset.events || live.dataset.ended === "true" || !window.EventSource) return;
    const source = new EventSource(live.dataset.events);
    // The stream names each event by its type: the page lists the types it sends.
    for (const type of (live.dataset.eventTypes || "").split(" "))
      if (type) source.addEventListener(type, soon);
    source.addEventListener("end", () => {
      source.close();
      refreshLive();
    });
    live.dataset.following = "true";
  }

  // ---- the plan editor ----
  const FIELDS = [
    ["name", "Name", "input"],
    ["purpose", "What it is for", "textarea"],
    ["evaluation", "Done when", "textarea"],
  ];

  function planEditor(box) {
    if (box.arborPlan) return;
    const data = box.querySelector('script[type="application/json"]');
    const json = box.querySelector("textarea.plan-json");
    if (!data || !json) return;
    const original = JSON.stringify(JSON.parse(data.textContent));
    let plan = JSON.parse(original);
    let fromJson = false;
    let counter = 0;
    const tree = document.createElement("div");
    tree.className = "plan-tree";

    const sync = () => {
      json.value = JSON.stringify(plan, null, 2);
      fromJson = false;
    };

    function taskEditor(task, parent, index, depth) {
      const el = document.createElement("div");
      el.className = "plan-task";
      el.setAttribute("role", "group");
      el.setAttribute("aria-label", depth === 0 ? "The request" : `Subtask: ${task.name || "new"}`);
      for (const [field, label, kind] of FIELDS) {
        const id = `plan-field-${++counter}`;
        const l = document.createElement("label");
        l.htmlFor = id;
        l.textContent = depth === 0 ? `${label} (the request)` : label;
        const input = document.createElement(kind);
        input.id = id;
        input.name = `plan-${field}`;
        if (kind === "textarea") input.rows = 2;
        if (field === "name") {
          input.required = true;
          input.maxLength = 200;
        }
        input.value = task[field] ?? "";
        input.addEventListener("input", () => {
          if (input.value === "" && field !== "name") delete task[field];
          else task[field] = input.value;
          sync();
        });
        el.append(l, input);
      }
      const buttons = document.createElement("div");
      buttons.className = "actions";
      const add = document.createElement("button");
      add.type = "button";
      add.textContent = "Add a subtask";
      add.addEventListener("click", () => {
        task.subtasks = [...(task.subtasks || []), { name: "New subtask" }];
        sync();
        render();
        const inputs = tree.querySelectorAll('input[name="plan-name"]');
        inputs[inputs.length - 1]?.focus();
      });
      buttons.append(add);
      if (parent) {
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "danger";
        remove.textContent = "Remove this subtask";
        remove.addEventListener("click", () => {
          parent.subtasks.splice(index, 1);
          if (parent.subtasks.length === 0) delete parent.subtasks;
          sync();
          render();
        });
        buttons.append(remove);
      }
      el.append(buttons);
      (task.subtasks || []).forEach((sub, i) => {
        el.append(taskEditor(sub, task, i, depth + 1));
      });
      return el;
    }

    function render() {
      tree.replaceChildren(taskEditor(plan, undefined, 0, 0));
    }

    // The JSON stays editable (for fields the editor does not show): an edit there wins.
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "The plan as JSON";
    json.previousElementSibling?.remove(); // its label moves into the summary
    json.replaceWith(details);
    details.append(summary, json);
    json.setAttribute("aria-label", "The plan as JSON");
    json.addEventListener("input", () => {
      fromJson = true;
    });
    json.addEventListener("change", () => {
      try {
        plan = JSON.parse(json.value);
        render();
      } catch {
        // Sent as it is: the server says what is wrong with it.
      }
    });
    box.prepend(tree);
    render();
    box.arborPlan = {
      original,
      current: () => {
        if (fromJson) {
          try {
            return JSON.stringify(JSON.parse(json.value));
          } catch {
            return json.value; // the server refuses it, saying why
          }
        }
        return JSON.stringify(plan);
      },
    };
  }

  function setUp(root) {
    localTimes(root);
    for (const box of root.querySelectorAll(".plan-editor")) planEditor(box);
  }

  setUp(document);
  follow();
  // A page of work still going (a running experiment) loads itself again every few seconds.
  const every = Number(document.querySelector("[data-reload-every]")?.dataset.reloadEvery);
  if (every > 0) setTimeout(() => location.reload(), every * 1000);
})();
