import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecutionDirective } from "../../src/contracts/index.js";
import { ScriptedModelProvider } from "../../src/models/scripted-provider.js";
import { launchChromium } from "../helpers/browser.js";
import { startTestServer, type TestServer } from "../helpers/test-server.js";
import { createEchoTool } from "../helpers/test-tools.js";
import { scriptedAgent } from "../helpers/scripted-agent.js";

// Functions passed to page.waitForFunction and page.evaluate run in the browser, where these exist.
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
declare const location: any;
declare const window: any;
/* eslint-enable @typescript-eslint/no-explicit-any */

const SCREENSHOTS = resolve(import.meta.dirname, "../.tmp/screenshots");
let server: TestServer;
let models: ScriptedModelProvider;
let browser: Browser;
let directive: ExecutionDirective = { kind: "respond", answer: "hello" };
let draft = "Let me think this through.";

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  models = scriptedAgent({ directive: () => directive, draft: () => draft, verdict: () => "pass", streaming: { chunkSize: 3 } });
  models.always("coder", { files: [{ path: "greeting.txt", content: "hello from the coder\n" }], notes: "" });
  server = await startTestServer({ models, tools: [createEchoTool()] });
  writeFileSync(join(server.runtime.workspace, "notes.md"), "# Notes\nThe duck waits for bread while it swims.\n");
  writeFileSync(join(server.runtime.workspace, "duck.js"), 'const duck = "quack";\n');
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

async function openChat(viewport = { width: 1200, height: 800 }): Promise<Page> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(server.loginUrl());
  Object.assign(page, { errors });
  return page;
}

async function send(page: Page, text: string): Promise<void> {
  await page.fill("#input", text);
  await page.keyboard.press("Enter");
}

/** The event numbers the panel shows; a line of grouped token chunks stands for a range. */
async function seqsInLog(page: Page): Promise<number[]> {
  const lines = await page.$$eval("#event-log li", (items) => items.map((item) => item.textContent ?? ""));
  return lines.flatMap((line) => {
    const first = Number(/#(\d+)/.exec(line)?.[1]);
    const last = Number(/to #(\d+)/.exec(line)?.[1] ?? first);
    return Array.from({ length: last - first + 1 }, (_, index) => first + index);
  });
}

describe("the web chat in Chromium", () => {
  it("sends with Enter, keeps Shift+Enter for a new line, and streams output and events", async () => {
    directive = { kind: "tool", tool: "echo", arguments: { text: "tool output here", wait_ms: 200 }, reason: "" };
    draft = "I will call the echo tool, slowly.";
    const page = await openChat();
    await page.fill("#input", "first line");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("second line");
    expect(await page.inputValue("#input")).toBe("first line\nsecond line");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".message.user");
    expect(await page.textContent(".message.user")).toBe("first line\nsecond line");
    await page.waitForSelector(".thinking:not(:empty)");
    await page.waitForFunction(() => document.querySelector(".tool .terminal, .tool pre")?.textContent?.includes("tool output here"));
    await page.click("#toggle-events");
    await page.waitForFunction(() => [...document.querySelectorAll("#event-log li")].some((item) => item.textContent?.startsWith("task-completed")));
    expect(await page.textContent(".thinking")).toContain("I will call the echo tool");
    const seqs = await seqsInLog(page);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
    await page.screenshot({ path: join(SCREENSHOTS, "chat.png") });
    expect((page as unknown as { errors: string[] }).errors).toEqual([]);
    await page.close();
  });

  it("highlights a file read by the grammar of its file type, under a readable header, and lists past tasks in the sidebar", async () => {
    const page = await openChat();
    draft = "";
    directive = { kind: "tool", tool: "file_read", arguments: { path: "duck.js" }, reason: "" };
    await send(page, "read file duck.js");
    await page.waitForSelector(".tool .hljs-string");
    expect(await page.textContent(".tool .hljs-string")).toBe('"quack"');
    expect(await page.textContent(".tool .hljs-keyword")).toBe("const");
    expect(await page.textContent(".tool .tool-head span")).toBe("Read duck.js");
    // Markdown is coloured as Markdown: its heading, and no programming keywords among its words.
    directive = { kind: "tool", tool: "file_read", arguments: { path: "notes.md" }, reason: "" };
    await send(page, "read file notes.md");
    await page.waitForFunction(() => document.querySelectorAll(".tool").length >= 2 && document.querySelectorAll(".tool")[1]!.querySelector(".hljs-section"));
    const notes = (await page.$$(".tool"))[1]!;
    expect(await notes.$eval(".hljs-section", (node) => node.textContent)).toBe("# Notes");
    expect(await notes.$(".hljs-keyword")).toBeNull();
    await page.waitForFunction(() => document.querySelectorAll("#task-list li").length >= 2);
    await page.close();
  });

  it("renders answers as Markdown with highlighted code, and keeps hostile Markdown harmless", async () => {
    draft = "";
    directive = {
      kind: "respond",
      answer: [
        "# Ducks",
        "",
        "They **dabble**; see `duck.js`:",
        "",
        "```js",
        'const call = "quack";',
        "```",
        "",
        "| bird | sound |",
        "| --- | --- |",
        "| duck | quack |",
        "",
        '[a link](javascript:window.__pwned=4) and [the docs](https://example.org/ducks) <img src=x onerror="window.__pwned=1"> ![pixel](http://127.0.0.1:9/track.png?secret=1)',
        "",
        `[this server](${server.url}/tasks) [localhost](http://localhost:8080/) [loopback](http://127.9.9.9/) [six](http://[::1]:3000/) [mapped](http://[::ffff:127.0.0.1]/) [decimal](http://2130706433/)`,
        "",
        "<script>window.__pwned = 2</script>",
      ].join("\n"),
    };
    const page = await openChat();
    await send(page, "tell me about ducks in Markdown");
    await page.waitForSelector(".answer.markdown h1");
    await page.waitForSelector(".feedback");
    expect(await page.textContent(".answer h1")).toBe("Ducks");
    expect(await page.textContent(".answer strong")).toBe("dabble");
    expect(await page.textContent(".answer pre .hljs-keyword")).toBe("const");
    expect(await page.textContent(".answer td")).toBe("duck");
    expect(await page.$(".answer pre .copy")).not.toBeNull();
    // HTML in the text is shown as text; nothing runs, no picture loads, no javascript: link survives.
    expect(await page.textContent(".answer")).toContain('<img src=x onerror="window.__pwned=1">');
    expect(await page.textContent(".answer")).toContain("<script>window.__pwned = 2</script>");
    expect(await page.$(".answer img, .answer script")).toBeNull();
    const links = await page.$$eval(".answer a", (anchors) => anchors.map((anchor) => ({ href: anchor.getAttribute("href"), rel: anchor.getAttribute("rel") })));
    expect(links.some((link) => (link.href ?? "").startsWith("javascript:"))).toBe(false);
    expect(links).toContainEqual({ href: "https://example.org/ducks", rel: "noopener noreferrer" });
    // Links to this server or to anything else on this machine are text, not links.
    expect(await page.textContent(".answer")).toContain("this server localhost loopback six mapped decimal");
    expect(links).toEqual([{ href: null, rel: null }, { href: "https://example.org/ducks", rel: "noopener noreferrer" }, ...Array.from({ length: 6 }, () => ({ href: null, rel: null }))]);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect((page as unknown as { errors: string[] }).errors).toEqual([]);
    await page.close();
  });

  it("lists conversations in the sidebar and reopens one with all its turns; a new message continues it", async () => {
    draft = "";
    const first = await openChat();
    directive = { kind: "tool", tool: "file_read", arguments: { path: "duck.js" }, reason: "" };
    await send(first, "what is in duck.js?");
    await first.waitForSelector(".feedback");
    directive = {
      kind: "respond",
      answer: "`duck.js` defines **one constant**:\n\n- `duck`, the string `\"quack\"`\n- nothing is exported\n\nTo use it elsewhere, export it:\n\n```js\nexport const duck = \"quack\";\n```",
    };
    await send(first, "how would I use it elsewhere?");
    await first.waitForFunction(() => document.querySelectorAll(".feedback").length === 2);
    await first.close();

    // Another browser: the conversation is one row, with both messages behind it.
    const page = await openChat();
    await page.waitForFunction(() => [...document.querySelectorAll("#task-list button")].some((button) => button.textContent?.startsWith("what is in duck.js?")));
    const row = page.locator("#task-list button", { hasText: "what is in duck.js?" });
    expect(await row.textContent()).toContain("2 messages");
    await row.click();
    await page.waitForFunction(() => document.querySelectorAll(".message.user").length === 2 && document.querySelector(".answer li") && document.querySelector(".tool .hljs-string"));
    expect(await page.$$eval(".message.user", (nodes) => nodes.map((node) => node.textContent))).toEqual(["what is in duck.js?", "how would I use it elsewhere?"]);
    expect(await page.textContent(".tool .tool-head span")).toBe("Read duck.js");
    expect(await page.textContent(".answer strong")).toBe("one constant");
    expect(await page.textContent(".answer pre .hljs-keyword")).toBe("export");
    // The picture README.md shows.
    await page.screenshot({ path: join(SCREENSHOTS, "conversation.png") });
    directive = { kind: "respond", answer: "Yes: import it with `import { duck } from \"./duck.js\"`." };
    await send(page, "and import it?");
    await page.waitForFunction(() => document.querySelectorAll(".message.user").length === 3 && document.querySelectorAll(".feedback").length === 3);
    const id = await page.locator("#task-list button.current").getAttribute("data-id");
    const response = await page.evaluate(async (conversation) => (await fetch(`/conversations/${encodeURIComponent(conversation!)}`)).json(), id);
    expect((response as { tasks: Array<{ text: string }> }).tasks.map((task) => task.text)).toEqual(["what is in duck.js?", "how would I use it elsewhere?", "and import it?"]);
    await page.close();
  });

  it("shows what is remembered and the remembered approvals, and pins, forgets and revokes from the page", async () => {
    const page = await openChat();
    const post = (path: string, body: unknown) => page.evaluate(async ([url, data]) => (await fetch(url as string, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(data) })).json(), [path, body] as const);
    const kept = (await post("/memory", { text: "The heron nests by the old mill", kind: "fact" })) as { entry: { id: number } };
    const dropped = (await post("/memory", { text: "The kingfisher visits on Tuesdays", kind: "fact" })) as { entry: { id: number } };
    const approval = server.runtime.approvals.grant({ command: "make lint", cwd: server.runtime.workspace, category: "unknown", grantedByTask: null });

    await page.click("#toggle-memory");
    await page.fill("#memory-query", "heron");
    await page.press("#memory-query", "Enter");
    await page.waitForSelector(`#memory-list li[data-id="${kept.entry.id}"]`);
    await page.click(`#memory-list li[data-id="${kept.entry.id}"] button:has-text("Pin")`);
    await page.waitForFunction((id) => document.querySelector(`#memory-list li[data-id="${id}"] .meta`)?.textContent?.includes("pinned"), kept.entry.id);
    await page.fill("#memory-query", "");
    await page.press("#memory-query", "Enter");
    await page.waitForSelector(`#memory-list li[data-id="${dropped.entry.id}"]`);
    await page.click(`#memory-list li[data-id="${dropped.entry.id}"] button:has-text("Forget")`);
    await page.waitForSelector(`#memory-list li[data-id="${dropped.entry.id}"]`, { state: "detached" });
    expect(server.runtime.memory.store.get(dropped.entry.id)).toBeNull();
    expect(server.runtime.memory.store.get(kept.entry.id)?.pinned).toBe(true);

    await page.click("#toggle-approvals");
    expect(await page.isVisible("#memory-panel")).toBe(false);
    await page.waitForSelector(`#approvals-list li[data-id="${approval.id}"]`);
    expect(await page.textContent(`#approvals-list li[data-id="${approval.id}"] code`)).toBe("make lint");
    await page.click(`#approvals-list li[data-id="${approval.id}"] button:has-text("Revoke")`);
    await page.waitForSelector(`#approvals-list li[data-id="${approval.id}"]`, { state: "detached" });
    expect(server.runtime.approvals.findActive("make lint", server.runtime.workspace)).toBeNull();
    expect((page as unknown as { errors: string[] }).errors).toEqual([]);
    await page.close();
  });

  it("stops the running task with the Stop button", async () => {
    draft = "";
    directive = { kind: "tool", tool: "echo", arguments: { text: "too late", wait_ms: 5_000 }, reason: "" };
    const page = await openChat();
    await send(page, "a long task");
    await page.waitForSelector("#stop:not([hidden])");
    await page.waitForSelector(".tool");
    await page.click("#stop");
    await page.waitForFunction(() => document.querySelector(".answer .error")?.textContent?.startsWith("Cancelled"));
    expect(await page.textContent(".answer .error")).toBe("Cancelled: stopped in the web chat");
    await page.waitForSelector("#stop", { state: "hidden" });
    await page.close();
  });

  it("asks for permission in a dialog and runs the command when allowed", async () => {
    directive = { kind: "tool", tool: "shell_exec", arguments: { command: "awk 'BEGIN{print \"made by the browser test\"}' > from-browser.txt && cat from-browser.txt" }, reason: "" };
    const page = await openChat();
    await send(page, "make a file");
    await page.waitForSelector("#permission-dialog[open]");
    expect(await page.textContent("#permission-category")).toBe("no rule in permissions.json covers it");
    // The command exactly as it will run, quotes and && kept; the commands found in it below.
    const command = `awk 'BEGIN{print "made by the browser test"}' > from-browser.txt && cat from-browser.txt`;
    expect(await page.textContent("#permission-commands li:first-child code")).toBe(command);
    expect(await page.textContent("#permission-commands .runs-inside")).toContain("cat from-browser.txt");
    expect(await page.textContent("#permission-workspace")).toBe(server.runtime.workspace);
    // The chat says what it waits for, behind the dialog.
    expect(await page.textContent(".waiting")).toBe(`Waiting for your approval: ${command}`);
    // And so does the conversation's line in the sidebar, without a reload.
    await page.waitForFunction(() => document.querySelector("#task-list button.current .state")?.textContent?.endsWith("awaiting permission"));
    await page.click("#permission-allow");
    await page.waitForFunction(() => document.querySelector(".tool .terminal")?.textContent?.includes("made by the browser test"));
    expect(await page.textContent(".tool .tool-head span")).toBe(`Ran \`awk 'BEGIN{print "made by the browser test"}' > from-browser.txt && cat from-browser.txt\` in ${server.runtime.workspace}`);
    await page.waitForFunction(() => document.querySelector(".iteration")?.textContent?.startsWith("You allowed"));
    await page.close();
  });

  it("fails the step when permission is denied", async () => {
    directive = { kind: "tool", tool: "shell_exec", arguments: { command: "cp /dev/null denied-in-browser.txt" }, reason: "" };
    const page = await openChat();
    await send(page, "make another file");
    await page.waitForSelector("#permission-dialog[open]");
    await page.click("#permission-deny");
    await page.waitForSelector(".answer .error");
    // Said as what happened: the command refused, not an exit code it never had or a critic's verdict.
    expect(await page.textContent(".answer .error")).toBe("Stopped: you did not allow cp /dev/null denied-in-browser.txt");
    expect(await page.textContent(".tool .tool-head")).toBe("`cp /dev/null denied-in-browser.txt`denied");
    expect(await page.textContent(".tool .error")).toContain("DUCK_ERR_PERMISSION_DENIED: the user denied permission");
    await page.close();
  });

  it("resumes the stream after a reload in the middle of a task, without duplicates", async () => {
    directive = { kind: "tool", tool: "echo", arguments: { text: "finished after the reload", wait_ms: 1_500 }, reason: "" };
    const page = await openChat();
    await send(page, "a slow task");
    await page.waitForFunction(() => location.hash.includes("task="));
    await page.waitForFunction(() => document.querySelectorAll("#event-log li").length >= 5);
    await page.reload();
    await page.click("#toggle-events");
    await page.waitForFunction(() => document.querySelector(".tool .terminal, .tool pre")?.textContent?.includes("finished after the reload"), undefined, { timeout: 10_000 });
    await page.waitForFunction(() => [...document.querySelectorAll("#event-log li")].some((item) => item.textContent?.startsWith("task-completed")));
    const seqs = await seqsInLog(page);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
    await page.close();
  });

  it("streams a direct answer token by token while the model writes it", async () => {
    const answer = "Ducks dabble for food in shallow water; \"quack\" is their call.\nThey also like bread, which is bad for them.";
    directive = { kind: "respond", answer };
    draft = "";
    models.chunkDelayMs = 15;
    try {
      const page = await openChat();
      await send(page, "tell me about ducks");
      // Part of the answer is on screen while the task is still running (no feedback bar yet).
      await page.waitForFunction(() => {
        const shown = document.querySelector(".answer.streaming")?.textContent ?? "";
        return shown.length > 10 && !document.querySelector(".feedback");
      });
      const partial = (await page.textContent(".answer.streaming")) ?? "";
      expect(answer.startsWith(partial)).toBe(true);
      expect(partial.length).toBeLessThan(answer.length);
      await page.waitForSelector(".feedback");
      expect(await page.textContent(".answer")).toBe(answer);
      expect(await page.$(".answer.streaming")).toBeNull();
      await page.close();
    } finally {
      models.chunkDelayMs = 0;
    }
  });

  it("renders a coder step's files as a diff and its test command as a terminal block", async () => {
    draft = "";
    directive = {
      kind: "plan",
      goal: "greet",
      steps: [{ id: "greet", kind: "coder", description: "write the greeting", depends_on: [], coder: { specification: "Write greeting.txt.", files: ["greeting.txt"], test_command: "cat greeting.txt" } }],
    };
    const page = await openChat();
    await send(page, "write a greeting file");
    await page.waitForSelector(".tool .diff .add");
    expect(await page.textContent(".tool .tool-head")).toContain("coder: greeting.txt · test: cat greeting.txt");
    expect(await page.textContent(".tool .diff .add")).toBe("+hello from the coder");
    expect(await page.textContent(".tool .terminal")).toContain("$ cat greeting.txt\nhello from the coder");
    expect(await page.textContent(".tool .exit")).toBe("exit 0");
    await page.close();
  });

  it("undoes a task's changes from its Undo button, after showing which files change", async () => {
    writeFileSync(join(server.runtime.workspace, "undo-me.txt"), "before the task\n");
    directive = { kind: "tool", tool: "file_write", arguments: { path: "undo-me.txt", content: "written by the task\n" }, reason: "" };
    const page = await openChat();
    await send(page, "rewrite undo-me.txt");
    await page.waitForSelector(".feedback .undo");
    expect(readFileSync(join(server.runtime.workspace, "undo-me.txt"), "utf8")).toBe("written by the task\n");
    await page.click(".feedback .undo");
    await page.waitForSelector("#undo-dialog[open]");
    expect(await page.textContent("#undo-files")).toBe("rewritten: undo-me.txt");
    // Looking changes nothing.
    expect(readFileSync(join(server.runtime.workspace, "undo-me.txt"), "utf8")).toBe("written by the task\n");
    await page.click("#undo-confirm");
    await page.waitForSelector(".undone");
    expect(await page.textContent(".undone")).toBe("Undone: 1 file put back");
    expect(readFileSync(join(server.runtime.workspace, "undo-me.txt"), "utf8")).toBe("before the task\n");
    expect((page as unknown as { errors: string[] }).errors).toEqual([]);
    await page.close();
  });

  it("shows model output that contains HTML as text", async () => {
    directive = { kind: "respond", answer: '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>' };
    draft = "<b onmouseover=\"window.__pwned = 3\">bold?</b>";
    const page = await openChat();
    await send(page, "say something nasty");
    await page.waitForSelector(".answer:not(:empty)");
    expect(await page.textContent(".answer")).toContain("<img src=x onerror=");
    expect(await page.$(".answer img")).toBeNull();
    expect(await page.$(".thinking b")).toBeNull();
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    await page.close();
  });

  it("is usable at phone width: nothing overflows, and the task drawer closes on Esc and on a tap beside it", async () => {
    directive = { kind: "respond", answer: "small screens work\n\n```\n" + "a-very-long-line-without-spaces-".repeat(8) + "\n```" };
    const page = await openChat({ width: 390, height: 800 });
    await send(page, "hello from a phone");
    await page.waitForSelector(".answer:not(:empty)");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    expect(await page.isVisible("#input")).toBe(true);
    await page.click("#toggle-sidebar");
    expect(await page.isVisible("#sidebar")).toBe(true);
    await page.keyboard.press("Escape");
    expect(await page.isVisible("#sidebar")).toBe(false);
    await page.click("#toggle-sidebar");
    expect(await page.isVisible("#sidebar")).toBe(true);
    await page.mouse.click(370, 400);
    expect(await page.isVisible("#sidebar")).toBe(false);
    await page.screenshot({ path: join(SCREENSHOTS, "phone.png") });
    await page.close();
  });

  it("asks for a password without echoing or keeping it", async () => {
    const page = await openChat();
    const received: string[] = [];
    page.on("request", (request) => {
      if (request.url().endsWith("/secrets/resolve")) received.push(request.postData() ?? "");
    });
    // Drive a secret request straight from the runtime: a sudo command, approved.
    directive = { kind: "tool", tool: "shell_exec", arguments: { command: "sudo true" }, reason: "" };
    await send(page, "needs sudo");
    await page.waitForSelector("#permission-dialog[open]");
    await page.click("#permission-allow");
    await page.waitForSelector("#secret-dialog[open]");
    expect(await page.getAttribute("#secret-input", "type")).toBe("password");
    await page.fill("#secret-input", "hunter2-browser");
    const posted = page.waitForRequest((request) => request.url().endsWith("/secrets/resolve"));
    await page.click("#secret-send");
    await page.waitForFunction(() => !document.querySelector("#secret-dialog[open]"));
    expect(await page.inputValue("#secret-input")).toBe("");
    await posted;
    expect(received.join("")).toContain("hunter2-browser");
    expect(await page.content()).not.toContain("hunter2-browser");
    await page.close();
  });
});

describe("a task waiting in line", () => {
  it("shows its place, and the place moves as the tasks before it finish", async () => {
    const slow = scriptedAgent({ directive: { kind: "tool", tool: "echo", arguments: { text: "done", wait_ms: 2_500 }, reason: "" }, draft: "", verdict: () => "pass" });
    const lined = await startTestServer({ models: slow, tools: [createEchoTool()], runtime: { scheduler: { max_running_tasks: 1 } } });
    const page = await browser.newPage();
    try {
      await page.goto(lined.loginUrl());
      await page.waitForSelector("#input:not([disabled])");
      for (const text of ["first", "second", "third"]) {
        await send(page, text);
        await page.waitForFunction((count) => document.querySelectorAll(".message.user").length === count, ["first", "second", "third"].indexOf(text) + 1);
      }
      await page.waitForFunction(() => [...document.querySelectorAll(".queued")].at(-1)?.textContent?.startsWith("Waiting to run: number 2 in line"));
      // The first finishes, the second starts: the third is next.
      await page.waitForFunction(() => [...document.querySelectorAll(".queued")].at(-1)?.textContent?.startsWith("Waiting to run: number 1 in line"), undefined, { timeout: 15_000 });
    } finally {
      await page.close();
      await lined.close();
    }
  }, 60_000);
});

describe("logging in", () => {
  it("takes a one-time link; the page alone gives nothing, and without the session nothing can be approved", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.url}/`);
    await page.waitForSelector("#login-notice:not([hidden])");
    expect(await page.isDisabled("#input")).toBe(true);
    expect(await context.cookies()).toEqual([]);
    // Without a session the page's own requests are refused: it cannot approve a waiting command.
    directive = { kind: "tool", tool: "shell_exec", arguments: { command: "cp /dev/null waiting.txt" }, reason: "" };
    const waiting = await server.runtime.loop.submit({ text: "make a file" }).done;
    const request = waiting.pending_permissions[0]!;
    const status = await page.evaluate(
      async (body) => (await fetch("/permissions/resolve", { method: "POST", headers: { "content-type": "application/json" }, body })).status,
      JSON.stringify({ task_id: waiting.task_id, request_id: request.request_id, decision: "allow" }),
    );
    expect(status).toBe(401);
    expect(server.runtime.store.getTask(waiting.task_id)?.state).toBe("awaiting_permission");
    server.runtime.loop.cancel(waiting.task_id);

    const link = server.loginUrl();
    await page.goto(link);
    expect(new URL(page.url()).search).toBe("");
    expect(page.url()).not.toContain("code=");
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: "ducklm_session", httpOnly: true, sameSite: "Strict" });
    expect(cookie!.value).not.toBe(server.token);
    expect(await page.isHidden("#login-notice")).toBe(true);
    expect(await page.isDisabled("#input")).toBe(false);
    expect(await page.evaluate(() => document.cookie)).toBe("");

    // The same link in another browser: used up.
    const other = await browser.newContext();
    const second = await other.newPage();
    const response = await second.goto(link);
    expect(response?.status()).toBe(401);
    expect(await second.textContent("body")).toContain("used or has expired");
    expect(await other.cookies()).toEqual([]);
    await other.close();
    await context.close();
  });
});

describe("a page from another origin", () => {
  let evil: Server;
  let evilUrl = "";
  beforeAll(async () => {
    evil = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "text/html" });
      response.end(`<!doctype html><script>
        window.results = {};
        fetch("${server.url}/chat", { method: "POST", credentials: "include", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: "run \`touch pwned\`" }) })
          .then((r) => (window.results.fetch = r.status)).catch(() => (window.results.fetch = "blocked"));
        const ws = new WebSocket("ws://127.0.0.1:${server.port}/stream/x");
        ws.onopen = () => (window.results.ws = "open");
        ws.onerror = () => (window.results.ws = "refused");
      </script>`);
    });
    await new Promise<void>((ready) => evil.listen(0, "127.0.0.1", () => ready()));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
  });
  afterAll(() => evil.close());

  it("can neither submit tasks nor open the event stream, even after the user opened the chat", async () => {
    const context = await browser.newContext();
    const chat = await context.newPage();
    await chat.goto(server.loginUrl());
    const before = server.runtime.store.listTasks({ limit: 500 }).length;
    const page = await context.newPage();
    await page.goto(evilUrl);
    await page.waitForFunction(() => (window as unknown as { results: Record<string, unknown> }).results.ws !== undefined && (window as unknown as { results: Record<string, unknown> }).results.fetch !== undefined);
    const results = await page.evaluate(() => (window as unknown as { results: Record<string, unknown> }).results);
    expect(results.ws).toBe("refused");
    expect(server.runtime.store.listTasks({ limit: 500 }).length).toBe(before);
    await context.close();
  });
});
