// The console opened after a call started waiting: in a real headless Chromium (Debian's,
// through playwright-core) it must show that request on load, with its deadline, the
// assistant text that led to it and the session's workspace; approve it for the session; show
// the call's result; list the remembered approval and revoke it.
// Usage: node pending_test.mjs <base-url> <token> <session-id> <workspace>
// Exits 0 when all of that was seen and done.
import { createRequire } from "node:module";
const require = createRequire(process.env.PLAYWRIGHT_CORE_PATH || import.meta.url);
const { chromium } = require("playwright-core");

const [base, token, session, workspace] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let code = 1;
try {
  const page = await browser.newPage();
  page.on("pageerror", e => console.error("page error:", e.message));
  await page.goto(base + "/");
  await page.fill("input#token", token);
  await Promise.all([page.waitForURL(base + "/"), page.click("button[type=submit]")]);
  const card = page.locator(`.session[data-session="${session}"]`);
  // No event announces it now: the request was made before the page opened.
  const box = card.locator('.approval[data-index="0"]');
  await box.waitFor({ timeout: 20000 });
  const text = await box.innerText();
  for (const want of ["write_file", "I will note this in a file.", "workspace: " + workspace, "expires at", "late.txt"]) {
    if (!text.includes(want)) throw new Error(`the pending request does not show ${JSON.stringify(want)}:\n${text}`);
  }
  const deadline = Number(await box.getAttribute("data-deadline"));
  if (!(deadline > Date.now())) throw new Error("no deadline in the future: " + deadline);
  await page.screenshot({ path: process.env.SCREENSHOT || "/tmp/toolslot-console-pending.png" });
  await box.locator("button.session").click();
  // The result as the call finished, and the remembered approval with its revoke button.
  await card.locator('.results li.result[data-index="0"]:not(.error)').waitFor({ timeout: 20000 });
  const remembered = card.locator(".remembered li");
  await remembered.first().waitFor({ timeout: 20000 });
  const entry = await remembered.first().innerText();
  if (!entry.includes("write_file")) throw new Error("the remembered approval is not shown: " + entry);
  await remembered.first().locator("button.revoke").click();
  await page.waitForFunction(s => document.querySelectorAll(`.session[data-session="${s}"] .remembered li`).length === 0, session, { timeout: 20000 });
  if ((await card.locator(".approval").count()) !== 0) throw new Error("the decided request is still shown");
  code = 0;
} catch (e) {
  console.error(String(e));
} finally {
  await browser.close();
}
process.exit(code);
