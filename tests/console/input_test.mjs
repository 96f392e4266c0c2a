// Drives the console's answer to an MCP server's question in a real headless Chromium
// (Debian's, through playwright-core): sign in, watch a round in which server-everything asks
// for input, see the form built from the requested schema, send it without the required
// field (refused, the reason shown), fill it and send it, see the round complete.
// Usage: node input_test.mjs <base-url> <token> <session-id>
// It signals "ready" on stdout once the page watches the session; the caller then starts the
// round; the script exits 0 when the answered call finished.
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
  await page.goto(base + "/");
  await page.fill("input#token", token);
  await Promise.all([page.waitForURL(base + "/"), page.click("button[type=submit]")]);
  const card = page.locator(`.session[data-session="${session}"]`);
  await page.waitForSelector(`.session[data-session="${session}"][data-watching="yes"]`, { timeout: 15000 });
  console.log("ready");
  const form = card.locator("form.input");
  await form.waitFor({ timeout: 30000 });
  const text = await form.innerText();
  if (!text.includes("Please provide inputs")) throw new Error("the server's message is not shown:\n" + text);
  // Built from the schema: a text field, a checkbox, a number with its bounds, a titled enum.
  const integer = form.locator('input[name="integer"]');
  if ((await integer.getAttribute("type")) !== "number" || (await integer.getAttribute("max")) !== "100") {
    throw new Error("the integer field does not carry its schema");
  }
  if ((await form.locator('input[name="check"]').getAttribute("type")) !== "checkbox") throw new Error("no checkbox");
  const heroes = await form.locator('select[name="titledSingleSelectEnum"] option').allInnerTexts();
  if (!heroes.includes("Green Lantern")) throw new Error("the titled enum's titles are not offered: " + heroes);
  if ((await form.locator('input[name="email"]').getAttribute("type")) !== "email") throw new Error("no email field");
  // The required name is missing: refused, and the page says why.
  await form.locator("button[type=submit]").click();
  await form.locator(".problem", { hasText: "name" }).waitFor({ timeout: 15000 });
  await form.locator('input[name="name"]').fill("Ada Lovelace");
  await form.locator('input[name="check"]').check();
  await integer.fill("7");
  await page.screenshot({ path: process.env.SCREENSHOT || "/tmp/toolslot-console-input.png" });
  await form.locator("button[type=submit]").click();
  await card.locator(".events li.input_answered").waitFor({ timeout: 20000 });
  await card.locator(".events li.round_complete").waitFor({ timeout: 30000 });
  if ((await card.locator("form.input").count()) !== 0) throw new Error("the answered form is still shown");
  code = 0;
} catch (e) {
  console.error(String(e));
} finally {
  await browser.close();
}
process.exit(code);
