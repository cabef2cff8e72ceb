import { decisionSchemaFor } from "../decisions/router.js";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve, sep } from "node:path";
import type { Logger } from "pino";
import type { DuckConfig } from "../config/config-schemas.js";
import { BUNDLED_CONFIG_DIR, loadConfig, resolveConfigDir, resolveHomeDir } from "../config/load-config.js";
import { MemoryService, type MemoryEmbedder } from "../memory/memory-service.js";
import { isEmbeddingProvider, type ModelProvider } from "../models/model-provider.js";
import { CommandClassifier } from "../permissions/command-classifier.js";
import type { SqlDatabase, SqlDialect } from "../storage/sql-database.js";
import { openPostgresStores, openStores } from "../state/open-stores.js";
import { listenForCommits } from "../storage/postgres/commit-notices.js";
import { sqliteOf } from "../storage/open-database.js";
import { watchOtherWriters } from "../storage/other-writers.js";
import { assertRoomToStart, FREE_BYTES_TO_RETRY, freeBytes } from "../storage/disk-space.js";
import { serverSocketDirs } from "../storage/postgres/open-postgres.js";
import { postgresPrivatePaths, postgresUrlOf } from "./postgres-url.js";
import type { TaskLeases } from "../state/task-leases.js";
import { ensurePrivateDir } from "../storage/private-files.js";
import { realpathOfDeepestAncestor } from "../permissions/path-judge.js";
import { examplesCheckKey, examplesCheckPassed, recordExamplesCheckPassed } from "../permissions/examples-check-record.js";
import { pruneOptionsFrom } from "../state/task-retention.js";
import { WorkspaceCheckpoints } from "../undo/workspace-checkpoints.js";
import { hostMatches } from "../permissions/egress-policy.js";
import type { Clock, TaskStore } from "../state/task-store.js";
import type { EventBus } from "../events/event-bus.js";
import type { ApprovalStore } from "../permissions/approval-store.js";
import type { LoginStore } from "../state/login-store.js";
import { codeApplyTool } from "../tools/builtin/code-apply.js";
import { fileListTool } from "../tools/builtin/file-list.js";
import { fileReadTool } from "../tools/builtin/file-read.js";
import { fileWriteTool } from "../tools/builtin/file-write.js";
import { createMemoryTools } from "../tools/builtin/memory-tools.js";
import { shellExecTool } from "../tools/builtin/shell-exec.js";
import type { AnyToolDefinition } from "../tools/tool-definition.js";
import { chooseShellSandbox, type BubblewrapOptions, type SandboxChoice, type ShellSandbox } from "../tools/shell-sandbox.js";
import { sandboxRegistryFolder } from "../tools/running-sandboxes.js";
import { ToolRegistry } from "../tools/tool-registry.js";
import { createLogger } from "./logger.js";
import { RuntimeLoop } from "./runtime-loop.js";
import type { ExecutorContext, MemorySearch, RecordedTurn, SessionHistory } from "./executor-context.js";
import { setTimeout as delay } from "node:timers/promises";
import { createExecutionDirectiveSchema, ExecutionDirectiveSchema } from "../contracts/index.js";
import { SecretVault } from "../permissions/secret-vault.js";
import type { TaskOutcome } from "./task-outcome.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

export interface CreateRuntimeOptions {
  /** Data directory. Defaults to DUCKLM_HOME, then ./data. */
  home?: string;
  /** Config directory. Defaults to DUCKLM_CONFIG, then ./config, then the bundled one. */
  configDir?: string;
  /** An already loaded config (tests); overrides `configDir`. */
  config?: DuckConfig;
  /** The model backend. Defaults to none: IntentParser mode. */
  models?: ModelProvider | null;
  /** Defaults to a pino logger writing `<home>/logs/ducklm.log`. */
  logger?: Logger;
  /** Where tools work. Defaults to runtime.json's `workspace`, resolved from the current directory. */
  workspace?: string;
  /**
   * Database file; `:memory:` for throwaway runs. Defaults to `<home>/ducklm.sqlite3`, unless
   * runtime.json's `storage.backend` is `postgres`; given, it is used whatever the backend says.
   */
  databaseFile?: string;
  /** Environment to read the PostgreSQL connection string from (`storage.postgres_url_env`). Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  /** Extra tools (tests, plugins). */
  tools?: AnyToolDefinition[];
  /** A registry to use instead of the built-in tools (replay). */
  registry?: ToolRegistry;
  /** Memory search to use instead of the store's (replay serves recorded hits). */
  memorySearch?: MemorySearch;
  /** Whether memory holds candidates for a task (see ExecutorContext). Defaults to a search of one hit. */
  recallCandidates?: (query: string, taskId: string) => Promise<boolean> | boolean;
  /** Conversation history to use instead of the store's (replay). */
  sessionHistory?: SessionHistory;
  /** Record the settings a task's decisions follow in its `task-started` (default); a replay of an older log does not. */
  recordSettings?: boolean;  /** The settings to record in `task-started` as they are (a replay records what its recording did). */  settingsAsRecorded?: Record<string, unknown>;
  /** Delay between retries; defaults to a real, cancellable wait (replay passes none). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * Check at start that permissions.json's examples classify as they say, so that a rule that does
   * not do what it claims stops the process before any task runs. Defaults to `true`.
   */
  checkPermissionExamples?: boolean;
  /** Holds writes of steps running side by side to their recorded order (replay). */
  recordedTurn?: RecordedTurn;
  /** What embeds memory for vector search. Defaults to the model provider's embeddings role, if any. */
  embedder?: MemoryEmbedder | null;
  clock?: Clock;
  /** How shell commands are started. Defaults to what runtime.json's `sandbox` chooses. */
  sandbox?: ShellSandbox;
  /** Whether a task waits in line instead of the `max_running_tasks` rule (replay follows its recording). */
  admission?: (taskId: string) => "run" | "queue";
  /** Released when the runtime closes, after the loop stops (MCP connections). */
  onClose?: Array<() => Promise<void>>;
}

export interface Runtime {
  home: string;
  config: DuckConfig;
  db: SqlDatabase;
  /** Which store holds this runtime's data, and where (a PostgreSQL location never carries its password). */
  storage: { backend: SqlDialect; location: string };
  bus: EventBus;
  store: TaskStore;
  memory: MemoryService;
  tools: ToolRegistry;
  loop: RuntimeLoop;
  logger: Logger;
  approvals: ApprovalStore;
  /** One-time login codes and browser sessions of the web chat. */
  logins: LoginStore;
  /** Which process drives which task. */
  leases: TaskLeases;
  classifier: CommandClassifier;
  sandbox: ShellSandbox;
  /** Why commands are not confined, when they are not (said at start, in doctor and /health). */
  sandboxWarning: string | null;
  /** DuckLM's own state (home, config, plugins): no task may read or write it. */
  protectedPaths: readonly string[];
  /** Where tasks work unless they name another folder. */
  workspace: string;
  /** What the executors work with (the DuckLM API runs its commands through it). */
  context: ExecutorContext;
  /**
   * The start-up work of a process that drives tasks, run explicitly: the permission examples and the
   * memory index (`ready`), retention of finished tasks, the memory cleanup schedule, and the tasks an
   * earlier process left unfinished — driven on with runtime.json `resume` `auto`, else only listed.
   */
  start(options?: StartOptions): Promise<StartReport>;
  /**
   * Tasks an earlier process left unfinished (received, queued or running): with runtime.json `resume` `auto`
   * they are driven on (each records `task-resumed`); otherwise only listed. Tasks waiting for the user
   * stay waiting. `mode` stands in for runtime.json's `resume`.
   */
  resumeUnfinished(mode?: "auto" | "ask" | "never"): ResumeReport;
  /** Settles when the shell parser is loaded; rejects when permissions.json's examples do not hold. */
  ready(): Promise<void>;
  /** Stops running tasks, releases models and closes the database. */
  close(): Promise<void>;
}

export interface ResumeReport {
  mode: "auto" | "ask" | "never";
  tasks: Array<{ taskId: string; done: Promise<TaskOutcome> | null }>;
  /** Unfinished tasks another live DuckLM process drives: left to it. */
  ownedElsewhere: string[];
}

export interface StartOptions {
  /**
   * Keep taking on unfinished tasks whose process stopped (its lease ran out, or its PID died on this
   * machine) while this one runs, with runtime.json `resume` `auto`: for long-running processes (the
   * server), not for a CLI run that ends with its own task.
   */
  adoptOrphans?: boolean;
  /** What to do with unfinished tasks for this start, in place of runtime.json `resume` (`ducklm run --no-resume`). */
  resume?: "auto" | "ask" | "never";
}

export interface StartReport {
  /** Finished tasks removed by retention, and where they were archived. */
  pruned: string[];
  archivedTo: string | null;
  resume: ResumeReport;
}

export const BUILTIN_TOOL_NAMES: ReadonlySet<string> = new Set(["file_read", "file_write", "file_list", "shell_exec", "code_apply", "memory_insert", "memory_search", "memory_list", "web_fetch", "web_search"]);

/** Where tool plugins are looked for: `plugins/` in the user's config folder, then `<home>/plugins`. */
export function pluginFolders(configDir: string, home: string): string[] {
  return [join(configDir, "plugins"), join(home, "plugins")];
}

/**
 * What tasks may never touch: DuckLM's home (database, token, logs, models), the user's config
 * folder, the bundled defaults under it, the plugin folders and the record of running confined
 * commands that every DuckLM process checks — each as given and through its links.
 */
export function protectedPathsFor(home: string, configDir: string): string[] {
  const paths = [home, configDir, BUNDLED_CONFIG_DIR, ...pluginFolders(configDir, home), sandboxRegistryFolder()].map((path) => resolve(path));
  return [...new Set([...paths, ...paths.map(realpathOfDeepestAncestor)])];
}

/** The folder DuckLM's package is in: a checkout, or `node_modules/ducklm` of a project. */
const PACKAGE_ROOT = dirname(BUNDLED_CONFIG_DIR);

/**
 * DuckLM's own program: what it runs (its build, its sources, which a checkout runs through tsx, its
 * packages and its entry point), the page its server sends and its bundled config. A task working in
 * a checkout, or in a project that has DuckLM in its node_modules, may read it and never change it:
 * the next start would run what the task wrote, unconfined.
 */
export function programPaths(): string[] {
  return programPathsOf(PACKAGE_ROOT);
}

/** `programPaths` of a package at `packageRoot`. */
export function programPathsOf(packageRoot: string): string[] {
  // tsconfig.json: tsx reads it when a checkout runs its sources (its `paths` could point an import
  // elsewhere); .npmrc: npm reads it for `npm start` and `npx ducklm` there (its node-options run code).
  const own = ["bin", "dist", "src", "node_modules", "package.json", "tsconfig.json", ".npmrc", "web", "config"].map((entry) => join(packageRoot, entry));
  // Installed in a project, DuckLM loads its dependencies (and is started through `.bin`) from the
  // project's node_modules: all of it is the program then, and the project's .npmrc, which
  // `npx ducklm` there reads.
  const segments = packageRoot.split(sep);
  const outermost = segments.indexOf("node_modules");
  if (outermost <= 0) return own;
  const project = segments.slice(0, outermost).join(sep) || sep;
  return [...own, join(project, "node_modules"), join(project, ".npmrc")];
}

/**
 * What the shell sandbox hides and what it only keeps from being changed: DuckLM's own folders are
 * hidden; its program, the bundled config among it, holds no secret and stays readable where it lies
 * inside the workspace, bound read-only there.
 */
export function sandboxPathsFor(home: string, configDir: string): { hiddenPaths: string[]; readOnlyPaths: string[] } {
  const bundled = new Set([BUNDLED_CONFIG_DIR, realpathOfDeepestAncestor(BUNDLED_CONFIG_DIR)]);
  const own = new Set([resolve(configDir), realpathOfDeepestAncestor(resolve(configDir))]);
  const program = programPaths();
  if ([...bundled].some((path) => own.has(path))) return { hiddenPaths: protectedPathsFor(home, configDir), readOnlyPaths: program.filter((path) => path !== BUNDLED_CONFIG_DIR) };
  return { hiddenPaths: protectedPathsFor(home, configDir).filter((path) => !bundled.has(path)), readOnlyPaths: program };
}

/**
 * How the shell sandbox is set up from runtime.json: what it hides (DuckLM's own folders, the
 * credentials listed), what of the home it shows, which variables pass, which workspace files the
 * user's tools run later. The PostgreSQL URL's variable never passes, whatever the list says.
 */
export function sandboxOptionsFor(config: DuckConfig, home: string): BubblewrapOptions {
  const sandbox = config.runtime.sandbox;
  const expand = (path: string) => path.replace(/^~(?=\/|$)/, homedir());
  const paths = sandboxPathsFor(home, config.dir);
  return {
    hiddenPaths: [...paths.hiddenPaths, ...sandbox.hide.map(expand)],
    readOnlyPaths: paths.readOnlyPaths,
    allowPrivateNetwork: sandbox.private_network,
    deniedHost: (host) => config.permissions.hosts.deny.some((pattern) => hostMatches(pattern, host)),
    homeVisible: sandbox.home_visible.map(expand),
    runLaterFiles: sandbox.run_later_files,
    environment: { pass: sandbox.environment, withhold: config.runtime.storage.backend === "postgres" ? [config.runtime.storage.postgres_url_env] : [] },
  };
}

function chooseSandboxFor(config: DuckConfig, home: string, alsoHidden: readonly string[], logger: Logger): SandboxChoice {
  const options = sandboxOptionsFor(config, home);
  return chooseShellSandbox(config.runtime.sandbox.mode, { ...options, hiddenPaths: [...options.hiddenPaths, ...alsoHidden], logger });
}

/** Where tools work: the explicit folder, else runtime.json's `workspace`, from the current directory. */
export function resolveWorkspace(config: DuckConfig, explicit?: string): string {
  return resolve(explicit ?? config.runtime.workspace);
}

/** The composition root: the one place that wires concrete parts together. */
export function createRuntime(options: CreateRuntimeOptions = {}): Runtime {
  const home = resolveHomeDir(options.home);
  const config = options.config ?? loadConfig(resolveConfigDir(options.configDir));
  ensurePrivateDir(home);
  const logger = options.logger ?? createLogger({ file: join(home, "logs", "ducklm.log") });
  const storeOptions = { logger, leaseTtlMs: config.runtime.task_leases.ttl_ms, ...(options.clock ? { clock: options.clock } : {}) };
  const postgresUrl = config.runtime.storage.backend === "postgres" && options.databaseFile === undefined ? postgresUrlOf(config, options.env ?? process.env) : null;
  const databaseFile = options.databaseFile ?? join(home, "ducklm.sqlite3");
  // On a full disk SQLite would die of SIGBUS at its first write to the memory-mapped WAL index: said instead.
  if (!postgresUrl && databaseFile !== ":memory:") assertRoomToStart(dirname(resolve(databaseFile)));
  const stores = postgresUrl
    ? openPostgresStores(postgresUrl, { ...storeOptions, applicationName: `ducklm ${process.pid}` })
    : openStores(databaseFile, { ...storeOptions, synchronous: config.runtime.storage.synchronous });
  const { database, bus, tasks: store, memories: memoryStore, approvals, logins, leases } = stores;
  // On a shared PostgreSQL database, events other processes commit reach the subscribers here too.
  const commitListener = postgresUrl
    ? listenForCommits(
        postgresUrl,
        leases.owner,
        {
          committed(taskId, from, to) {
            store.forgetIfChangedElsewhere(taskId);
            bus.committedElsewhere(taskId, from, to);
          },
          missed() {
            for (const taskId of bus.subscribedTasks()) {
              store.forgetIfChangedElsewhere(taskId);
              bus.committedElsewhere(taskId, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
            }
          },
        },
        logger,
      )
    : null;
  // On a SQLite home other processes may share, their commits reach the subscribers here by polling.
  const otherWriters =
    database.dialect === "sqlite" && options.databaseFile !== ":memory:"
      ? watchOtherWriters({
          dataVersion: () => sqliteOf(database.db).pragma("data_version", { simple: true }) as number,
          followed: () => bus.subscribedTasks(),
          committedElsewhere: (taskId) => {
            store.forgetIfChangedElsewhere(taskId);
            bus.committedElsewhere(taskId, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
          },
          logger,
        })
      : null;
  const db = database.db;
  const models = options.models ?? null;
  const embedder: MemoryEmbedder | null =
    options.embedder !== undefined
      ? options.embedder
      : isEmbeddingProvider(models) && models.embeddingModel
        ? { provider: models, model: models.embeddingModel, dimension: models.embeddingDimension ?? 0 }
        : null;
  const memory = new MemoryService(memoryStore, embedder, config.runtime.memory, logger, options.databaseFile === ":memory:" ? null : join(home, "memory.hnsw"), options.clock);
  const tools = options.registry ?? new ToolRegistry();
  if (!options.registry) {
    tools.register(fileReadTool).register(fileWriteTool).register(fileListTool).register(shellExecTool).register(codeApplyTool, { internal: true });
    for (const tool of createMemoryTools(memory)) tools.register(tool);
  }
  for (const tool of options.tools ?? []) tools.register(tool);
  const workspace = resolveWorkspace(config, options.workspace);
  // The user's config folder is made if it is missing: a folder that is not there cannot be hidden,
  // and a task could make it (with a runtime.json that turns confinement off) for the next start.
  if (!existsSync(config.dir)) {
    try {
      ensurePrivateDir(config.dir);
    } catch {
      // Where it cannot be made, no command of this user can make it either.
    }
  }
  const protectedPaths = protectedPathsFor(home, config.dir);
  const classifier = new CommandClassifier(config.permissions, { protectedPaths, realpath: realpathOfDeepestAncestor });
  const { sandbox, warning } = options.sandbox
    ? { sandbox: options.sandbox, warning: null }
    : chooseSandboxFor(config, home, postgresUrl ? postgresPrivatePaths(postgresUrl, options.env ?? process.env, serverSocketDirs(database.db)) : [], logger);
  if (warning) logger.warn(warning);
  const ready = (async () => {
    if (options.checkPermissionExamples !== false) {
      const key = examplesCheckKey(config.permissions);
      if (!examplesCheckPassed(home, key)) {
        await classifier.checkExamples(config.permissions.examples).catch((error: unknown) => {
          // Said with the files whose rules and examples were checked: the user's, over the bundled one.
          const own = config.sources?.["permissions.json"];
          if (!DuckError.isInstance(error) || error.code !== ErrorCode.ConfigInvalid || !own || own.startsWith(BUNDLED_CONFIG_DIR)) throw error;
          throw new DuckError(ErrorCode.ConfigInvalid, error.message.replace(/^permissions\.json examples/, `${own} (laid over the bundled permissions.json): the examples of both files`), { details: error.details, cause: error });
        });
        recordExamplesCheckPassed(home, key);
      }
    }
    await memory.open();
    // Tasks start once other processes' commits are heard, so that none a subscriber here waits for is missed.
    await commitListener?.listening;
  })();
  // A failure here is reported by `ready()`; tasks see it too, through the loop.
  ready.catch(() => undefined);
  const checkpoints = config.runtime.undo.enabled && options.databaseFile !== ":memory:" ? new WorkspaceCheckpoints(home, { maxFileBytes: config.runtime.undo.max_file_bytes, excluded: protectedPaths }) : null;
  if (checkpoints?.unavailable()) logger.warn(`steps cannot be undone: ${checkpoints.unavailable()}`);
  const directiveSchema = tools.names().length > 0 ? createExecutionDirectiveSchema(tools.names()) : ExecutionDirectiveSchema;
  const context: ExecutorContext = {
    store,
    tools,
    memory,
    models,
    classifier,
    approvals,
    secrets: new SecretVault(),
    sandbox,
    checkpoints,
    protectedPaths,
    readOnlyPaths: programPaths(),
    config,
    logger,
    memorySearch: options.memorySearch ?? ((query, limit) => memory.recall(query, limit)),
    recallCandidates: options.recallCandidates ?? (async (query, taskId) => query !== "" && (await (options.memorySearch ?? ((text: string, limit: number) => memory.recall(text, limit)))(query, 1, taskId)).length > 0),
    sessionHistory: options.sessionHistory ?? ((sessionId, beforeTaskId, limit) => store.sessionHistory(sessionId, beforeTaskId, limit).map((task) => ({ task_id: task.id, text: task.text, answer: task.answer }))),
    recordSettings: options.recordSettings ?? true,
    ...(options.settingsAsRecorded ? { settingsAsRecorded: options.settingsAsRecorded } : {}),
    strandedTools: new Map(),
    sleep: options.sleep ?? ((ms, signal) => (ms > 0 ? delay(ms, undefined, { signal }) : Promise.resolve())),
    directiveSchema,
    decisionSchema: decisionSchemaFor(directiveSchema),
    ...(options.recordedTurn ? { recordedTurn: options.recordedTurn } : {}),
  };
  let closed = false;
  let adoptOrphans = false;
  // Workers on one PostgreSQL database (servers, which adopt orphans) share their lines of waiting tasks.
  const sharedLine = {
    enabled: () => adoptOrphans && database.dialect === "postgres" && !closed,
    watch: (taskId: string, onEvent: () => void) => bus.subscribe(taskId, () => onEvent()),
  };
  // A task cut off by a full disk carries on as soon as the disk has room, not after a backoff.
  const roomToWrite = !postgresUrl && databaseFile !== ":memory:" ? () => (freeBytes(dirname(resolve(databaseFile))) ?? Number.POSITIVE_INFINITY) >= FREE_BYTES_TO_RETRY : undefined;
  const loop = new RuntimeLoop(context, { workspace, ready, leases, sharedLine, ...(roomToWrite ? { roomToWrite } : {}), ...(options.admission ? { admission: options.admission } : {}) });
  const adopt = () => {
    if (config.runtime.resume !== "auto") return;
    for (const taskId of leases.orphans()) {
      if (loop.isActive(taskId)) continue;
      try {
        loop.resume(taskId, "the process that drove it stopped").catch((error: unknown) => logger.warn({ err: error, task_id: taskId }, "could not carry on a task another process left"));
        logger.info({ task_id: taskId }, "carrying on a task another process left");
      } catch (error) {
        logger.warn({ err: error, task_id: taskId }, "could not carry on a task another process left");
      }
    }
  };
  // Leases are renewed well within their time to live; the same tick carries cancels asked for by
  // other processes to the tasks here, and (for a long-running process) takes on tasks whose owner is gone.
  const leaseTimer = setInterval(() => {
    try {
      for (const { taskId, reason } of leases.renew()) loop.cancel(taskId, reason);
      if (adoptOrphans) adopt();
      if (sharedLine.enabled()) {
        loop.takenElsewhere(leases.takenElsewhere());
        loop.claimShared();
      }
    } catch (error) {
      logger.warn({ err: error }, "could not renew task leases");
    }
  }, Math.min(2_000, Math.floor(config.runtime.task_leases.ttl_ms / 3)));
  leaseTimer.unref();
  return {
    home,
    config,
    db,
    storage: { backend: database.dialect, location: database.location },
    bus,
    store,
    memory,
    tools,
    loop,
    logger,
    approvals,
    logins,
    leases,
    classifier,
    sandbox,
    sandboxWarning: warning,
    protectedPaths,
    workspace,
    context,
    ready: () => ready,
    async start(startOptions = {}) {
      await ready;
      // Retention runs at every start, so storage stays bounded without anyone remembering to prune.
      const pruned = store.prune(pruneOptionsFrom(config.runtime.retention, home));
      if (pruned.pruned.length > 0) logger.info({ pruned: pruned.pruned.length, archive: pruned.archivedTo }, "finished tasks pruned");
      leases.forgetMissingTasks();
      // Old checkpoints go in the background: git's clean-up can take a while on a large workspace.
      if (checkpoints && !checkpoints.unavailable()) {
        checkpoints.prune(config.runtime.undo.keep_days).then(
          (dropped) => dropped > 0 && logger.info({ dropped }, "old workspace checkpoints pruned"),
          (error: unknown) => logger.warn({ err: error }, "old workspace checkpoints could not be pruned"),
        );
      }
      memory.scheduleCleanup();
      adoptOrphans = startOptions.adoptOrphans === true;
      return { pruned: pruned.pruned, archivedTo: pruned.archivedTo, resume: this.resumeUnfinished(startOptions.resume) };
    },
    resumeUnfinished(override?: "auto" | "ask" | "never") {
      const mode = override ?? config.runtime.resume;
      // Oldest first, so that tasks that waited in line before a restart keep their order.
      const unfinished = store.unfinishedTasks().filter((task) => !loop.isActive(task.id));
      // A task another live process drives is that process's: never resumed here.
      const ownedElsewhere = unfinished.filter((task) => leases.otherHolder(task.id) !== null).map((task) => task.id);
      const left: typeof unfinished = [];
      const tasks: Array<{ taskId: string; done: Promise<TaskOutcome> | null }> = [];
      for (const task of unfinished.filter((candidate) => !ownedElsewhere.includes(candidate.id))) {
        try {
          tasks.push({ taskId: task.id, done: mode === "auto" ? loop.resume(task.id, "an earlier process stopped while it ran") : null });
          left.push(task);
        } catch (error) {
          // Another worker took the task between the look above and the lease: it is that worker's.
          if (!(DuckError.isInstance(error) && error.code === ErrorCode.TaskOwnedElsewhere)) throw error;
          ownedElsewhere.push(task.id);
        }
      }
      if (unfinished.length > 0) logger.info({ mode, tasks: left.map((task) => task.id), owned_elsewhere: ownedElsewhere }, "unfinished tasks found at start-up");
      return { mode, tasks, ownedElsewhere };
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(leaseTimer);
      otherWriters?.close();
      await loop.close();
      // A snapshot still being taken (one read ahead, a pruning) ends before its home may be removed.
      await checkpoints?.settled();
      for (const release of options.onClose ?? []) await release().catch((error: unknown) => logger.warn({ err: error }, "could not release an integration"));
      memory.close();
      await sandbox.dispose();
      await models?.dispose();
      await commitListener?.close();
      database.close();
    },
  };
}
