import { z } from "zod";
import { PLAN_STEPS_CEILING } from "../contracts/directive.js";
import { DEFAULT_RUN_LATER_FILES, isRunLaterPath } from "../tools/run-later-files.js";
import { isFetchBlockedPort } from "../utils/fetch-blocked-ports.js";

/** Most steps of one plan unless runtime.json says otherwise. */
export const DEFAULT_MAX_PLAN_STEPS = 50;

const PositiveMs = z.number().int().positive();

export const ModelRoleNames = ["thinker", "json_compiler", "critic", "coder", "sys_util", "orchestrator", "embeddings"] as const;

export const ModelServerConfigSchema = z.strictObject({
  /** The server's OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:11434/v1 (Ollama). */
  base_url: z.url({ protocol: /^https?$/ }).refine((url) => !new URL(url).username && !new URL(url).password, {
    message: "a user name or password in base_url would be shown and logged: put the key in api_key_env, or a header",
  }).refine((url) => !isFetchBlockedPort(new URL(url)), {
    message: "that port is one web clients refuse to connect to (the Fetch standard's blocked ports): serve the model on another port, such as 8080",
  }),
  /** The model name the server knows. */
  model: z.string().min(1),
  /** Environment variable holding the API key, sent as a Bearer token; none: no key. */
  api_key_env: z.string().optional(),
  /**
   * How JSON is asked for: `json_schema` (response_format with the schema; llama.cpp, vLLM, Ollama,
   * LM Studio, OpenAI), `json_object`, `prompt` (schema in the prompt only), or `tools`: a decision
   * sends the task's tools as native tool definitions and takes the model's own tool calls as the
   * directive (llama.cpp's server with `--jinja`, vLLM with tool parsing, Ollama, hosted APIs); other
   * JSON as `json_schema`. Defaults to `json_schema`.
   */
  structured_output: z.enum(["json_schema", "json_object", "prompt", "tools"]).default("json_schema"),
  /** Extra headers (proxies, organisation ids); `${NAME}` takes NAME from the environment. */
  headers: z.record(z.string(), z.string()).default({}),
});
export type ModelServerConfig = z.infer<typeof ModelServerConfigSchema>;

const ModelRoleFields = z.strictObject({
  /** GGUF file, relative to the data directory's `models/` folder or absolute. */
  file: z.string().min(1).optional(),
  /** An OpenAI-compatible server instead of a local file. */
  server: ModelServerConfigSchema.optional(),
  /** llama.cpp backend. Defaults to `auto`. */
  backend: z.enum(["auto", "cpu", "cuda", "vulkan", "metal"]).default("auto"),
  /** Layers offloaded to the GPU: a count, `auto` or `max`. Defaults to `auto`. */
  gpu_layers: z.union([z.number().int().nonnegative(), z.enum(["auto", "max"])], { error: 'a number of layers (0 or more), "auto" or "max"' }).default("auto"),
  /** Context size in tokens. Defaults to 4096. */
  context_size: z.number().int().positive().default(4096),
  /** Most tokens one call may generate. Defaults to 1024. */
  max_tokens: z.number().int().positive().default(1024),
  /** Sampling temperature. Defaults to 0.2. */
  temperature: z.number().min(0).max(2).default(0.2),
  /** CPU threads; defaults to the models file's `threads`, then `os.availableParallelism()`. */
  threads: z.number().int().positive().optional(),
  /** Embeddings only: the vector dimension the memory index expects. */
  dimension: z.number().int().positive().optional(),
});

export const ModelRoleConfigSchema = ModelRoleFields.refine((role) => (role.file === undefined) !== (role.server === undefined), {
  message: "give either file (a local GGUF model) or server (an OpenAI-compatible server), not both",
});
export type ModelRoleConfig = z.infer<typeof ModelRoleConfigSchema>;

export const ModelsConfigSchema = z.strictObject({
  /** Memory the loaded models may take together, in MiB. Defaults to a safe share of free memory. */
  memory_budget_mb: z.number().positive().nullable().default(null),
  /** Default CPU threads for every model. Defaults to `os.availableParallelism()`. */
  threads: z.number().int().positive().nullable().default(null),
  roles: z.partialRecord(z.enum(ModelRoleNames), ModelRoleConfigSchema).default({}),
});
export type ModelsConfig = z.infer<typeof ModelsConfigSchema>;

export const RuntimeConfigSchema = z.strictObject({
  timeouts: z.strictObject({
    /** One step (a tool run, a coder call). Defaults to 30 s. */
    step_ms: PositiveMs.default(30_000),
    /** A whole task. Defaults to 5 min. */
    task_ms: PositiveMs.default(300_000),
    /** One model call. Defaults to 2 min. */
    model_call_ms: PositiveMs.default(120_000),
  }).prefault({}),
  retry: z.strictObject({
    /** Retries of one step after its first attempt. Defaults to 2. */
    max_step_retries: z.number().int().nonnegative().default(2),
    /** Delay before the first retry. Defaults to 250 ms. */
    backoff_ms: z.number().int().nonnegative().default(250),
    /** Each further retry waits this many times longer. Defaults to 2. */
    backoff_factor: z.number().min(1).default(2),
    /** Upper bound of one delay. Defaults to 5 s. */
    max_backoff_ms: z.number().int().nonnegative().default(5_000),
  }).prefault({}),
  recovery: z.strictObject({
    /** What a task does when a step has failed for good. Defaults to `fail`. */
    on_exhausted: z.enum(["fail", "respond", "continue"]).default("fail"),
    /** A critic safety score below this fails the step at once. Defaults to 0.5. */
    min_safety: z.number().min(0).max(1).default(0.5),
  }).prefault({}),
  /** The agent loop: after a directive's steps, the model sees what happened and decides again. */
  agent: z.strictObject({
    /** Decisions one task may take (the first included) before it fails. Defaults to 6. */
    max_iterations: z.number().int().positive().max(100).default(6),
    /** Prompt and generated tokens one task may use over all its model calls. Defaults to 60 000. */
    token_budget: z.number().int().positive().default(60_000),
    /** Times a directive that is cut off or does not validate is asked for again, with the error. Defaults to 2. */
    directive_retries: z.number().int().nonnegative().max(5).default(2),
    /** Most tokens the Thinker's thought takes when another model writes the directive. Defaults to 256. */
    thought_max_tokens: z.number().int().positive().max(8192).default(256),
    /**
     * Where one model plays the Thinker and the JSON compiler, one call writes the thought and the
     * directive together (`auto`), or two calls write them (`never`). Defaults to `auto`.
     */
    fold_decision: z.enum(["auto", "never"]).default("auto"),
    /**
     * Where the critic runs on the model that decides (and decisions are folded), a step whose tool
     * succeeded passes on the tool's word and the next decision gives the critic's verdict on it, in
     * the same call (`auto`); or every such step gets a critic call of its own (`never`). A step of
     * the last decision the loop allows always gets its own call. Defaults to `auto`.
     */
    fold_critic: z.enum(["auto", "never"]).default("auto"),
    /**
     * Whether the critic model judges a step whose tool failed. A failure speaks for itself: by
     * default it is judged without a model call. Defaults to false.
     */
    judge_failed_steps: z.boolean().default(false),
  }).prefault({}),
  scheduler: z.strictObject({
    /** Independent ready steps run at the same time, up to this many. Defaults to 4. */
    max_parallel_steps: z.number().int().positive().max(64).default(4),
    /**
     * Tasks driven at the same time by one process; more wait in line, first come first served.
     * Null: as many as the machine has cores, at least 2. Defaults to null.
     */
    max_running_tasks: z.number().int().positive().max(1024).nullable().default(null),
    /** Tasks waiting in line at most; a task submitted beyond it is refused (HTTP 429). Defaults to 100. */
    max_queued_tasks: z.number().int().nonnegative().max(100_000).default(100),
    /** Most steps one plan may have; a longer one is sent back to the model to shorten. Defaults to 50. */
    max_plan_steps: z.number().int().positive().max(PLAN_STEPS_CEILING).default(DEFAULT_MAX_PLAN_STEPS),
  }).prefault({}),
  /** Token budgets of the context sections. */
  context_budgets: z.strictObject({
    system: z.number().int().positive().default(1024),
    memory: z.number().int().positive().default(1024),
    tools: z.number().int().positive().default(1536),
    history: z.number().int().positive().default(2048),
    task: z.number().int().positive().default(2048),
    /** What the earlier steps of this task returned, shown to the model when it decides again. */
    observations: z.number().int().positive().default(3072),
  }).prefault({}),
  /** Memory hits put into the context. Defaults to 5. */
  retrieval_top_k: z.number().int().positive().max(100).default(5),
  tools: z.strictObject({
    /** Bytes of shell output kept per stream; the rest is cut and the cut is said. Defaults to 64 KiB. */
    output_cap_bytes: z.number().int().positive().default(65_536),
    /** Largest file `file_read` returns. Defaults to 1 MiB. */
    file_read_max_bytes: z.number().int().positive().default(1_048_576),
  }).prefault({}),
  storage: z.strictObject({
    /**
     * Where tasks, events, memory and approvals are kept: `sqlite` (one file in the home, the default)
     * or `postgres` (a PostgreSQL database that several DuckLM processes, on any machines, share).
     */
    backend: z.enum(["sqlite", "postgres"]).default("sqlite"),
    /**
     * With `backend: "postgres"`: the environment variable holding the connection string
     * (postgresql://user:password@host:port/database). A variable, not the string, so that no password
     * is written into runtime.json. Defaults to DUCKLM_POSTGRES_URL.
     */
    postgres_url_env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name").default("DUCKLM_POSTGRES_URL"),
    /** SQLite `synchronous`: NORMAL survives a process crash, FULL also a power loss. Defaults to NORMAL. */
    synchronous: z.enum(["NORMAL", "FULL"]).default("NORMAL"),
    /**
     * Streamed model text is recorded as one `model-output-delta` per this many milliseconds rather
     * than one per chunk the model sends (a token, for a local model); 0 records every chunk. An
     * output that ends within the first interval is recorded only by its `model-output-completed`.
     * Defaults to 50.
     */
    stream_gather_ms: z.number().int().min(0).max(10_000).default(50),
  }).prefault({}),
  memory: z.strictObject({
    /** Distance of the vector index: `cosine` or `l2`. Defaults to `cosine`. */
    vector_space: z.enum(["cosine", "l2"]).default("cosine"),
    /** Search breadth of the vector index (higher: better recall, slower). Defaults to 64. */
    ef_search: z.number().int().positive().default(64),
    /** A new entry at least this similar (cosine) to an existing one reinforces it instead. Defaults to 0.92. */
    near_duplicate_similarity: z.number().min(0).max(1).default(0.92),
    /** Weights halve after this many days without use. Defaults to 30. */
    half_life_days: z.number().positive().default(30),
    /** Entries below this weight and older than `min_age_days` are removed by cleanup. Defaults to 0.2. */
    min_weight: z.number().nonnegative().default(0.2),
    min_age_days: z.number().nonnegative().default(7),
    /** Most entries kept (pinned ones are never removed). Defaults to 10000. */
    max_entries: z.number().int().positive().default(10_000),
    /** Most bytes of text kept. Defaults to 50 MB. */
    max_bytes: z.number().int().positive().default(50_000_000),
    /** Cleanup runs at start and then every this many hours. Defaults to 6. */
    cleanup_interval_hours: z.number().positive().default(6),
  }).prefault({}),
  /**
   * How long a process's hold on a task it drives lasts without renewal (it renews several times
   * within it). Another process takes over a task only when its holder's lease has run out or the
   * holder's PID is dead on this machine. Defaults to 30 s.
   */
  task_leases: z.strictObject({
    ttl_ms: z.number().int().min(1_000).default(30_000),
  }).prefault({}),
  /** What happens at start-up to tasks an earlier process left unfinished: `auto` resumes them, `ask` lists them, `never` leaves them. Defaults to `auto`. */
  resume: z.enum(["auto", "ask", "never"]).default("auto"),
  /** Finished tasks (completed, failed, cancelled) are pruned after this many days, with their events and checkpoints; memory stays. Null keeps them. Defaults to 90. */
  retention: z.strictObject({
    finished_task_days: z.number().positive().nullable().default(90),
    /** Keep at most this many finished tasks (the newest). Null: no limit. Defaults to 10000. */
    max_finished_tasks: z.number().int().positive().nullable().default(10_000),
    /** `delete`, or `archive`: write each task's events to <home>/archive/<id>.jsonl first. Defaults to `archive`. */
    action: z.enum(["delete", "archive"]).default("archive"),
  }).prefault({}),
  /**
   * Before each step that can change the workspace (a command, a file write, a coder step), DuckLM
   * keeps a snapshot of it in a repository of its own (`<home>/checkpoints`), so that `ducklm undo`
   * can put it back. Files over `max_file_bytes` and those `.gitignore` names are not kept; checkpoints
   * older than `keep_days` are pruned at start-up.
   */
  undo: z.strictObject({
    enabled: z.boolean().default(true),
    max_file_bytes: z.number().int().positive().default(10 * 1024 * 1024),
    keep_days: z.number().positive().default(14),
  }).prefault({}),
  sandbox: z.strictObject({
    /** `auto`: confine shell commands with bubblewrap when it works here; `bwrap`: insist; `off`: never. Defaults to `auto`. */
    mode: z.enum(["auto", "bwrap", "off"]).default("auto"),
    /**
     * Whether confined commands may use the network without asking. Defaults to false: a command that
     * needs the network is asked for as a permission of its own, and even then cannot reach DuckLM's API.
     */
    network: z.boolean().default(false),
    /** Commands given the network may reach private (LAN) addresses; loopback and this machine's own addresses never. Defaults to false. */
    private_network: z.boolean().default(false),
    /**
     * Folders and files hidden from every confined command besides DuckLM's own (`~` is your home):
     * keys, agents' sockets and cloud credentials by default.
     */
    hide: z.array(z.string().min(1)).default(["~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker", "~/.netrc", "~/.git-credentials", "~/.password-store", "~/.local/share/keyrings", "~/.npmrc", "~/.yarnrc", "~/.pypirc", "~/.cargo/credentials", "~/.cargo/credentials.toml", "~/.gem/credentials", "~/.config/gh", "~/.config/hub", "~/.config/glab-cli", "~/.claude", "~/.claude.json", "~/.codex", "~/.config/openai", "~/.huggingface", "~/.cache/huggingface/token", "~/.terraform.d/credentials.tfrc.json", "~/.vault-token", "~/.config/rclone", "~/.s3cfg", "~/.boto", "~/.mozilla", "~/.config/google-chrome", "~/.config/chromium", "~/.config/BraveSoftware", "~/.pgpass", "~/.my.cnf", "~/.bash_history", "~/.zsh_history", "~/.python_history", "~/.psql_history", "~/.mysql_history", "~/.node_repl_history"]),
    /**
     * Folders of your home that commands may read (toolchains and their caches), read-only: the rest
     * of every home is an empty folder to them. `~` is your home.
     */
    home_visible: z.array(z.string().min(1)).default(["~/.cargo", "~/.rustup", "~/.nvm", "~/.volta", "~/.fnm", "~/.local/share/fnm", "~/.local/bin", "~/.local/lib", "~/.pyenv", "~/.rbenv", "~/.bun", "~/.deno", "~/.sdkman", "~/go", "~/.npm", "~/.m2/repository", "~/.gradle/caches", "~/.gradle/wrapper", "~/.dotnet", "~/.ghcup"]),
    /**
     * Variables of DuckLM's environment that commands get besides the defaults (PATH, HOME, USER,
     * LANG, LC_*, TERM, TZ, TMPDIR, toolchain locations, certificate bundles): exact names, or a
     * prefix ending in `*`. Nothing else reaches a command; `ducklm doctor` lists what passes.
     */
    environment: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*\*?$/, "a variable name, or a prefix ending in *")).default([]),
    /**
     * Entries of the workspace that your own tools run later (a trailing `/` for a folder): commands
     * may read them but not write or create them; a file tool's write to one is asked first.
     */
    run_later_files: z.array(z.string().refine(isRunLaterPath, "a path inside the workspace (no .. part), with a trailing / for a folder")).default([...DEFAULT_RUN_LATER_FILES]),
  }).prefault({}),
  /** Directory the tools work in, relative to where DuckLM starts. Defaults to `.`. */
  workspace: z.string().min(1).default("."),
});
export type RuntimeConfig = z.infer<typeof RuntimeConfigSchema>;

const RuleList = z.array(z.string().min(1)).default([]);

const OperandKind = z.string().regex(/^(paths?|text|numbers?|none)(\.\.\.)?$/, "an operand kind: path, text, number or none (\"...\" repeats the last)");

/** A command shape that runs without asking: every word of a matching command is accounted for. */
export const SafeShapeSchema = z.strictObject({
  /** The program's file name (`ls`, `git`). */
  program: z.string().min(1),
  /** The one subcommand this shape covers (`status` of git). */
  subcommand: z.string().min(1).optional(),
  /**
   * The options it may have: `-l`, `--all`; with a value: `-n <n>`, `--lines=<n>`, `-o <path>`, `--format=<text>`;
   * `-<n>` for a number written as an option (`head -5`). Nothing else is allowed.
   */
  options: z.array(z.string().min(2)).default([]),
  /** What its operands are: `paths` (inside the workspace), `text`, `numbers`, `none`, or a list by position (`["text", "paths..."]`). Defaults to `paths`. */
  operands: z.union([OperandKind, z.array(OperandKind).min(1)]).default("paths"),
  max_operands: z.number().int().nonnegative().optional(),
  /** Globs that could expand to an option (`*`) are fine: none of the program's options can run or write anything. Defaults to false. */
  globs: z.boolean().default(false),
  /** Operands may be only known at run time (`echo "$(date)"`). Defaults to false. */
  dynamic: z.boolean().default(false),
  /** Options are whole words after one dash (`find -name`). Defaults to false. */
  word_options: z.boolean().default(false),
  /**
   * Running it twice does no more than running it once (it writes and appends nothing, with any of
   * its options): after a crash cut it off, it is run again without asking. Defaults to false.
   */
  rerun_safe: z.boolean().default(false),
  /** Commands this shape must allow, checked at start-up. */
  examples: z.array(z.string().min(1)).default([]),
  /** Commands this shape must not allow, checked at start-up. */
  not_examples: z.array(z.string().min(1)).default([]),
});
export type SafeShapeConfig = z.infer<typeof SafeShapeSchema>;

const CheckedCategory = z.enum(["normal", "unknown", "no_always", "hard_stop"]);

/** A host in permissions.json's host lists: a name (or an address), or `*.` and a domain for its subdomains. */
const HOST_PATTERN = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$|^\[[0-9a-f:.]+\]$/i;

export const PermissionsConfigSchema = z.strictObject({
  /**
   * Whether this file adds to the bundled rules (the default) or stands alone. Alone, the bundled
   * hard stops and always-asked commands are not in force unless the file repeats them.
   */
  extends_bundled: z.boolean().default(true),
  categories: z.strictObject({
    /**
     * Never run, never approvable, in addition to what DuckLM judges destructive by meaning (`rm -r /`,
     * writes to disks, mkfs, poweroff…). A rule matches when the program is the same and its words appear.
     */
    hard_stop: RuleList,
    /** Always asked; an approval is never remembered. Matched like hard_stop rules. */
    no_always: RuleList,
    /** Run without asking: shapes, or plain strings for one exact command (`node --version`). */
    normal: z.array(z.union([z.string().min(1), SafeShapeSchema])).default([]),
  }).prefault({}),
  /** Programs (or `program subcommand`) that use the network: asked as a network permission of their own. */
  network: RuleList,
  /**
   * What a command that matches no rule gets where it cannot be confined, or where `confined` is
   * `ask`. Defaults to `ask`.
   */
  unknown: z.enum(["ask", "deny"]).default("ask"),
  /**
   * What a command that matches no rule gets when it runs in the sandbox: `run` (the default) lets the
   * sandbox be the boundary, and only escalations (the network, sudo, files your own tools run later)
   * and the rules above are asked; `ask` asks as `unknown` says.
   */
  confined: z.enum(["run", "ask"]).default("run"),
  /**
   * Where requests of web_fetch, web_search and MCP servers over HTTP may go: `deny` never (also for
   * commands given the network, at their proxy), `allow` without a question even after the task has
   * read data of this machine. A host in neither is asked once a task has read such data, and "always"
   * adds it for every task. `example.com` is that host; `*.example.com` its subdomains.
   */
  hosts: z.strictObject({
    allow: z.array(z.string().regex(HOST_PATTERN, "a host name, or *. and a domain")).default([]),
    deny: z.array(z.string().regex(HOST_PATTERN, "a host name, or *. and a domain")).default([]),
  }).prefault({}),
  /** Commands with the category they must get; checked at start-up, so a rule change cannot silently break them. */
  examples: z.array(z.strictObject({ command: z.string().min(1), category: CheckedCategory })).default([]),
});
export type PermissionsConfig = z.infer<typeof PermissionsConfigSchema>;

const Category = z.enum(["read_only", "normal", "unknown", "no_always", "hard_stop"]);

export const McpServerConfigSchema = z
  .strictObject({
    /** A stdio server: the program to start (its environment holds only PATH, HOME and the like, plus `env`). */
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    /** Variables for a stdio server; `${NAME}` takes NAME from DuckLM's environment, so keys stay out of files. */
    env: z.record(z.string(), z.string()).default({}),
    /** Working directory of a stdio server. Defaults to DuckLM's home (never the workspace, where a task could plant a program it would start). */
    cwd: z.string().optional(),
    /** A streamable HTTP server: its endpoint URL. */
    url: z.url({ protocol: /^https?$/ }).optional(),
    /** Headers for an HTTP server, with the same `${NAME}` substitution. */
    headers: z.record(z.string(), z.string()).default({}),
    /** How calls to this server's tools are treated by the PermissionService. Defaults to `unknown` (asked). */
    permission: Category.default("unknown"),
    /** Per-tool categories, by the server's tool name, overriding `permission`. */
    tools: z.record(z.string(), Category).default({}),
    /** Tools of this server to leave out (by the server's tool name). */
    exclude: z.array(z.string()).default([]),
    enabled: z.boolean().default(true),
    /** One tool call. Defaults to the step time limit. */
    call_timeout_ms: PositiveMs.optional(),
  })
  .refine((server) => (server.command === undefined) !== (server.url === undefined), { message: "give either command (stdio) or url (streamable HTTP), not both" });
export type McpServerConfig = z.infer<typeof McpServerConfigSchema>;

export const IntegrationsConfigSchema = z.strictObject({
  mcp: z.strictObject({
    /** Servers by name; a server's tools are registered as `mcp__<name>__<tool>`. */
    servers: z.record(z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, "server names are 1-32 letters, digits, _ or -"), McpServerConfigSchema).default({}),
    /** How long connecting to one server may take at start-up. Defaults to 15 s. */
    connect_timeout_ms: PositiveMs.default(15_000),
  }).prefault({}),
  web: z.strictObject({
    fetch: z.strictObject({
      enabled: z.boolean().default(true),
      /** Most bytes read from a response. Defaults to 2 MB. */
      max_bytes: z.number().int().positive().default(2_000_000),
      /** Most characters of text returned. Defaults to 40000. */
      max_chars: z.number().int().positive().default(40_000),
      timeout_ms: PositiveMs.default(15_000),
      max_redirects: z.number().int().nonnegative().max(20).default(5),
      /** Loopback, private, link-local and other non-public addresses are refused unless this is true. */
      allow_private_network: z.boolean().default(false),
      user_agent: z.string().default("DuckLM/0.1 (+local agent)"),
      /** How the PermissionService treats fetches; `unknown` asks before each new tool approval. Defaults to `read_only` (runs). */
      permission: Category.default("read_only"),
    }).prefault({}),
    search: z.strictObject({
      /** `searxng`: a SearXNG instance at `url` (its JSON format must be enabled); `none`: no web_search tool. */
      provider: z.enum(["none", "searxng"]).default("none"),
      /** The instance; it is the user's own choice, so one on this machine or the LAN is allowed. */
      url: z.url({ protocol: /^https?$/ }).optional(),
      max_results: z.number().int().positive().max(50).default(5),
      timeout_ms: PositiveMs.default(15_000),
    }).prefault({}),
  }).prefault({}),
  telegram: z.strictObject({
    /** Environment variable holding the bot token (never written to a file by DuckLM). */
    token_env: z.string().default("DUCKLM_TELEGRAM_TOKEN"),
    /** Telegram user ids allowed to use the bot; everyone else is refused. */
    allowed_user_ids: z.array(z.number().int()).default([]),
    /** Bot API root, for a self-hosted Bot API server. Defaults to Telegram's. */
    api_root: z.url().optional(),
  }).prefault({}),
});
export type IntegrationsConfig = z.infer<typeof IntegrationsConfigSchema>;

export const PROMPT_NAMES = ["thinker", "json_compiler", "coder", "critic", "sys_util", "orchestrator", "planning", "system"] as const;
export type PromptName = (typeof PROMPT_NAMES)[number];
export type Prompts = Record<PromptName, string>;

export interface DuckConfig {
  /** The user's config folder (which may not exist yet: everything then comes from the bundled defaults). */
  dir: string;
  /** Which file each setting came from, by name (`runtime.json`, `prompts/system.md`). */
  sources?: Record<string, string>;
  models: ModelsConfig;
  runtime: RuntimeConfig;
  permissions: PermissionsConfig;
  integrations: IntegrationsConfig;
  prompts: Prompts;
}
