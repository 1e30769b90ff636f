import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

/**
 * A real browser for the console's tests: Debian's Chromium (`/usr/bin/chromium`, or
 * ARBOR_CHROMIUM), driven by playwright-core, headless. Never a browser Playwright downloads:
 * `.ci/run` installs Debian's package when it is missing. The flags keep Chromium off the network
 * it would reach for by itself (updates, sync, Google's hosts), which this machine refuses.
 */
export const CHROMIUM = process.env.ARBOR_CHROMIUM ?? "/usr/bin/chromium";

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `The console's browser tests need Chromium at ${CHROMIUM}: install Debian's package (apt-get install chromium), as .ci/run does, or set ARBOR_CHROMIUM`,
    );
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

/** Signs in on the console's form with `key`, from wherever the page is (the form or a redirect to it). */
export async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((url) => !url.pathname.endsWith("/console/login"));
}
