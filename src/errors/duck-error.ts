/** Every error DuckLM raises on purpose carries a stable code listed in docs/errors.md. */
export const ErrorCode = {
  ConfigInvalid: "DUCK_ERR_CONFIG_INVALID",
  ConfigMissing: "DUCK_ERR_CONFIG_MISSING",
  InvalidInput: "DUCK_ERR_INVALID_INPUT",
  TaskNotFound: "DUCK_ERR_TASK_NOT_FOUND",
  MemoryNotFound: "DUCK_ERR_MEMORY_NOT_FOUND",
  TaskNotActive: "DUCK_ERR_TASK_NOT_ACTIVE",
  TaskTimeout: "DUCK_ERR_TASK_TIMEOUT",
  IterationLimit: "DUCK_ERR_ITERATION_LIMIT",
  TokenBudget: "DUCK_ERR_TOKEN_BUDGET",
  PlanCycle: "DUCK_ERR_PLAN_CYCLE",
  PlanMissingDependency: "DUCK_ERR_PLAN_MISSING_DEPENDENCY",
  PlanDuplicateStep: "DUCK_ERR_PLAN_DUPLICATE_STEP",
  PlanTooLong: "DUCK_ERR_PLAN_TOO_LONG",
  ToolNotFound: "DUCK_ERR_TOOL_NOT_FOUND",
  ToolInputInvalid: "DUCK_ERR_TOOL_INPUT_INVALID",
  ToolFailed: "DUCK_ERR_TOOL_FAILED",
  ToolTimeout: "DUCK_ERR_TOOL_TIMEOUT",
  FileNotFound: "DUCK_ERR_FILE_NOT_FOUND",
  WebAddressBlocked: "DUCK_ERR_WEB_ADDRESS_BLOCKED",
  WebFetchFailed: "DUCK_ERR_WEB_FETCH_FAILED",
  WebContentType: "DUCK_ERR_WEB_CONTENT_TYPE",
  ModelServerFailed: "DUCK_ERR_MODEL_SERVER",
  PathOutsideWorkspace: "DUCK_ERR_PATH_OUTSIDE_WORKSPACE",
  PathProtected: "DUCK_ERR_PATH_PROTECTED",
  PermissionDenied: "DUCK_ERR_PERMISSION_DENIED",
  PermissionRequestUnknown: "DUCK_ERR_PERMISSION_REQUEST_UNKNOWN",
  HardStop: "DUCK_ERR_HARD_STOP",
  ModelUnavailable: "DUCK_ERR_MODEL_UNAVAILABLE",
  ModelLoadFailed: "DUCK_ERR_MODEL_LOAD",
  ModelDownloadFailed: "DUCK_ERR_MODEL_DOWNLOAD",
  ModelOutputInvalid: "DUCK_ERR_MODEL_OUTPUT_INVALID",
  ModelTimeout: "DUCK_ERR_MODEL_TIMEOUT",
  StepFailed: "DUCK_ERR_STEP_FAILED",
  Cancelled: "DUCK_ERR_CANCELLED",
  Shutdown: "DUCK_ERR_SHUTDOWN",
  StorageFailed: "DUCK_ERR_STORAGE",
  DatabaseCorrupt: "DUCK_ERR_DATABASE_CORRUPT",
  SeqConflict: "DUCK_ERR_SEQ_CONFLICT",
  TaskOwnedElsewhere: "DUCK_ERR_TASK_OWNED_ELSEWHERE",
  TaskFenced: "DUCK_ERR_TASK_FENCED",
  TaskFinished: "DUCK_ERR_TASK_FINISHED",
  UndoUnavailable: "DUCK_ERR_UNDO_UNAVAILABLE",
  DiskFull: "DUCK_ERR_DISK_FULL",
  QueueFull: "DUCK_ERR_QUEUE_FULL",
  ServerNotRunning: "DUCK_ERR_SERVER_NOT_RUNNING",
  Unauthorized: "DUCK_ERR_UNAUTHORIZED",
  ForbiddenHost: "DUCK_ERR_FORBIDDEN_HOST",
  ForbiddenOrigin: "DUCK_ERR_FORBIDDEN_ORIGIN",
  RouteNotFound: "DUCK_ERR_NOT_FOUND",
  BodyTooLarge: "DUCK_ERR_BODY_TOO_LARGE",
  UnsupportedMediaType: "DUCK_ERR_UNSUPPORTED_MEDIA_TYPE",
  Internal: "DUCK_ERR_INTERNAL",
} as const;

export type ErrorCodeName = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The HTTP status of each code: the one table the server answers by. A code that is the caller's
 * doing is a 4xx; what went wrong here is a 5xx.
 */
export const ERROR_STATUS: Readonly<Record<ErrorCodeName, number>> = {
  DUCK_ERR_CONFIG_INVALID: 500,
  DUCK_ERR_CONFIG_MISSING: 500,
  DUCK_ERR_INVALID_INPUT: 400,
  DUCK_ERR_TASK_NOT_FOUND: 404,
  DUCK_ERR_MEMORY_NOT_FOUND: 404,
  DUCK_ERR_TASK_NOT_ACTIVE: 409,
  DUCK_ERR_TASK_TIMEOUT: 504,
  DUCK_ERR_ITERATION_LIMIT: 422,
  DUCK_ERR_TOKEN_BUDGET: 422,
  DUCK_ERR_PLAN_CYCLE: 422,
  DUCK_ERR_PLAN_MISSING_DEPENDENCY: 422,
  DUCK_ERR_PLAN_DUPLICATE_STEP: 422,
  DUCK_ERR_PLAN_TOO_LONG: 422,
  DUCK_ERR_TOOL_NOT_FOUND: 404,
  DUCK_ERR_TOOL_INPUT_INVALID: 400,
  DUCK_ERR_TOOL_FAILED: 502,
  DUCK_ERR_TOOL_TIMEOUT: 504,
  DUCK_ERR_FILE_NOT_FOUND: 404,
  DUCK_ERR_WEB_ADDRESS_BLOCKED: 403,
  DUCK_ERR_WEB_FETCH_FAILED: 502,
  DUCK_ERR_WEB_CONTENT_TYPE: 415,
  DUCK_ERR_MODEL_SERVER: 502,
  DUCK_ERR_PATH_OUTSIDE_WORKSPACE: 403,
  DUCK_ERR_PATH_PROTECTED: 403,
  DUCK_ERR_PERMISSION_DENIED: 403,
  DUCK_ERR_PERMISSION_REQUEST_UNKNOWN: 409,
  DUCK_ERR_HARD_STOP: 403,
  DUCK_ERR_MODEL_UNAVAILABLE: 503,
  DUCK_ERR_MODEL_LOAD: 503,
  DUCK_ERR_MODEL_DOWNLOAD: 502,
  DUCK_ERR_MODEL_OUTPUT_INVALID: 502,
  DUCK_ERR_MODEL_TIMEOUT: 504,
  DUCK_ERR_STEP_FAILED: 422,
  DUCK_ERR_CANCELLED: 409,
  DUCK_ERR_SHUTDOWN: 503,
  DUCK_ERR_STORAGE: 500,
  DUCK_ERR_DATABASE_CORRUPT: 500,
  DUCK_ERR_SEQ_CONFLICT: 409,
  DUCK_ERR_TASK_OWNED_ELSEWHERE: 409,
  DUCK_ERR_TASK_FENCED: 409,
  DUCK_ERR_TASK_FINISHED: 409,
  DUCK_ERR_UNDO_UNAVAILABLE: 409,
  DUCK_ERR_DISK_FULL: 503,
  DUCK_ERR_QUEUE_FULL: 429,
  DUCK_ERR_SERVER_NOT_RUNNING: 503,
  DUCK_ERR_UNAUTHORIZED: 401,
  DUCK_ERR_FORBIDDEN_HOST: 403,
  DUCK_ERR_FORBIDDEN_ORIGIN: 403,
  DUCK_ERR_NOT_FOUND: 404,
  DUCK_ERR_BODY_TOO_LARGE: 413,
  DUCK_ERR_UNSUPPORTED_MEDIA_TYPE: 415,
  DUCK_ERR_INTERNAL: 500,
};

const marker = Symbol.for("ducklm.error");

export class DuckError extends Error {
  readonly code: ErrorCodeName;
  /** Structured facts a caller can show or act on (the file, the field, the step id…). */
  readonly details: Record<string, unknown>;
  readonly [marker] = true;

  constructor(code: ErrorCodeName, message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DuckError";
    this.code = code;
    this.details = options.details ?? {};
  }

  /** Works across module copies, where `instanceof` would not. */
  static isInstance(value: unknown): value is DuckError {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[marker] === true;
  }

  /** The HTTP status the server answers this error with. */
  get status(): number {
    return ERROR_STATUS[this.code] ?? 500;
  }

  toJSON(): { code: string; message: string; details: Record<string, unknown> } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

/** True when `reason` (an abort reason) means "the process is stopping", not "the user cancelled". */
export function isShutdown(reason: unknown): boolean {
  return DuckError.isInstance(reason) && reason.code === ErrorCode.Shutdown;
}

/** Turns anything thrown into a code and a message a person can read. */
/**
 * SQLite's own errors said as DuckLM's, with what to do: a damaged file, a full disk, a home that
 * cannot be written. Null for anything else.
 */
export function storageErrorOf(error: unknown, file = "DuckLM's database"): DuckError | null {
  if (DuckError.isInstance(error) || !(error instanceof Error)) return null;
  const code = String((error as { code?: unknown }).code ?? "");
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") {
    return new DuckError(ErrorCode.DatabaseCorrupt, `${file} is damaged (${error.message}): run \`ducklm db check\` to see what is affected, then \`ducklm db recover\` to keep every intact task`, { cause: error });
  }
  if (code === "SQLITE_FULL" || code === "ENOSPC") return new DuckError(ErrorCode.DiskFull, `${file} cannot grow: the disk is full (${error.message}); free some space, and DuckLM carries on`, { cause: error, details: { retry_after_s: 5 } });
  if (code.startsWith("SQLITE_READONLY") || code.startsWith("SQLITE_CANTOPEN") || code.startsWith("SQLITE_IOERR")) {
    return new DuckError(ErrorCode.StorageFailed, `${file} cannot be written (${error.message}): check that its folder exists and is writable, or choose another home with --home`, { cause: error });
  }
  return null;
}

export function describeError(error: unknown): { code: ErrorCodeName; message: string } {
  if (DuckError.isInstance(error)) return { code: error.code, message: error.message };
  const storage = storageErrorOf(error);
  if (storage) return { code: storage.code, message: storage.message };
  if (error instanceof Error && error.name === "AbortError") return { code: ErrorCode.Cancelled, message: "the operation was cancelled" };
  if (error instanceof Error) return { code: ErrorCode.Internal, message: error.message };
  return { code: ErrorCode.Internal, message: String(error) };
}
