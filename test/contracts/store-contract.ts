import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { DuckEvent } from "../../src/contracts/index.js";
import { DuckError } from "../../src/errors/duck-error.js";
import type { DuckStores } from "../../src/state/open-stores.js";
import { TaskLeases } from "../../src/state/task-leases.js";
import { projectEvents } from "../../src/state/task-projection.js";

/**
 * What DuckLM's stores promise, whatever database holds them: the event log, task rows and
 * checkpoints, memory, approvals and logins. Each backend runs this suite (test/contracts/stores.test.ts).
 */

export interface StoreBackend {
  name: string;
  /** Whether what it holds outlives the process (a file, a server), so a reopen finds it. */
  durable: boolean;
  /**
   * Opens every store on a fresh database, reading the time from `clock`. `reopen` closes it and opens
   * the same database again; `close` closes whichever is open.
   */
  open(clock: () => Date): { stores: DuckStores; close(): void; reopen(): DuckStores; second?: () => DuckStores };
}

/** A clock tests move by hand. */
function manualClock(start = Date.parse("2026-06-01T12:00:00Z")) {
  let now = start;
  return { now: () => new Date(now), advance: (ms: number) => (now += ms) };
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return error instanceof DuckError ? error.code : `not a DuckError: ${String(error)}`;
  }
  return undefined;
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

export function describeStoreContract(backend: StoreBackend): void {
  function withStores(work: (stores: DuckStores, clock: ReturnType<typeof manualClock>, opened: ReturnType<StoreBackend["open"]>) => void | Promise<void>) {
    return async () => {
      const clock = manualClock();
      const opened = backend.open(clock.now);
      try {
        await work(opened.stores, clock, opened);
      } finally {
        opened.close();
      }
    };
  }

  describe(`the store contract: ${backend.name}`, () => {
    it(
      "keeps each task's events numbered 1, 2, 3… in the order appended, and publishes them once committed",
      withStores(async ({ tasks, events, bus }) => {
        const task = tasks.createTask({ text: "count the ducks", workspace: "/w" });
        const published: number[] = [];
        bus.subscribe(task.task_id, (event) => void published.push(event.seq));
        tasks.append(task.task_id, "task-started", {});
        tasks.append(task.task_id, "model-output-started", { role: "thinker", purpose: "draft" });
        tasks.append(task.task_id, "model-output-delta", { role: "thinker", purpose: "draft", text: "three" });
        expect(published).toEqual([]);
        await settle();
        expect(published).toEqual([1, 2, 3, 4]);
        const stored = events.list(task.task_id);
        expect(stored.map((event) => event.seq)).toEqual([1, 2, 3, 4]);
        expect(stored.map((event) => event.type)).toEqual(["task-received", "task-started", "model-output-started", "model-output-delta"]);
        expect(stored[3]!.payload).toEqual({ role: "thinker", purpose: "draft", text: "three" });
        expect(events.list(task.task_id, 3).map((event) => event.seq)).toEqual([3, 4]);
        expect(events.lastSeq(task.task_id)).toBe(4);
      }),
    );

    it(
      "returns from each append the state a fresh read from storage gives",
      withStores(({ tasks, events }) => {
        const task = tasks.createTask({ text: "say hi", workspace: "/w", session_id: "s1" });
        tasks.append(task.task_id, "task-started", {});
        const completed = tasks.append(task.task_id, "task-completed", { answer: "hi" }, { durable: true });
        expect(completed.state).toBe("completed");
        expect(tasks.loadProjection(task.task_id)).toEqual(completed);
        expect(projectEvents(events.list(task.task_id))).toEqual(completed);
        tasks.evict(task.task_id);
        expect(tasks.projection(task.task_id)).toEqual(completed);
      }),
    );

    it(
      "keeps a task row that follows its events, and lists tasks newest first, by state and by session",
      withStores(({ tasks }, clock) => {
        const first = tasks.createTask({ text: "first", workspace: "/w", session_id: "s1" });
        tasks.append(first.task_id, "task-started", {});
        tasks.append(first.task_id, "task-completed", { answer: "one" });
        clock.advance(1000);
        const second = tasks.createTask({ text: "second", workspace: "/w", session_id: "s1" });
        tasks.append(second.task_id, "task-started", {}, { durable: true });
        const row = tasks.requireTask(first.task_id);
        expect(row).toMatchObject({ id: first.task_id, text: "first", state: "completed", session_id: "s1", workspace: "/w", last_seq: 3, answer: "one", error: null });
        expect(tasks.listTasks().map((summary) => summary.id)).toEqual([second.task_id, first.task_id]);
        expect(tasks.listTasks({ state: "running" }).map((summary) => summary.id)).toEqual([second.task_id]);
        expect(tasks.listTasks({ limit: 1 })).toHaveLength(1);
        expect(tasks.sessionHistory("s1", second.task_id, 10).map((summary) => summary.id)).toEqual([first.task_id]);
        expect(tasks.getTask("no-such-task")).toBeNull();
        expect(codeOf(() => tasks.requireTask("no-such-task"))).toBe("DUCK_ERR_TASK_NOT_FOUND");
        expect(codeOf(() => tasks.loadProjection("no-such-task"))).toBe("DUCK_ERR_TASK_NOT_FOUND");
      }),
    );

    it(
      "writes the row of a task that ends in the commit that created it as it ended: failed, or with a long answer, after many events",
      withStores(({ tasks, events }, clock) => {
        const failed = tasks.createTask({ text: "doomed", workspace: "/w" });
        tasks.append(failed.task_id, "task-started", {});
        clock.advance(5);
        tasks.append(failed.task_id, "task-failed", { code: "DUCK_ERR_STEP_FAILED", message: "no ducks" });
        const long = "quack ".repeat(4000);
        const chatty = tasks.createTask({ text: "chatty", workspace: "/w" });
        tasks.append(chatty.task_id, "task-started", {});
        // More events than one INSERT statement carries, so the commit takes several.
        for (let i = 0; i < 40; i += 1) tasks.append(chatty.task_id, "model-output-delta", { role: "thinker", purpose: "draft", text: `piece ${i}` });
        const ended = tasks.append(chatty.task_id, "task-completed", { answer: long }, { durable: true });

        expect(tasks.requireTask(failed.task_id)).toMatchObject({ state: "failed", last_seq: 3, answer: null, error: "DUCK_ERR_STEP_FAILED: no ducks", created_at: "2026-06-01T12:00:00.000Z", updated_at: "2026-06-01T12:00:00.005Z" });
        expect(tasks.requireTask(chatty.task_id)).toMatchObject({ state: "completed", last_seq: 43, answer: long, error: null });
        const stored = events.list(chatty.task_id);
        expect(stored.map((event) => event.seq)).toEqual(Array.from({ length: 43 }, (_, i) => i + 1));
        expect(stored.slice(2, 42).map((event) => event.payload.text)).toEqual(Array.from({ length: 40 }, (_, i) => `piece ${i}`));
        expect(tasks.loadProjection(chatty.task_id)).toEqual(ended);
        expect(tasks.listTasks({ state: "failed" }).map((summary) => summary.id)).toEqual([failed.task_id]);
      }),
    );

    it(
      "writes a checkpoint at milestones and rebuilds the same state from it plus the events after",
      withStores(({ tasks }) => {
        const task = tasks.createTask({ text: "t", workspace: "/w" });
        tasks.append(task.task_id, "task-started", {});
        tasks.append(task.task_id, "model-output-started", { role: "thinker", purpose: "draft" });
        const last = tasks.append(task.task_id, "task-completed", { answer: "done" }, { durable: true });
        const checkpoint = tasks.checkpoint(task.task_id);
        expect(checkpoint).not.toBeNull();
        expect(checkpoint!.seq).toBeGreaterThanOrEqual(1);
        expect(checkpoint!.seq).toBeLessThanOrEqual(last.seq);
        expect(tasks.loadProjection(task.task_id)).toEqual(last);
      }),
    );

    it(
      "commits a transaction's appends and other writes together, or none of them",
      withStores(async ({ tasks, events, memories, bus }) => {
        const task = tasks.createTask({ text: "t", workspace: "/w" }, { durable: true });
        const published: string[] = [];
        bus.subscribe(task.task_id, (event: DuckEvent) => void published.push(event.type));
        expect(() =>
          tasks.transaction(() => {
            tasks.append(task.task_id, "task-started", {});
            memories.insert({ text: "half-written memory", kind: "fact" });
            throw new Error("the write fails half-way");
          }),
        ).toThrow("the write fails half-way");
        await settle();
        expect(events.list(task.task_id).map((event) => event.seq)).toEqual([1]);
        expect(memories.findExact("half-written memory")).toBeNull();
        expect(published).toEqual([]);
        tasks.evict(task.task_id);
        const entry = tasks.transaction(() => {
          tasks.append(task.task_id, "task-started", {});
          return memories.insert({ text: "kept memory", kind: "fact", source_task: task.task_id });
        });
        expect(events.list(task.task_id).map((event) => event.seq)).toEqual([1, 2]);
        expect(memories.get(entry.id)?.text).toBe("kept memory");
        expect(published).toEqual(["task-started"]);
      }),
    );

    it(
      "prunes finished tasks past retention with their events and checkpoints, and never an unfinished one",
      withStores(({ tasks, events }, clock) => {
        const old = tasks.createTask({ text: "old", workspace: "/w" });
        tasks.append(old.task_id, "task-started", {});
        tasks.append(old.task_id, "task-failed", { code: "DUCK_ERR_TOOL_FAILED", message: "no" });
        const stuck = tasks.createTask({ text: "still running", workspace: "/w" });
        tasks.append(stuck.task_id, "task-started", {});
        clock.advance(10 * 24 * 3600 * 1000);
        const fresh = tasks.createTask({ text: "fresh", workspace: "/w" });
        tasks.append(fresh.task_id, "task-started", {});
        tasks.append(fresh.task_id, "task-completed", { answer: "yes" });
        const result = tasks.prune({ olderThan: new Date(clock.now().getTime() - 24 * 3600 * 1000), keepNewest: null, action: "delete", archiveDir: mkdtempSync(join(tmpdir(), "ducklm-archive-")) });
        expect(result.pruned).toEqual([old.task_id]);
        expect(tasks.getTask(old.task_id)).toBeNull();
        expect(events.list(old.task_id)).toEqual([]);
        expect(tasks.checkpoint(old.task_id)).toBeNull();
        expect(tasks.getTask(stuck.task_id)?.state).toBe("running");
        expect(tasks.getTask(fresh.task_id)?.state).toBe("completed");
      }),
    );

    it(
      "keeps memories searchable by keyword, pinned, reinforced and deleted",
      withStores(({ memories }, clock) => {
        const bread = memories.insert({ text: "Ducks like bread crumbs", kind: "fact", source_task: "t1" });
        memories.insert({ text: "Geese are loud in the morning", kind: "note" });
        expect(bread).toMatchObject({ text: "Ducks like bread crumbs", kind: "fact", source_task: "t1", pinned: false });
        const hits = memories.search("what do ducks like?", 5);
        expect(hits.map((hit) => hit.entry.id)).toEqual([bread.id]);
        expect(hits[0]!.matched_by).toEqual(["keyword"]);
        expect(memories.search("?!", 5)).toEqual([]);
        expect(memories.setPinned(bread.id, true)).toBe(true);
        expect(memories.get(bread.id)?.pinned).toBe(true);
        clock.advance(1000);
        expect(memories.reinforce(bread.id)!.weight).toBeGreaterThan(bread.weight);
        expect(memories.findExact("Ducks like bread crumbs")?.id).toBe(bread.id);
        expect(memories.stats()).toMatchObject({ entries: 2, pinned: 1, by_kind: { fact: 1, note: 1 } });
        const vector = Float32Array.from([0.5, -1, 2]);
        memories.setEmbedding(bread.id, vector, "tiny-embedding");
        expect(memories.embeddings("tiny-embedding")).toEqual([{ id: bread.id, vector }]);
        expect(memories.embeddings("another-model")).toEqual([]);
        expect(memories.delete(bread.id)).toBe(true);
        expect(memories.delete(bread.id)).toBe(false);
        expect(memories.search("ducks", 5)).toEqual([]);
      }),
    );

    it(
      "remembers an approval for one exact command in one directory, until it expires or is revoked",
      withStores(({ approvals }, clock) => {
        const forever = approvals.grant({ command: "  npm test  ", cwd: "/w", category: "normal", grantedByTask: "t1" });
        const brief = approvals.grant({ command: "make", cwd: "/w", category: "normal", grantedByTask: null, expiresAt: new Date(clock.now().getTime() + 60_000) });
        expect(approvals.findActive("npm test", "/w")?.id).toBe(forever.id);
        expect(approvals.findActive("npm test", "/elsewhere")).toBeNull();
        expect(approvals.findActive("npm test && rm -rf /", "/w")).toBeNull();
        expect(approvals.findActive("make", "/w")?.id).toBe(brief.id);
        clock.advance(61_000);
        expect(approvals.findActive("make", "/w")).toBeNull();
        expect(approvals.revoke(forever.id)).toBe(true);
        expect(approvals.revoke(forever.id)).toBe(false);
        expect(approvals.findActive("npm test", "/w")).toBeNull();
        expect(approvals.get(forever.id)?.revoked_at).not.toBeNull();
        expect(approvals.list().map((approval) => approval.id).sort()).toEqual([forever.id, brief.id].sort());
      }),
    );

    it(
      "spends a login code once, for a session that works until it ends",
      withStores(({ logins }, clock) => {
        const code = logins.issueCode();
        const session = logins.redeemCode(code);
        expect(session).toBeTruthy();
        expect(logins.redeemCode(code)).toBeNull();
        expect(logins.checkSession(session!)).toBe(true);
        expect(logins.checkSession(code)).toBe(false);
        logins.endSession(session!);
        expect(logins.checkSession(session!)).toBe(false);
        const late = logins.issueCode();
        clock.advance(16 * 60 * 1000);
        expect(logins.redeemCode(late)).toBeNull();
      }),
    );

    it(
      "gives back long texts exactly as written, in events, checkpoints and task rows, even one that looks like a stored reference",
      withStores(({ tasks }) => {
        const output = `${"ducks like bread\n".repeat(4000)}the end`;
        const first = tasks.createTask({ text: "read the big file", workspace: "/w" });
        tasks.append(first.task_id, "task-started", {});
        const done = tasks.append(first.task_id, "task-completed", { answer: output }, { durable: true });
        // A task's output that imitates how a long text may be referred to must not read back as another task's text.
        const lookalike = tasks.createTask({ text: "print a lookalike", workspace: "/w" });
        const forged = [`\u0000blob:${"0".repeat(64)}`, "\u0000blob:", `\u0000blob:${"a".repeat(64)} trailing`];
        tasks.append(lookalike.task_id, "task-completed", { answer: forged[0]!, notes: forged } as never, { durable: true });
        tasks.evict(first.task_id);
        tasks.evict(lookalike.task_id);
        expect(tasks.loadProjection(first.task_id)).toEqual(done);
        expect(tasks.checkpoint(first.task_id)?.snapshot).toMatchObject({ answer: output });
        expect(tasks.getTask(first.task_id)?.answer).toBe(output);
        expect(tasks.listEvents(first.task_id).at(-1)?.payload).toEqual({ answer: output });
        expect(tasks.getTask(lookalike.task_id)?.answer).toBe(forged[0]);
        expect(tasks.listEvents(lookalike.task_id).at(-1)?.payload).toEqual({ answer: forged[0], notes: forged });
        expect(tasks.listTasks().map((task) => task.answer).sort()).toEqual([forged[0], output].sort());
      }),
    );

    it(
      "gives a task's lease to one holder at a time, passes a cancel to it, and lets another take over once it is gone",
      withStores(({ tasks, leases }, clock, opened) => {
        const other = new TaskLeases((opened.second?.() ?? opened.stores).database.db, { ttlMs: 10_000, clock: clock.now });
        const task = tasks.createTask({ text: "hold me", workspace: "/w" }, { durable: true });
        expect(leases.acquire(task.task_id)).toEqual({ acquired: true });
        const refused = other.acquire(task.task_id);
        expect(refused).toMatchObject({ acquired: false, holder: { owner: leases.owner, pid: process.pid } });
        expect(other.orphans()).toEqual([]);
        expect(other.requestCancel(task.task_id, "stop it")).toBe(true);
        expect(leases.renew()).toEqual([{ taskId: task.task_id, reason: "stop it" }]);
        expect(leases.renew()).toEqual([]);
        leases.release(task.task_id);
        expect(other.orphans()).toEqual([task.task_id]);
        expect(other.acquire(task.task_id)).toEqual({ acquired: true });
        expect(leases.acquire(task.task_id)).toMatchObject({ acquired: false, holder: { owner: other.owner } });
        // A holder that stops renewing loses the task once its lease runs out; the taker is told who held it.
        clock.advance(10_001);
        expect(other.writerProblem(task.task_id)).toBeNull();
        expect(leases.acquire(task.task_id)).toMatchObject({ acquired: true, previous: { owner: other.owner } });
        // The old holder is fenced off by the lease's epoch: it may write nothing more of the task.
        expect(leases.writerProblem(task.task_id)).toBeNull();
        expect(other.writerProblem(task.task_id)).toMatch(/took the task over/);
        expect(other.isLost(task.task_id)).toBe(true);
        expect(other.holds(task.task_id)).toBe(false);
        other.close();
      }),
    );

    it.runIf(backend.durable)(
      "refuses a second writer's event at a number already taken, and keeps the first writer's",
      withStores(({ tasks }, _clock, opened) => {
        const task = tasks.createTask({ text: "contested", workspace: "/w" }, { durable: true });
        const rival = opened.second!();
        expect(rival.tasks.projection(task.task_id).seq).toBe(1);
        tasks.append(task.task_id, "task-started", {}, { durable: true });
        expect(codeOf(() => rival.tasks.append(task.task_id, "task-cancelled", { reason: "rival" } as never, { durable: true }))).toBe("DUCK_ERR_SEQ_CONFLICT");
        expect(tasks.listEvents(task.task_id).map((event) => event.type)).toEqual(["task-received", "task-started"]);
        expect(rival.tasks.listEvents(task.task_id).map((event) => event.type)).toEqual(["task-received", "task-started"]);
      }),
    );

    it(
      "lists conversations, the newest events of all tasks, and tasks page after page",
      withStores(({ tasks }, clock) => {
        const ids: string[] = [];
        for (const [index, session] of ["s1", "s1", null, "s2"].entries()) {
          const task = tasks.createTask({ text: `task ${index}`, workspace: "/w", session_id: session ?? undefined });
          tasks.append(task.task_id, "task-completed", { answer: `answer ${index}` });
          ids.push(task.task_id);
          clock.advance(1000);
        }
        tasks.flush();
        const conversations = tasks.listConversations(10);
        expect(conversations.map((conversation) => [conversation.id, conversation.session_id, conversation.tasks, conversation.title, conversation.latest_task_id])).toEqual([
          ["s2", "s2", 1, "task 3", ids[3]],
          [ids[2], null, 1, "task 2", ids[2]],
          ["s1", "s1", 2, "task 0", ids[1]],
        ]);
        expect(tasks.recentEvents(3).map((event) => [event.task_id, event.type])).toEqual([
          [ids[2], "task-completed"],
          [ids[3], "task-received"],
          [ids[3], "task-completed"],
        ]);
        const firstPage = tasks.listTasks({ limit: 3 });
        expect(firstPage.map((task) => task.id)).toEqual([ids[3], ids[2], ids[1]]);
        const last = firstPage.at(-1)!;
        expect(tasks.listTasks({ limit: 3, after: { created_at: last.created_at, id: last.id } }).map((task) => task.id)).toEqual([ids[0]]);
        expect(tasks.listTasks({ state: "completed", limit: 1, after: { created_at: last.created_at, id: last.id } }).map((task) => task.id)).toEqual([ids[0]]);

        // A memory edit made from a page is recorded as a task, but is no conversation; a task that only says so is one.
        tasks.createTask({ text: "Pin memory #1", workspace: "/w", kind: "memory-edit" });
        clock.advance(1000);
        const imitation = tasks.createTask({ text: 'ends with ,"kind":"memory-edit"}', workspace: "/w" });
        tasks.flush();
        expect(tasks.listConversations(10).map((conversation) => conversation.id)).toEqual([imitation.task_id, "s2", ids[2], "s1"]);
      }),
    );

    it(
      "reads back people's ratings of steps with the tool call each rated",
      withStores(({ tasks }) => {
        const task = tasks.createTask({ text: "rate me", workspace: "/w" });
        tasks.append(task.task_id, "tool-called", { step_id: "s1", attempt: 1, call: { tool: "file_read", arguments: { path: "a.md" } }, effect: "read-only" });
        tasks.append(task.task_id, "tool-called", { step_id: "s2", attempt: 1, call: { tool: "shell_exec", arguments: { command: "ls" } }, effect: "side-effecting" });
        tasks.append(task.task_id, "feedback-received", { target: "step", step_id: "s2", rating: "down", comment: "wrong folder", by: "user" });
        tasks.append(task.task_id, "feedback-received", { target: "answer", step_id: null, rating: "up", comment: "", by: "user" }, { durable: true });
        expect(tasks.stepRatings("shell_exec", 5)).toEqual([{ task_id: task.task_id, step_id: "s2", tool: "shell_exec", arguments: { command: "ls" }, rating: "down", comment: "wrong folder" }]);
        expect(tasks.stepRatings("file_read", 5)).toEqual([]);
        // A call whose arguments hold a NUL and a long text (stored once, by reference) is rated like any other.
        const planted = { path: "b.md", content: `a\u0000b${"x".repeat(9_000)}` };
        const other = tasks.createTask({ text: "write a big file", workspace: "/w" });
        tasks.append(other.task_id, "tool-called", { step_id: "w1", attempt: 1, call: { tool: "file_write", arguments: planted }, effect: "side-effecting" });
        tasks.append(other.task_id, "feedback-received", { target: "step", step_id: "w1", rating: "up", comment: "good", by: "user" }, { durable: true });
        expect(tasks.stepRatings("file_write", 5)).toEqual([{ task_id: other.task_id, step_id: "w1", tool: "file_write", arguments: planted, rating: "up", comment: "good" }]);
        expect(tasks.stepRatings("shell_exec", 5)).toHaveLength(1);
      }),
    );

    it(
      "keeps memory embeddings exactly, and counts entries and UTF-8 bytes for cleanup",
      withStores(({ memories }) => {
        const vector = new Float32Array([0.25, -1.5, 3.0e-8, 1]);
        const embedded = memories.insert({ text: "Gänse mögen Brot", kind: "fact", embedding: vector, embedding_model: "tiny" });
        const plain = memories.insert({ text: "ducks", kind: "note" });
        expect(memories.embeddings("tiny")).toEqual([{ id: embedded.id, vector }]);
        expect(memories.idsWithEmbedding("tiny")).toEqual([embedded.id]);
        expect(memories.idsWithEmbedding("other")).toEqual([]);
        memories.setEmbedding(plain.id, new Float32Array([1, 2]), "tiny");
        expect(memories.idsWithEmbedding("tiny")).toEqual([embedded.id, plain.id]);
        expect(memories.stats()).toEqual({ entries: 2, pinned: 0, bytes: 18 + 5, with_embedding: 2, by_kind: { fact: 1, note: 1 } });
        memories.setWeight(plain.id, 0.5);
        expect(memories.cleanupView().map((row) => [row.id, row.weight, row.bytes, row.pinned])).toEqual(
          expect.arrayContaining([
            [embedded.id, 1, 18, false],
            [plain.id, 0.5, 5, false],
          ]),
        );
        expect(memories.findExact("ducks")?.id).toBe(plain.id);
        expect(memories.list(1).map((entry) => entry.id)).toEqual([plain.id]);
      }),
    );

    it.runIf(backend.durable)(
      "keeps everything committed across a close and reopen",
      withStores(({ tasks, memories, approvals }, _clock, opened) => {
        const task = tasks.createTask({ text: "persist me", workspace: "/w" });
        const done = tasks.append(task.task_id, "task-completed", { answer: "kept" }, { durable: true });
        const memory = memories.insert({ text: "Ducks nest near water", kind: "fact" });
        const approval = approvals.grant({ command: "ls", cwd: "/w", category: "normal", grantedByTask: task.task_id });
        const again = opened.reopen();
        expect(again.tasks.loadProjection(task.task_id)).toEqual(done);
        expect(again.tasks.getTask(task.task_id)?.answer).toBe("kept");
        expect(again.memories.search("nest", 5).map((hit) => hit.entry.id)).toEqual([memory.id]);
        expect(again.approvals.findActive("ls", "/w")?.id).toBe(approval.id);
      }),
    );
  });
}
