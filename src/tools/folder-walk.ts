import { closeSync, constants as fsConstants, mkdirSync, openSync } from "node:fs";

const FOLDER_FLAGS = fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW;

/**
 * A path the kernel resolves from the folder an open descriptor holds, whatever that folder's own
 * path has become since: a task that swaps a folder for a link after it was opened changes nothing.
 */
export function throughFolder(folderFd: number, name: string): string {
  return `/proc/self/fd/${folderFd}/${name}`;
}

/**
 * Opens the folder `relative` within `root` one part at a time, never through a link, making the parts
 * that are missing when `make` holds. Null when a part is a link, not a folder, missing, or `..`.
 * The caller closes the descriptor.
 */
export function openFolderWithin(root: string, relative: string, make: boolean): number | null {
  let folderFd: number;
  try {
    // The root itself is not followed either: a workspace swapped for a link leads nowhere.
    folderFd = openSync(root, FOLDER_FLAGS);
  } catch {
    return null;
  }
  for (const part of relative.split("/").filter((name) => name !== "" && name !== ".")) {
    const next = part === ".." ? null : throughFolder(folderFd, part);
    if (next !== null && make) {
      try {
        // mkdir never follows a link in its last part: a link there is EEXIST, and the open below refuses it.
        mkdirSync(next, { mode: 0o755 });
      } catch {
        // There already.
      }
    }
    let childFd: number | null = null;
    try {
      if (next !== null) childFd = openSync(next, FOLDER_FLAGS);
    } catch {
      childFd = null;
    }
    closeSync(folderFd);
    if (childFd === null) return null;
    folderFd = childFd;
  }
  return folderFd;
}

/** Runs `use` with the folder `relative` of `root` opened as {@link openFolderWithin} opens it; null when it cannot be. */
export function withFolderWithin<T>(root: string, relative: string, make: boolean, use: (folderFd: number) => T): T | null {
  const folderFd = openFolderWithin(root, relative, make);
  if (folderFd === null) return null;
  try {
    return use(folderFd);
  } finally {
    closeSync(folderFd);
  }
}
