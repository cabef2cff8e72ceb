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
  ])("finds a secret the task read carried out %s", (_how, url) => {
    expect(outboundLeak([url], read)).toMatchObject({ step: "s1" });
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
