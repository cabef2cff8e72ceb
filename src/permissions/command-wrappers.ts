import type { ShellWord } from "./shell-words.js";

/** How a wrapper program reads its own words before the command it runs. */
interface WrapperSpec {
  /** Options that take a value (the next word, or `--opt=value`, or `-ovalue`). */
  withValue?: readonly string[];
  /** Words before the wrapped command that are not options (timeout's duration, chroot's directory). */
  positionals?: number;
  /** `VAR=value` words may come before the command (env, sudo). */
  assignments?: boolean;
  /** Options whose value is a whole command line handed to a shell (`env -S`, `su -c`, `flock -c`). */
  scriptOptions?: readonly string[];
  /** All remaining words are joined into one command line for a shell (watch, `su -c`-less forms). */
  joinsRest?: boolean;
  /** Adds words read from its input to the command (xargs, parallel). */
  appendsInput?: boolean;
  /** Options after which the wrapper runs no command at all (`command -v`, `sudo -l`). */
  queries?: readonly string[];
}

const WRAPPERS: Record<string, WrapperSpec> = {
  sudo: {
    withValue: ["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group", "--host", "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user", "--command-timeout", "--chroot"],
    assignments: true,
    queries: ["-l", "--list", "-v", "--validate", "-k", "-K", "--reset-timestamp", "--remove-timestamp", "-V", "--version", "-e", "--edit"],
  },
  doas: { withValue: ["-u", "-C"] },
  env: { withValue: ["-u", "--unset", "-C", "--chdir", "-a", "--argv0"], assignments: true, scriptOptions: ["-S", "--split-string"] },
  timeout: { withValue: ["-s", "--signal", "-k", "--kill-after"], positionals: 1 },
  nice: { withValue: ["-n", "--adjustment"] },
  ionice: { withValue: ["-c", "-n", "-p", "-P", "-u", "--class", "--classdata", "--pid", "--pgid", "--uid"] },
  chrt: { positionals: 1 },
  taskset: { positionals: 1 },
  nohup: {},
  setsid: {},
  time: { withValue: ["-f", "-o", "--format", "--output"] },
  command: { queries: ["-v", "-V"] },
  builtin: {},
  exec: { withValue: ["-a"] },
  stdbuf: { withValue: ["-i", "-o", "-e", "--input", "--output", "--error"] },
  xargs: {
    withValue: ["-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args", "--max-procs", "--replace", "--max-lines", "--eof", "--max-chars", "--process-slot-var"],
    appendsInput: true,
  },
  parallel: { withValue: ["-j", "--jobs", "-S", "--sshlogin", "--joblog", "-a", "--arg-file", "-d", "--delimiter", "-I"], appendsInput: true },
  chroot: { withValue: ["--userspec", "--groups"], positionals: 1 },
  watch: { withValue: ["-n", "--interval", "-d", "--differences", "-q", "--equexit"], joinsRest: true },
  flock: { withValue: ["-w", "--timeout", "-E", "--conflict-exit-code"], positionals: 1, scriptOptions: ["-c", "--command"] },
  strace: { withValue: ["-e", "-o", "-p", "-s", "-u", "-E", "-P", "-b", "-a", "-I", "-O", "-S", "-X"] },
  ltrace: { withValue: ["-e", "-o", "-p", "-s", "-u", "-n", "-a", "-A", "-D", "-E", "-l", "-x"] },
  unbuffer: {},
  catchsegv: {},
  busybox: {},
  toybox: {},
  fakeroot: {},
  caffeinate: { withValue: ["-t", "-w"] },
  "systemd-run": { withValue: ["--unit", "-u", "-p", "--property", "-E", "--setenv", "--description", "--slice", "-M", "--machine", "-H", "--host", "--uid", "--gid", "--nice", "--working-directory", "--on-calendar", "--on-active"] },
  runuser: { withValue: ["-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell"], scriptOptions: ["-c", "--command"] },
  su: { withValue: ["-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"], scriptOptions: ["-c", "--command", "--session-command"], positionals: 1 },
  pkexec: { withValue: ["--user"] },
  script: { withValue: ["-E", "--echo", "-T", "--log-timing", "-I", "--log-in", "-O", "--log-out", "-B", "--log-io"], scriptOptions: ["-c", "--command"] },
  "dbus-run-session": {},
  unshare: { withValue: ["-S", "--setuid", "-G", "--setgroups", "--propagation", "-R", "--root", "-w", "--wd"] },
  nsenter: { withValue: ["-t", "--target", "-S", "--setuid", "-G", "--setgid", "-r", "--root", "-w", "--wd"] },
  firejail: {},
};

export interface WrapperUse {
  name: string;
  /** The wrapper's own words, its name first. */
  words: ShellWord[];
}

export interface UnwrappedCommand {
  /** The words of the command that finally runs; empty when a wrapper only queries (`command -v ls`). */
  words: ShellWord[];
  /** The wrappers removed, outermost first. */
  wrappers: WrapperUse[];
  /** Command lines a wrapper hands to a shell (`env -S …`, `su -c …`, `watch …`). */
  scripts: ShellWord[];
  /** `VAR=value` words a wrapper puts into the command's environment. */
  assignments: Array<{ name: string; value: ShellWord }>;
  /** The command gets further arguments at run time, from its input (xargs, parallel). */
  appendsInput: boolean;
  /** Words `parallel cmd ::: a b` gives the command. */
  appended: ShellWord[];
}

export function baseName(program: string): string {
  return program.slice(program.lastIndexOf("/") + 1);
}

export function isWrapper(name: string): boolean {
  return Object.hasOwn(WRAPPERS, name);
}

/** Removes wrapper programs (`sudo`, `env X=1`, `timeout 5`, `xargs -n1`…) from the front of a command. */
export function unwrap(words: readonly ShellWord[]): UnwrappedCommand {
  const result: UnwrappedCommand = { words: [], wrappers: [], scripts: [], assignments: [], appendsInput: false, appended: [] };
  let rest = [...words];
  for (let depth = 0; depth < 16; depth += 1) {
    const head = rest[0];
    if (!head || !head.static) break;
    const name = baseName(head.text);
    const spec = WRAPPERS[name];
    if (!spec) break;
    const withValue = new Set(spec.withValue ?? []);
    const scriptOptions = new Set(spec.scriptOptions ?? []);
    let index = 1;
    let positionals = spec.positionals ?? 0;
    let query = false;
    while (index < rest.length) {
      const word = rest[index]!;
      const text = word.text;
      if (text === "--") {
        index += 1;
        break;
      }
      if (word.static && text.startsWith("--") && text.length > 2) {
        const flag = text.split("=", 1)[0]!;
        if ((spec.queries ?? []).includes(flag)) query = true;
        if (scriptOptions.has(flag)) {
          const inline = text.includes("=") ? text.slice(text.indexOf("=") + 1) : null;
          if (inline !== null) result.scripts.push({ ...word, text: inline });
          else if (rest[index + 1]) result.scripts.push(rest[index + 1]!);
          index += inline !== null ? 1 : 2;
          continue;
        }
        index += withValue.has(flag) && !text.includes("=") ? 2 : 1;
        continue;
      }
      if (word.static && text.startsWith("-") && text.length > 1) {
        // A cluster of short options (`-iS 'cmd'`, `-qc 'cmd'`): the first that takes a value takes
        // the rest of the cluster, or the next word.
        let consumed = 1;
        for (let k = 1; k < text.length; k += 1) {
          const flag = `-${text[k]}`;
          if ((spec.queries ?? []).includes(flag)) query = true;
          const attached = text.slice(k + 1);
          if (scriptOptions.has(flag)) {
            if (attached) result.scripts.push({ ...word, text: attached });
            else if (rest[index + 1]) {
              result.scripts.push(rest[index + 1]!);
              consumed = 2;
            }
            break;
          }
          if (withValue.has(flag)) {
            if (!attached) consumed = 2;
            break;
          }
        }
        index += consumed;
        continue;
      }
      // `su -` is a login shell, and the next plain word the user to become.
      if ((name === "su" || name === "runuser") && text === "-") {
        index += 1;
        continue;
      }
      if (name === "nice" && /^-\d+$/.test(text)) {
        index += 1;
        continue;
      }
      if (spec.assignments && word.static && /^[A-Za-z_][A-Za-z0-9_]*=/.test(text)) {
        result.assignments.push({ name: text.slice(0, text.indexOf("=")), value: { ...word, text: text.slice(text.indexOf("=") + 1) } });
        index += 1;
        continue;
      }
      if (positionals > 0) {
        positionals -= 1;
        index += 1;
        continue;
      }
      break;
    }
    result.wrappers.push({ name, words: rest.slice(0, index) });
    rest = rest.slice(index);
    if (query) {
      rest = [];
      break;
    }
    if (spec.appendsInput) result.appendsInput = true;
    if (name === "parallel") {
      const marker = rest.findIndex((word) => word.text === ":::" || word.text === "::::");
      if (marker !== -1) {
        result.appended.push(...rest.slice(marker + 1));
        rest = rest.slice(0, marker);
      }
    }
    if (spec.joinsRest && rest.length > 0) {
      result.scripts.push({ text: rest.map((word) => word.text).join(" "), static: rest.every((word) => word.static), glob: false });
      rest = [];
      break;
    }
  }
  result.words = rest;
  return result;
}

/** The home a login shell of `user` starts in (root's is /root; others' as on most systems). */
function loginHome(user: string): string {
  return user === "root" || user === "0" ? "/root" : `/home/${user}`;
}

/** The value of a wrapper's option, given as `-x v`, `-xv`, `--long v` or `--long=v`. */
function optionValue(words: readonly ShellWord[], short: string | null, long: string | null): string | null {
  for (let i = 1; i < words.length; i += 1) {
    const text = words[i]!.text;
    if ((short && text === short) || (long && text === long)) return words[i + 1]?.text ?? null;
    if (long && text.startsWith(`${long}=`)) return text.slice(long.length + 1);
    if (short && text.startsWith(short) && !text.startsWith("--") && text.length > short.length) return text.slice(short.length);
  }
  return null;
}

/**
 * Where a wrapper makes the wrapped command run, when it moves it: a login shell's home (`sudo -i`,
 * `su -`, `runuser -l`), a named directory (`env -C`, `sudo -D`, `unshare -w`), or somewhere the text
 * does not fix (null: a new root, a user's home by another name). Undefined when it stays put.
 */
export function wrapperDirectory(wrapper: WrapperUse): string | null | undefined {
  const words = wrapper.words;
  const texts = words.map((word) => word.text);
  const named = (short: string | null, long: string | null) => {
    const value = optionValue(words, short, long);
    return value === null ? undefined : value;
  };
  switch (wrapper.name) {
    case "sudo": {
      if (texts.some((text) => text === "-i" || text === "--login" || /^-[A-Za-z]*i[A-Za-z]*$/.test(text))) return loginHome(optionValue(words, "-u", "--user") ?? "root");
      return named("-D", "--chdir");
    }
    case "su":
    case "runuser": {
      if (!texts.some((text) => text === "-" || text === "-l" || text === "--login")) return undefined;
      const user = words.slice(1).find((word, index) => !word.text.startsWith("-") && !["-s", "--shell", "-g", "--group", "-G", "--supp-group", "-c", "--command", "-u", "--user"].includes(texts[index] ?? ""));
      return loginHome(user?.text ?? "root");
    }
    case "env":
      return named("-C", "--chdir");
    case "unshare":
    case "nsenter":
      return named("-w", "--wd");
    case "systemd-run":
      return named(null, "--working-directory");
    case "chroot":
      return null;
    default:
      return undefined;
  }
}

/** Files a wrapper writes itself (`time -o FILE`, `strace -o FILE`): judged like redirections. */
export function wrapperOutputFiles(wrapper: WrapperUse): ShellWord[] {
  if (!["time", "strace", "ltrace"].includes(wrapper.name)) return [];
  const files: ShellWord[] = [];
  const words = wrapper.words;
  for (let i = 1; i < words.length; i += 1) {
    const word = words[i]!;
    if (word.text === "-o" || word.text === "--output") {
      if (words[i + 1]) files.push(words[i + 1]!);
    } else if (word.text.startsWith("--output=")) files.push({ ...word, text: word.text.slice("--output=".length) });
    else if (/^-o./.test(word.text)) files.push({ ...word, text: word.text.slice(2) });
  }
  return files;
}
