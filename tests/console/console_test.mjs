// Drives the approval console in a real headless Chromium (Debian's, through playwright-core):
// sign in with the token, watch a round that needs an approval appear, click Approve,
// see the call finish. Usage: node console_test.mjs <base-url> <token> <session-id>
// It signals "ready" on stdout once the page watches the session; the caller then starts the
// round; the script exits 0 when the call finished after the click.
import { createRequire } from "node:module";
const require = createRequire(process.env.PLAYWRIGHT_CORE_PATH || import.meta.url);
const { chromium } = require("playwright-core");

const [base, token, session] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let code = 1;
try {
  const page = await browser.newPage();
  page.on("pageerror", e => console.error("page error:", e.message));
  // Without the cookie the page is a login form; a token in the address is not accepted.
  await page.goto(`${base}/?token=${encodeURIComponent(token)}`);
  await page.waitForSelector("form input#token", { timeout: 15000 });
  await page.fill("input#token", "not-the-token");
  await page.click("button[type=submit]");
  await page.waitForLoadState();
  if (!(await page.content()).includes("wrong token")) throw new Error("a wrong token was not refused");
  await page.goto(base + "/");
  await page.fill("input#token", token);
  await Promise.all([page.waitForURL(base + "/"), page.click("button[type=submit]")]);
  const card = page.locator(`.session[data-session="${session}"]`);
  await page.waitForSelector(`.session[data-session="${session}"][data-watching="yes"]`, { timeout: 15000 });
  // The catalog is shown too.
  await page.waitForSelector("#tools li", { timeout: 15000 });
  console.log("ready");
  const approve = card.locator(".approval button.approve");
  await approve.waitFor({ timeout: 20000 });
  await page.screenshot({ path: process.env.SCREENSHOT || "/tmp/toolslot-console.png" });
  await approve.click();
  await card.locator(".events li.call_finished:not(.error)").waitFor({ timeout: 20000 });
  await card.locator(".events li.round_complete").waitFor({ timeout: 20000 });
  const text = await card.locator(".events").innerText();
  if (!text.includes("decided #0: approved")) throw new Error("no approved decision shown:\n" + text);
  code = 0;
} catch (e) {
  console.error(String(e));
} finally {
  await browser.close();
}
process.exit(code);
