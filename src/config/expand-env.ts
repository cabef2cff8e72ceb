import { DuckError, ErrorCode } from "../errors/duck-error.js";

/** Replaces `${NAME}` with NAME from the environment; a missing variable is a configuration error. */
export function expandEnv(value: string, env: NodeJS.ProcessEnv, where: string): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_match, name: string) => {
    const found = env[name];
    if (found === undefined) throw new DuckError(ErrorCode.ConfigInvalid, `${where} uses \${${name}}, but ${name} is not set in the environment`);
    return found;
  });
}
