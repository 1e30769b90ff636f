import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUEST } from "../../examples/offsite/scenario.ts";
import { addKey, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";
import { launchChromium, signIn } from "../support/browser.ts";

/**
 * The console in a real browser (Debian's Chromium, driven by playwright-core) against a real
 * `arbor serve --example offsite`: what a person does with it, click by click. Set
 * ARBOR_CONSOLE_SCREENSHOTS to a folder to keep pictures of the main pages (docs/images has them).
 */
const LONG = 120_000;
/** How long a check of the page waits for it to change (a live refresh, a reload) on a busy machine. */
const WAIT = { timeout: 30_000 };
const shots = process.env.ARBOR_CONSOLE_SCREENSHOTS;
const HOSTILE = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`;

const DATASET = join(import.meta.dirname, "../../examples/offsite/eval.jsonl");
let dir: string;
let served: Served;
let browser: Browser;
const keys: Record<"ada" | "bob" | "eve", string> = { ada: "", bob: "", eve: "" };
/** What went wrong in a page: script errors, and what the console logged as an error (CSP violations). */
const problems: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-console-"));
  const env = arborEnv(join(dir, "data"));
  keys.ada = await addKey(env, "user_ada", "acme", ["admin"]);
  keys.bob = await addKey(env, "user_bob", "acme");
  keys.eve = await addKey(env, "user_eve", "evil", ["admin"]);
  served = await startServe(env, ["--example", "offsite"]);
  browser = await launchChromium();
}, LONG);
afterAll(async () => {
  await browser?.close();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

async function open(
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/status of 40[49]/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  return { context, page };
}

async function signedIn(key: string, path = "/console", viewport?: { width: number; height: number }) {
  const opened = await open(viewport);
  await opened.page.goto(`${served.url}${path}`);
  await signIn(opened.page, key);
  return opened;
}

const shoot = async (page: Page, name: string) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
};

/** The request's facts (state, cost) as the live part shows them. */
const facts = (page: Page) => page.locator("#live dl.facts");

describe("the console in a browser", () => {
  let requestUrl = "";

  it(
    "signs in, starts a lazy request, edits and approves its plan, follows it live, approves a risky call (a second browser loses), shows the cost and the timeline",
    async () => {
      const { context, page } = await open();
      // A shared link opens once signed in: the sign-in form first, then the page.
      await page.goto(`${served.url}/console`);
      expect(new URL(page.url()).pathname).toBe("/console/login");
      await signIn(page, keys.ada);
      await expect.poll(() => new URL(page.url()).pathname, WAIT).toBe("/console");
      await page.getByLabel("What should the team do?").fill(REQUEST);
      await page.getByRole("radio", { name: /Lazy/ }).check();
      await page.getByRole("button", { name: "Send" }).click();
      await page.waitForURL(/\/console\/requests\//);
      requestUrl = page.url();

      // The plan waits for approval; the live page shows it as soon as it is made.
      const plan = page.locator('article.question[data-purpose="approve_plan"]');
      await plan.waitFor({ timeout: LONG });
      await shoot(page, "console-plan");
      const agenda = plan.getByRole("group", { name: "Subtask: Agenda" });
      await agenda.getByRole("button", { name: "Add a subtask" }).first().click();
      // The new subtask's name: markup in it must stay text, in the tree and in the model's answer.
      await plan.locator('input[name="plan-name"]').last().fill(`Plan a team dinner ${HOSTILE}`);
      await plan.getByRole("button", { name: "Run it" }).click();

      // The tree goes live; the invitation is a risky call that waits for a person.
      const risky = page.getByRole("heading", { name: "Allow send_email?" });
      await risky.waitFor({ timeout: LONG });
      const question = page.locator('article.question[data-purpose="confirm_risky_action"]');
      await expect.poll(() => question.locator("figure").innerText(), WAIT).toContain("team@example.com");
      await expect
        .poll(() => page.locator("ul.tree").innerText(), WAIT)
        .toContain(`Plan a team dinner ${HOSTILE}`);
      await shoot(page, "console-approval");

      // A second browser, the same person: the questions page lists it too.
      const second = await signedIn(keys.ada, "/console/questions");
      const there = second.page.locator('article.question[data-purpose="confirm_risky_action"]');
      await there.waitFor();
      await question.getByRole("button", { name: "Allow" }).click();
      // Taken: the first page's question is gone; the second still shows it, waiting.
      await expect.poll(() => question.count(), WAIT).toBe(0);
      await second.page.getByRole("button", { name: "Deny" }).click();
      // The second answer loses, and says who answered first and how.
      await expect
        .poll(
          () => second.page.locator('article.question[data-purpose="confirm_risky_action"]').innerText(),
          {
            timeout: 30_000,
          },
        )
        .toMatch(/Your answer was not taken[\s\S]*Answered by user_ada · admin: Allow/);
      await second.context.close();

      // Live to done, with what it cost (the example's model costs nothing, and says so).
      await expect.poll(() => facts(page).innerText(), { timeout: LONG }).toMatch(/State\s*done/);
      expect(await facts(page).innerText()).toMatch(/Cost\s*\$0/);
      const answer = page.locator("section[aria-labelledby=answer] .output");
      await expect.poll(() => answer.innerText(), WAIT).toContain("team@example.com");
      expect(await page.locator("ul.tree").innerText()).toMatch(/event-planner\s+0\.\d\d/);
      await shoot(page, "console-tree");

      // A task's timeline: its conversation with the model, its tool call, who approved it.
      await page.getByRole("link", { name: "Invite the team" }).click();
      await page.getByRole("heading", { name: "Invite the team", level: 1 }).waitFor();
      const timeline = await page.locator("main").innerText();
      expect(timeline).toContain("The conversation with the model");
      expect(timeline).toMatch(/send_email[\s\S]*ran/);
      expect(timeline).toContain("Answered by user_ada · admin: Allow");
      expect(timeline).toMatch(/TaskCompleted/);
      await shoot(page, "console-timeline");

      // The hostile name is text everywhere it went: nothing ran, no image was made.
      await page.goto(requestUrl);
      await expect.poll(() => page.locator("main").innerText(), WAIT).toContain(HOSTILE);
      expect(await page.evaluate("window.__pwned")).toBeUndefined();
      expect(await page.locator("main img").count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    LONG * 3,
  );

  it(
    "shows a model's answer with <script> and <img onerror> as text",
    async () => {
      const { context, page } = await signedIn(keys.ada);
      const text = `Write a haiku ${HOSTILE}`;
      await page.getByLabel("What should the team do?").fill(text);
      await page.getByRole("button", { name: "Send" }).click();
      await page.waitForURL(/\/console\/requests\//);
      const answer = page.locator("section[aria-labelledby=answer] .output");
      await expect
        .poll(async () => ((await answer.count()) ? answer.innerText() : ""), { timeout: LONG })
        .toContain(HOSTILE);
      expect(await page.evaluate("window.__pwned")).toBeUndefined();
      expect(await page.locator("main img, main script").count()).toBe(0);
      // The list shows it, as text too.
      await page.goto(`${served.url}/console`);
      expect(await page.locator("table.requests").innerText()).toContain(HOSTILE);
      expect(await page.locator("main img").count()).toBe(0);
      await context.close();
    },
    LONG,
  );

  it(
    "answers another tenant's request URL with not found, and the sign-in goes on to it",
    async () => {
      expect(requestUrl).not.toBe("");
      const { context, page } = await open();
      await page.goto(requestUrl);
      expect(new URL(page.url()).pathname).toBe("/console/login");
      await signIn(page, keys.eve);
      // Signed in, the link opens: as the other tenant's, it is not there.
      expect(page.url()).toBe(requestUrl);
      expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Not found");
      const again = await page.goto(requestUrl);
      expect(again?.status()).toBe(404);
      expect(await page.locator("main").innerText()).not.toContain("Lisbon");
      await context.close();
    },
    LONG,
  );

  it(
    "lets an admin make and revoke keys; a revoked key's session ends at its next page",
    async () => {
      const bob = await signedIn(keys.bob);
      expect(await bob.page.getByRole("heading", { level: 1 }).innerText()).toBe("Requests");
      // Not an admin: no admin pages in the navigation, and the policy refuses them.
      expect(await bob.page.getByRole("link", { name: "Keys" }).count()).toBe(0);
      const refused = await bob.page.goto(`${served.url}/console/admin/keys`);
      expect(refused?.status()).toBe(403);

      const { context, page } = await signedIn(keys.ada, "/console/admin/keys");
      await page.getByLabel(/^For/).fill("user_cy");
      await page.getByRole("button", { name: "Make the key" }).click();
      await expect
        .poll(() => page.locator("output.new-key").innerText(), WAIT)
        .toMatch(/arbor_[A-Za-z0-9_-]{20,}/);
      await page.reload();
      const row = page.getByRole("row", { name: /user_bob/ });
      page.once("dialog", (d) => void d.accept());
      await row.getByRole("button", { name: "Revoke" }).click();
      await expect.poll(() => page.getByRole("row", { name: /user_bob/ }).count(), WAIT).toBe(0);

      await bob.page.goto(`${served.url}/console`);
      expect(new URL(bob.page.url()).pathname).toBe("/console/login");

      // The team file: its change shown before it is applied, then applied.
      await page.goto(`${served.url}/console/admin/team`);
      const file = page.getByLabel("Team file (JSON)");
      const team = JSON.parse(await file.inputValue()) as { assistants: { id: string; purpose: string }[] };
      const first = team.assistants[0] as { id: string; purpose: string };
      first.purpose = `${first.purpose} (and the team's lunches)`;
      await file.fill(JSON.stringify(team, null, 2));
      await page.getByRole("button", { name: "Show the change" }).click();
      const diff = page.locator("output.diff");
      await expect.poll(() => diff.innerText(), WAIT).toMatch(/Not applied yet[\s\S]*Changes: .*\(purpose\)/);
      page.once("dialog", (d) => void d.accept());
      await page.getByRole("button", { name: "Apply" }).click();
      await expect.poll(() => diff.innerText(), WAIT).toMatch(/^Applied\./);
      await file.fill("{ not json");
      await page.getByRole("button", { name: "Show the change" }).click();
      await expect
        .poll(() => page.locator("form .form-error").first().innerText(), WAIT)
        .toMatch(/not valid JSON/);
      await bob.context.close();
      await context.close();
    },
    LONG,
  );

  it(
    "fits a phone's width, and signs out",
    async () => {
      const { context, page } = await signedIn(keys.ada, "/console", { width: 390, height: 844 });
      await page.goto(requestUrl);
      const overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth");
      expect(overflow).toBeLessThanOrEqual(0);
      await shoot(page, "console-phone");
      // The keyboard reaches the content first through the skip link.
      await page.keyboard.press("Tab");
      expect(await page.evaluate("document.activeElement?.textContent")).toBe("Skip to the content");
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.waitForURL(/\/console\/login$/);
      await page.goto(requestUrl);
      expect(new URL(page.url()).pathname).toBe("/console/login");
      await context.close();
    },
    LONG,
  );

  it(
    "keeps a dataset and runs it: the experiment's page follows it until every run is scored",
    async () => {
      const { context, page } = await signedIn(keys.ada, "/console/admin/evals");
      await page.getByText("Keep a dataset").click();
      await page.getByLabel("Name").fill("offsite");
      await page.getByLabel(/^Cases/).fill(await readFile(DATASET, "utf8"));
      await page.getByRole("button", { name: "Keep" }).click();
      await expect.poll(() => page.getByRole("row", { name: /offsite/ }).count(), WAIT).toBe(1);
      // A dataset that cannot run is refused in the form, saying why.
      await page.getByText("Keep a dataset").click();
      await page.getByLabel("Name").fill("broken");
      await page.getByLabel(/^Cases/).fill('{"id":"a","request":"x","expect":{"contans":[]}}');
      await page.getByRole("button", { name: "Keep" }).click();
      await expect
        .poll(() => page.locator("details .form-error").innerText(), WAIT)
        .toMatch(/line 1, is not a valid case/);

      await page.getByLabel("Label").fill("from the console");
      await page.getByRole("button", { name: "Run" }).click();
      await page.waitForURL(/\/console\/admin\/evals\/\w+$/, WAIT);
      // The page reloads itself while it runs; once done, its runs are listed with their scores.
      await expect
        .poll(async () => (await page.locator("main").innerText()).includes("Running:"), {
          timeout: 60_000,
          interval: 500,
        })
        .toBe(false);
      expect(await page.locator("tbody tr").count()).toBe(4);
      expect(await page.locator("dl.facts").innerText()).toMatch(/Score\s+\d+\.\d %/);
      await shoot(page, "console-experiment");
      await context.close();
    },
    LONG,
  );

  it(
    "weighs little on a first load",
    async () => {
      const { context } = await signedIn(keys.ada);
      const fresh = await browser.newContext();
      await fresh.addCookies(await context.cookies());
      const first = await fresh.newPage();
      await first.goto(requestUrl);
      await first.waitForLoadState("load");
      // What went over the wire: the page and everything it loaded, as the browser counts it.
      const bytes = (await first.evaluate(
        `[...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
        .reduce((n, e) => n + e.transferSize, 0)`,
      )) as number;
      expect(bytes).toBeGreaterThan(0);
      expect(bytes).toBeLessThan(24 * 1024); // about 10 KB, compressed (docs/console.md)
      await fresh.close();
      await context.close();
    },
    LONG,
  );
});
