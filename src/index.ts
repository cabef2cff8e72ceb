/**
 * DuckLM as a library: `createDuckLM()` opens the runtime the way its command line does and gives
 * the same API its HTTP server and CLI use — commands and queries, events typed by their `type`.
 */
export { createDuckLM, type CreateDuckLMOptions } from "./runtime/create-ducklm.js";
export type { DuckLM, RuntimeStatus, TaskInput, TaskView, TypedEvent } from "./runtime/ducklm.js";
export type { PermissionAnswer, SubmitOptions, TaskHandle } from "./runtime/runtime-loop.js";
export type { TaskOutcome } from "./runtime/task-outcome.js";
export type { ResumeReport, StartOptions, StartReport } from "./runtime/create-runtime.js";
export type { MemoryEditResult } from "./runtime/edit-memory.js";
export type {
  CommandCategory,
  DuckEvent,
  EventPayloads,
  EventTypeName,
  ExecutionDirective,
  MemoryEntry,
  MemoryHit,
  MemoryKind,
  ModelRole,
  PreApproval,
  TaskState,
  TaskSummary,
  ToolCall,
  ToolResult,
} from "./contracts/index.js";
export { DuckError, ErrorCode, ERROR_STATUS, type ErrorCodeName } from "./errors/duck-error.js";
export { defineTool, type ToolContext, type ToolDefinition, type ToolOutput } from "./tools/tool-definition.js";
export type { EmbeddingProvider, JsonRequest, JsonResult, ModelProvider, TextRequest } from "./models/model-provider.js";
export { ScriptedModelProvider, type ScriptedReply } from "./models/scripted-provider.js";
