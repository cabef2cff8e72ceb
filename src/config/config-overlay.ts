/**
 * How a config file of the user's folder is laid over the bundled file of the same name, as a JSON
 * merge patch (RFC 7396): settings the user's file gives replace the bundled ones, key by key; the
 * rest keep their bundled value; `null` removes a setting (its default applies, and a role set to
 * null has no model). A models.json that sets only `threads` keeps every bundled role, and a new
 * DuckLM's new defaults reach a user who changed one setting.
 *
 * The permission rules add up instead: the user's hard stops, always-asked commands, network
 * programs, safe shapes and examples come on top of the bundled ones, so a file of one's own rules
 * cannot drop the built-in safety rules by leaving them out. A file that means to stand alone says
 * so with `"extends_bundled": false`.
 */
/** Where a `__proto__` key is in a parsed file (a record of roles would otherwise drop it without a word). */
export function protoKeyIn(value: unknown, path: string[] = []): string | null {
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = protoKeyIn(item, [...path, String(index)]);
      if (found) return found;
    }
    return null;
  }
  if (!isObject(value)) return null;
  for (const [key, item] of Object.entries(value)) {
    if (key === "__proto__") return [...path, key].join(".");
    const found = protoKeyIn(item, [...path, key]);
    if (found) return found;
  }
  return null;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);

/** Sets a key as an own property, even `__proto__` (which the schema then reports as unknown, as it should). */
function setOwn(target: JsonObject, key: string, value: Json): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** `own` with the settings it removes (null) left out, at every depth: a removed setting takes its default. */
function withoutRemoved(own: JsonObject): JsonObject {
  const kept: JsonObject = {};
  for (const [key, value] of Object.entries(own)) if (value !== null) setOwn(kept, key, isObject(value) ? withoutRemoved(value) : value);
  return kept;
}

/** The user's object laid over the bundled one: objects merge key by key; anything else is replaced. */
function overlay(bundled: Json, own: Json, entryRule?: (path: string[], bundled: JsonObject, own: JsonObject) => JsonObject | null, path: string[] = []): Json {
  if (!isObject(bundled) || !isObject(own)) return own;
  const ruled = entryRule?.(path, bundled, own);
  if (ruled) return ruled;
  const merged: JsonObject = { ...bundled };
  for (const [key, value] of Object.entries(own)) {
    if (value === null) delete merged[key];
    else setOwn(merged, key, Object.hasOwn(bundled, key) ? overlay(bundled[key]!, value, entryRule, [...path, key]) : isObject(value) ? withoutRemoved(value) : value);
  }
  return merged;
}

/**
 * The bundled entries, then the user's that are not among them already. What is not a list is kept
 * as the user wrote it, for the schema to refuse: a rule written as a string must not vanish.
 */
function union(bundled: Json | undefined, own: Json | undefined): Json | undefined {
  if (own !== undefined && own !== null && !Array.isArray(own)) return own;
  const first = Array.isArray(bundled) ? bundled : [];
  const seen = new Set(first.map((entry) => JSON.stringify(entry)));
  return [...first, ...(Array.isArray(own) ? own : []).filter((entry) => !seen.has(JSON.stringify(entry)))];
}

/** A model role the user sets: a file replaces the bundled server, a server the bundled file. */
function roleEntry(path: string[], bundled: JsonObject, own: JsonObject): JsonObject | null {
  if (path.length !== 2 || path[0] !== "roles") return null;
  const base = { ...bundled };
  if (own.file != null) delete base.server;
  if (own.server != null) delete base.file;
  for (const [key, value] of Object.entries(own)) if (value === null) delete base[key];
  return { ...base, ...withoutRemoved(own) };
}

/** An MCP server the user names is theirs alone: a stdio server and an HTTP one share no settings. */
function mcpServerEntry(path: string[], _bundled: JsonObject, own: JsonObject): JsonObject | null {
  return path.length === 3 && path[0] === "mcp" && path[1] === "servers" ? withoutRemoved(own) : null;
}

function permissionsOverlay(bundled: JsonObject, own: JsonObject): JsonObject {
  if (own.extends_bundled === false) return own;
  const merged = overlay(bundled, own) as JsonObject;
  // Categories that are not an object are the user's mistake, left for the schema to name.
  if (own.categories !== undefined && own.categories !== null && !isObject(own.categories)) return merged;
  const bundledCategories = isObject(bundled.categories) ? bundled.categories : {};
  const ownCategories = isObject(own.categories) ? own.categories : {};
  const categories: JsonObject = { ...bundledCategories, ...ownCategories };
  for (const list of ["hard_stop", "no_always", "normal"]) {
    if (list in bundledCategories || list in ownCategories) categories[list] = union(bundledCategories[list], ownCategories[list]) ?? [];
  }
  if ("categories" in bundled || "categories" in own) merged.categories = categories;
  for (const list of ["network", "examples"]) {
    if (list in bundled || list in own) merged[list] = union(bundled[list], own[list]) ?? [];
  }
  return merged;
}

/** The settings in force for `name` (models.json, runtime.json…): the user's file laid over the bundled one. */
export function overlayConfig(name: string, bundled: unknown, own: unknown): unknown {
  if (!isObject(bundled) || !isObject(own)) return own;
  if (name === "permissions.json") return permissionsOverlay(bundled, own);
  if (name === "models.json") return overlay(bundled, own, roleEntry);
  if (name === "integrations.json") return overlay(bundled, own, mcpServerEntry);
  return overlay(bundled, own);
}
