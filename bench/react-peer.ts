// The peer the agent benches compare with: LangGraph.js's prebuilt ReAct agent driven by a fake
// tool-calling model that follows the same scripted task shapes as DuckLM's scripted agent.
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import type { ExecutionDirective } from "../src/contracts/index.js";

/**
 * The task set. Each shape is what the model decides at each decision, given what it has seen:
 * tool calls (the second may use the first's output) and then an answer written from the results.
 */
export interface Shape {
  name: string;
  /** The echo tool's calls, one decision each, then the answer. */
  calls: Array<(previous: string) => string>;
  /**
   * In place of `calls`: what each decision calls (several calls at once run side by side), given the
   * last tool output seen, then the answer.
   */
  turns?: Array<(previous: string) => ShapeCall[]>;
}

/** One tool call of a decision. */
export interface ShapeCall {
  tool: string;
  args: Record<string, unknown>;
}

/** The calls of each decision of a shape, whichever way it is written. */
export function turnsOf(shape: Shape): Array<(previous: string) => ShapeCall[]> {
  return shape.turns ?? shape.calls.map((call) => (previous: string) => [{ tool: "echo", args: { text: call(previous) } }]);
}
/**
 * DuckLM's side of the script: the directive of each decision, from the last tool output its prompt
 * shows, then the answer. Written as the decision grammar has a model write it: no reason, goal or
 * description (they take their defaults).
 */
export function scriptedDirectiveOf(shape: Shape): (request: unknown, view: { decision: number; observed: string }) => ExecutionDirective {
  return (_request, view) => {
    const step = view.decision - 1;
    const lastOutput = /^ {2}│ (.*)$/.exec(view.observed.trimEnd().split("\n").at(-1) ?? "")?.[1] ?? "";
    const turns = turnsOf(shape);
    if (step >= turns.length) return { kind: "respond", answer: `Done: ${lastOutput}` };
    const calls = turns[step]!(lastOutput);
    if (calls.length === 1) return { kind: "tool", tool: calls[0]!.tool, arguments: calls[0]!.args } as unknown as ExecutionDirective;
    return { kind: "plan", steps: calls.map((call, index) => ({ id: `s${index + 1}`, kind: "tool" as const, depends_on: [], tool: call.tool, arguments: call.args })) } as unknown as ExecutionDirective;
  };
}

export const SHAPES: Shape[] = [
  { name: "one tool, then answer", calls: [() => "the pond is 3 m deep"] },
  { name: "two dependent tools, then answer", calls: [() => "notes.txt", (previous) => `contents of ${previous}: ducks like bread`] },
  { name: "three tools, then answer", calls: [() => "a", (previous) => `${previous}b`, (previous) => `${previous}c`] },
];
/** LangGraph's side of the script: a tool call per decision while calls remain, then the answer. */
export class FakeToolCallingModel extends BaseChatModel {
  shape: Shape = SHAPES[0]!;
  prompts: string[] = [];
  outputs: string[] = [];
  toolSchemas = "";
  /** Text the model writes before each tool call or answer (its reasoning); none by default. */
  thought = "";
  _llmType(): string {
    return "fake-tool-calling";
  }
  // createReactAgent binds the tools to the model; a real provider would send their schemas with every call.
  override bindTools(tools: Parameters<typeof convertToOpenAITool>[0][]): this {
    // What an OpenAI-compatible provider would send: each tool's function schema.
    this.toolSchemas = JSON.stringify(tools.map((entry) => convertToOpenAITool(entry)));
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    // The prompt as a provider would send it: the messages (with their tool calls) and the tool schemas.
    this.prompts.push(this.toolSchemas + JSON.stringify(messages.map((message) => ({ role: message.getType(), content: message.content, tool_calls: (message as AIMessage).tool_calls }))));
    const results = messages.filter((message) => message instanceof ToolMessage);
    const step = messages.filter((message) => message instanceof AIMessage && (message.tool_calls?.length ?? 0) > 0).length;
    const lastOutput = String(results.at(-1)?.content ?? "");
    const turns = turnsOf(this.shape);
    const lead = this.thought ? `${this.thought}\n` : "";
    const message =
      step < turns.length
        ? new AIMessage({ content: this.thought, tool_calls: turns[step]!(lastOutput).map((call, index) => ({ id: `call_${step}_${index}`, name: call.tool, args: call.args, type: "tool_call" as const })) })
        : new AIMessage({ content: `${lead}Done: ${lastOutput}` });
    const calls = message.tool_calls ?? [];
    this.outputs.push(JSON.stringify(calls.length > 0 ? (this.thought ? { content: message.content, tool_calls: calls } : calls) : message.content));
    return { generations: [{ text: String(message.content), message }] };
  }
}

