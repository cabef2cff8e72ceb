import { createExecutionDirectiveSchema, ExecutionDirectiveSchema, type ExecutionDirective, type ModelRole } from "../contracts/index.js";
import type { z } from "zod";
import type { Prompts } from "../config/config-schemas.js";
import type { BuiltContext } from "../context/context-builder.js";
import type { ModelProvider } from "../models/model-provider.js";
import { NO_MODEL_ANSWER, parseIntent } from "./intent-parser.js";
import { reportedModelCall, type ModelStreamSink } from "./model-stream-sink.js";

export interface RouterDecision {
  directive: ExecutionDirective;
  source: "model" | "intent-parser" | "no-model";
}

export interface RouterOptions {
  signal?: AbortSignal;
  sink: ModelStreamSink;
}

/** The role that turns the Thinker's prose into a directive: the JSON compiler, else the Thinker itself. */
function compilerRole(models: ModelProvider): ModelRole | null {
  if (models.hasRole("json_compiler")) return "json_compiler";
  if (models.hasRole("thinker")) return "thinker";
  return null;
}

/**
 * Decides what to do with a task: the Thinker drafts in prose, the JSON compiler turns the draft into
 * an ExecutionDirective under the directive's schema. With no model, the IntentParser reads explicit
 * requests and everything else gets an honest answer.
 */
export class Router {
  /** Built once, so that a provider can cache the grammar it derives from it. */
  private readonly directiveSchema: z.ZodType<ExecutionDirective>;

  constructor(
    private readonly models: ModelProvider | null,
    private readonly prompts: Prompts,
    toolNames: readonly string[] = [],
  ) {
    this.directiveSchema = toolNames.length > 0 ? createExecutionDirectiveSchema(toolNames) : ExecutionDirectiveSchema;
  }

  get usesModels(): boolean {
    return this.models !== null && compilerRole(this.models) !== null;
  }

  async decide(taskText: string, context: BuiltContext, options: RouterOptions): Promise<RouterDecision> {
    const models = this.models;
    const compiler = models ? compilerRole(models) : null;
    if (!models || !compiler) {
      const directive = parseIntent(taskText);
      return directive
        ? { directive, source: "intent-parser" }
        : { directive: { kind: "respond", answer: NO_MODEL_ANSWER }, source: "no-model" };
    }
    let draft = "";
    if (models.hasRole("thinker")) {
      draft = await reportedModelCall(
        options.sink,
        "thinker",
        "draft",
        (onDelta) =>
          models.generateText({
            role: "thinker",
            purpose: "draft",
            system: `${context.system}\n\n${this.prompts.thinker}`,
            prompt: context.prompt,
            onDelta,
            ...(options.signal ? { signal: options.signal } : {}),
          }),
        (text) => text,
      );
    }
    const compiled = await reportedModelCall(
      options.sink,
      compiler,
      "directive",
      (onDelta) =>
        models.generateJson({
          role: compiler,
          purpose: "directive",
          system: this.prompts.json_compiler,
          prompt: `${context.prompt}\n\n## Thinker's decision\n${draft || "(none)"}\n\nWrite the ExecutionDirective as JSON.`,
          schema: this.directiveSchema,
          onDelta,
          ...(options.signal ? { signal: options.signal } : {}),
        }),
      (result) => result.raw,
    );
    return { directive: compiled.value, source: "model" };
  }
}
