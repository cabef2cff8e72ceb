import type { DuckEvent, EventPayloads, ModelCallUsage, ModelRole } from "../contracts/index.js";
import { DuckError, ErrorCode, type ErrorCodeName } from "../errors/duck-error.js";
import { estimateTokens, type JsonRequest, type JsonResult, type ModelProvider, type TextRequest } from "../models/model-provider.js";
import { jsonTextOf, parseModelJson } from "../models/model-output.js";
import { ROLE_FALLBACKS } from "../models/model-roles.js";
import { TOOL_DECISION_PURPOSE } from "../decisions/router.js";
import type { ReplayProgress } from "./replay-progress.js";

interface RecordedCall {
  promptTokens: number | undefined;
  deltas: Array<{ seq: number; text: string }>;
  end: { seq: number; kind: "completed"; text: string; usage: ModelCallUsage | undefined } | { seq: number; kind: "failed"; code: string; message: string } | null;
}

/** Serves the model outputs a task recorded, in order per role and purpose, each chunk at its recorded position. */
export class ReplayModelProvider implements ModelProvider {
  private readonly calls = new Map<string, RecordedCall[]>();
  private readonly roles = new Set<ModelRole>();

  constructor(events: readonly DuckEvent[], private readonly progress: ReplayProgress) {
    const open = new Map<string, RecordedCall>();
    for (const event of events) {
      if (!event.type.startsWith("model-output-")) continue;
      const payload = event.payload as { role: ModelRole; purpose: string };
      const key = `${payload.role}|${payload.purpose}`;
      if (event.type === "model-output-started") {
        const call: RecordedCall = { promptTokens: (event.payload as EventPayloads["model-output-started"]).prompt_tokens, deltas: [], end: null };
        open.set(key, call);
        this.roles.add(payload.role);
        const list = this.calls.get(key) ?? [];
        list.push(call);
        this.calls.set(key, list);
      } else if (event.type === "model-output-delta") {
        open.get(key)?.deltas.push({ seq: event.seq, text: (event.payload as EventPayloads["model-output-delta"]).text });
      } else if (event.type === "model-output-completed") {
        const call = open.get(key);
        const completed = event.payload as EventPayloads["model-output-completed"];
        if (call) call.end = { seq: event.seq, kind: "completed", text: completed.text, usage: completed.usage };
      } else if (event.type === "model-output-failed") {
        const call = open.get(key);
        const failed = event.payload as EventPayloads["model-output-failed"];
        if (call) call.end = { seq: event.seq, kind: "failed", code: failed.code, message: failed.message };
      }
    }
  }

  /** The roles a request for `role` may have been recorded under: itself, then its fallbacks. */
  private candidates(role: ModelRole): ModelRole[] {
    const chain: ModelRole[] = [];
    for (let candidate: ModelRole | undefined = role; candidate && !chain.includes(candidate); candidate = ROLE_FALLBACKS[candidate]) chain.push(candidate);
    return chain;
  }

  /** Decisions were folded into one call where the recording made them so. */
  sharesModel(first: ModelRole, second: ModelRole): boolean {
    // Served by whichever role recorded it: the roles themselves may never have been.
    return first !== second && [...this.calls.keys()].some((key) => key.endsWith("|decision") || key.endsWith(`|${TOOL_DECISION_PURPOSE}`));
  }

  /** Decisions were native tool calls where the recording made them so. */
  callsTools(_role: ModelRole): boolean {
    return this.recorded(TOOL_DECISION_PURPOSE);
  }

  /** Whether the recording made a call for this purpose (any role). */
  recorded(purpose: string): boolean {
    return [...this.calls.keys()].some((key) => key.endsWith(`|${purpose}`));
  }

  hasRole(role: ModelRole): boolean {
    return this.candidates(role).some((candidate) => this.roles.has(candidate));
  }

  async generateText(request: TextRequest): Promise<string> {
    return this.play(request);
  }

  async generateJson<T>(request: JsonRequest<T>): Promise<JsonResult<T>> {
    const raw = await this.play(request);
    // As the live provider read it: a server that answered in prose around its JSON is read the same way.
    return { value: parseModelJson(request.role, jsonTextOf(raw), request.schema), raw };
  }

  countTokens(_role: ModelRole, text: string): number {
    return estimateTokens(text);
  }

  /** The count the recording made for the call about to be served, so that budgets run out where they did. */
  promptTokens(request: { role: ModelRole; purpose?: string; system: string; prompt: string }): number | undefined {
    return this.calls.get(this.keyFor(request))?.[0]?.promptTokens;
  }

  private keyFor(request: { role: ModelRole; purpose?: string }): string {
    // Logs recorded before roles were resolved by the provider name the fallback role itself.
    return this.candidates(request.role).map((role) => `${role}|${request.purpose ?? ""}`).find((candidate) => (this.calls.get(candidate)?.length ?? 0) > 0) ?? `${request.role}|${request.purpose ?? ""}`;
  }

  async dispose(): Promise<void> {}

  private async play(request: TextRequest | JsonRequest<unknown>): Promise<string> {
    request.signal?.throwIfAborted();
    const call = this.calls.get(this.keyFor(request))?.shift();
    if (!call) throw new DuckError(ErrorCode.ModelUnavailable, `the recording has no further ${request.role} output for ${request.purpose ?? "(no purpose)"}`);
    for (const delta of call.deltas) {
      await this.progress.until(delta.seq - 1, request.signal);
      request.onDelta?.(delta.text);
    }
    if (!call.end) return this.progress.forever(request.signal);
    await this.progress.until(call.end.seq - 1, request.signal);
    if (call.end.kind === "failed") throw new DuckError(call.end.code as ErrorCodeName, call.end.message);
    // What the call cost is the recording's, so that the task's totals come out as they did.
    if (call.end.usage) request.onUsage?.(call.end.usage);
    return call.end.text;
  }
}
