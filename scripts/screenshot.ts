// Takes the README's screenshot of the web chat in IntentParser mode (no model):
//   npx tsx scripts/screenshot.ts [out.png]
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { launchChromium } from "../test/helpers/browser.js";
import { startTestServer } from "../test/helpers/test-server.js";

// Functions passed to page.waitForFunction and page.evaluate run in the browser, where these exist.
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
/* eslint-enable @typescript-eslint/no-explicit-any */

const out = process.argv[2] ?? "docs/screenshot.png";
const server = await startTestServer();
writeFileSync(join(server.runtime.workspace, "hello.ts"), 'export function greet(name: string): string {\n  // Ducks are polite.\n  return `Quack, ${name}!`;\n}\n');
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 780 } });
  await page.goto(server.loginUrl());
  for (const text of ["remember that the pond is north of the barn", "run `ls -la`", "read file hello.ts"]) {
    await page.fill("#input", text);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => [...document.querySelectorAll("#event-log li")].some((item) => /^task-(completed|failed)/.test(item.textContent ?? "")) || document.querySelector(".feedback"));
    await page.waitForTimeout(300);
  }
  await page.click("#toggle-events");
  await page.waitForTimeout(300);
  await page.screenshot({ path: out });
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  await server.close();
}
