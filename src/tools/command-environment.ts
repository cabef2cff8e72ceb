/**
 * What a command's environment holds: DuckLM's own variables by allow-list, never by deny-list. A
 * credential can be called anything (`GITHUB_PAT`, `MYSQL_PWD`, `SENTRY_DSN`), so only variables
 * that say where things are and how to show text pass, plus those the user names in runtime.json
 * (`sandbox.environment`).
 */

/** Passed to every command: a `*` at the end matches any rest of the name. */
export const DEFAULT_PASSED_VARIABLES = [
  "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "NO_COLOR", "TZ", "TMPDIR",
  // The locale's parts by name: a prefix would pass any variable that starts with LC_.
  "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY", "LC_NUMERIC", "LC_TIME", "LC_ADDRESS", "LC_IDENTIFICATION",
  "LC_MEASUREMENT", "LC_NAME", "LC_PAPER", "LC_TELEPHONE",
  // Where toolchains live, which programs on PATH read to find themselves.
  "PYENV_ROOT", "CARGO_HOME", "RUSTUP_HOME", "GOPATH", "GOROOT", "GOBIN", "JAVA_HOME", "NVM_DIR", "NVM_BIN", "VOLTA_HOME", "BUN_INSTALL",
  "DENO_INSTALL", "SDKMAN_DIR", "PNPM_HOME", "VIRTUAL_ENV", "CONDA_PREFIX",
  // Certificate bundles (paths, not keys): behind a company's TLS proxy nothing connects without them.
  "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
] as const;

// What changes how the shell itself or a program behaves before the command's own words count:
// startup files, exported functions, where `cd` looks, preloaded libraries, interpreter options.
// The command was judged as it reads without them, so they never pass, even when named.
const BEHAVIOUR_VARIABLES = /^(BASH_ENV|ENV|CDPATH|OLDPWD|GLOBIGNORE|SHELLOPTS|BASHOPTS|IFS|PS4|PROMPT_COMMAND|INPUTRC|HISTFILE|LD_PRELOAD|LD_AUDIT|LD_LIBRARY_PATH|NODE_OPTIONS|PYTHONSTARTUP|PYTHONINSPECT|PERL5OPT|PERL5LIB|RUBYOPT|LESSOPEN|LESSCLOSE|GIT_.*|BASH_FUNC_.*|DUCKLM_.*)$/;

// git finds a bare repository in any folder that looks like one (HEAD, objects/, refs/) and obeys its
// config, which a command can write on the way; only repositories named outright are used. The
// setting counts only from protected configuration, which the command line's (these variables) is.
const GIT_PROTECTIONS = { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "safe.bareRepository", GIT_CONFIG_VALUE_0: "explicit" };

export interface EnvironmentPolicy {
  /** Names (or `PREFIX_*`) the user adds to the defaults. */
  pass?: readonly string[];
  /** Names that never pass, whatever the lists say: DuckLM's own credentials (the PostgreSQL URL's variable). */
  withhold?: readonly string[];
}

function matcher(patterns: readonly string[]): (name: string) => boolean {
  const exact = new Set(patterns.filter((pattern) => !pattern.endsWith("*")));
  const prefixes = patterns.filter((pattern) => pattern.endsWith("*")).map((pattern) => pattern.slice(0, -1));
  return (name) => exact.has(name) || prefixes.some((prefix) => name.startsWith(prefix));
}

/** Which of `env`'s variables a command gets, and which it does not (by name). */
export function sortEnvironment(env: NodeJS.ProcessEnv, policy: EnvironmentPolicy = {}): { passed: string[]; withheld: string[] } {
  const passes = matcher([...DEFAULT_PASSED_VARIABLES, ...(policy.pass ?? [])]);
  const withheld = new Set(policy.withhold ?? []);
  const passed: string[] = [];
  const kept: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (env[name] === undefined) continue;
    if (passes(name) && !withheld.has(name) && !BEHAVIOUR_VARIABLES.test(name)) passed.push(name);
    else kept.push(name);
  }
  return { passed, withheld: kept };
}

/** The environment a command gets: the variables that pass, and git's protections. */
export function commandEnvironment(env: NodeJS.ProcessEnv, policy: EnvironmentPolicy = {}): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const name of sortEnvironment(env, policy).passed) clean[name] = env[name];
  return { ...clean, ...GIT_PROTECTIONS };
}
