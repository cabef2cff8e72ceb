// DuckLM web chat. Tool output and model prose go through textContent; answers are Markdown,
// rendered by markdown.js (HTML in them stays text, the rest is sanitised).
import { modelWorkText, partialAnswer } from "./answer-stream.js";
import { addCopyButton, codeBlock, languageOf, renderMarkdown, visible } from "./markdown.js";

const $ = (id) => document.getElementById(id);
// Roles whose prose streams into the thinking panel (the orchestrator decides again after steps).
const PROSE_ROLES = new Set(["thinker", "orchestrator", "coder"]);
const messages = $("messages");
const eventLog = $("event-log");
const state = { taskId: null, lastSeq: 0, socket: null, retry: 0, view: null, session: sessionId() };

function newSessionId() {
  return `web-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

function sessionId() {
  let id = sessionStorage.getItem("ducklm-session");
  if (!id) {
    id = newSessionId();
    sessionStorage.setItem("ducklm-session", id);
  }
  return id;
}

/** An element with text; characters that reorder or hide text are shown as what they are. */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = visible(text);
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    credentials: "same-origin",
    headers: options.body ? { "content-type": "application/json" } : {},
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${response.status}`);
  return body;
}

// ---- rendering of tool output ----
function diffBlock(diff) {
  const pre = el("pre", "diff");
  for (const line of diff.split("\n")) {
    const kind = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : null;
    pre.append(kind ? el("span", kind, line) : line, "\n");
  }
  return pre;
}

const quoted = (text, most = 80) => `“${String(text).length > most ? `${String(text).slice(0, most - 1)}…` : text}”`;

/** What a call does, as a person says it: "Read README.md", "Ran `ls -la` in ~/proj". */
function toolTitle(call, workspace) {
  const args = call.arguments ?? {};
  const lines = args.start_line ? ` (lines ${args.start_line}–${args.end_line ?? "end"})` : "";
  switch (call.tool) {
    case "shell_exec":
      return `Ran \`${args.command}\`${workspace ? ` in ${workspace}` : ""}`;
    case "file_read":
      return `Read ${args.path}${lines}`;
    case "file_write":
      return `${args.mode === "append" ? "Appended to" : args.mode === "create" ? "Created" : "Wrote"} ${args.path}`;
    case "file_list":
      return `Listed ${args.path ?? "."}${args.depth > 1 ? ` (${args.depth} levels)` : ""}`;
    case "memory_insert":
      return `Remembered ${quoted(args.text)}`;
    case "memory_search":
      return `Searched memory for ${quoted(args.query)}`;
    case "memory_list":
      return "Listed what is remembered";
    case "web_fetch":
      return `Fetched ${args.url}`;
    case "web_search":
      return `Searched the web for ${quoted(args.query)}`;
    case "code_apply":
      return `coder: ${(args.files || []).join(", ")}${args.test_command ? ` · test: ${args.test_command}` : ""}`;
    default: {
      // An MCP tool: its server and name, then its arguments in short.
      const mcp = /^mcp__(.+?)__(.+)$/.exec(call.tool);
      const name = mcp ? `${mcp[1]} › ${mcp[2]}` : call.tool;
      const shown = Object.entries(args).map(([key, value]) => `${key}: ${typeof value === "string" ? quoted(value, 40) : JSON.stringify(value)}`);
      return `${name}${shown.length ? ` (${shown.join(", ").slice(0, 160)})` : ""}`;
    }
  }
}

function renderToolResult(block, call, result) {
  const head = block.querySelector(".tool-head");
  const status = el("span", `exit ${result.ok ? "ok" : "bad"}`);
  const tested = call.tool === "code_apply" && result.exit_code !== undefined && result.exit_code !== null;
  // A call that never ran has no exit code to show: it was refused.
  const refused = result.error?.code === "DUCK_ERR_PERMISSION_DENIED" ? "denied" : result.error?.code === "DUCK_ERR_HARD_STOP" ? "never run" : null;
  if (refused) status.textContent = refused;
  else if (call.tool === "shell_exec" || tested) status.textContent = `exit ${result.exit_code ?? "?"}`;
  else status.textContent = result.ok ? "ok" : "failed";
  head.append(status);
  const data = result.data || {};
  if (call.tool === "code_apply" && result.output) {
    // A coder step: each file's diff, then the test command and its output.
    if (result.error) block.append(el("pre", "error", `${result.error.code}: ${result.error.message}`));
    const cut = result.output.indexOf("\n$ ");
    block.append(diffBlock(cut >= 0 ? result.output.slice(0, cut) : result.output));
    if (cut >= 0) block.append(el("pre", "terminal", result.output.slice(cut + 1)));
  } else if (!result.ok && result.error) block.append(el("pre", "error", `${result.error.code}: ${result.error.message}${result.output ? `\n${result.output}` : ""}`));
  else if (call.tool === "shell_exec") {
    const terminal = el("pre", "terminal", result.output || "(no output)");
    if (result.output) addCopyButton(terminal, () => result.output);
    block.append(terminal);
  }
  else if (call.tool === "file_read") block.append(codeBlock(result.output, languageOf(call.arguments?.path ?? "")));
  else if (call.tool === "file_write" && data.diff) block.append(diffBlock(data.diff));
  else if (call.tool === "memory_search" && Array.isArray(data.hits)) {
    const list = el("ul", "memory-hits");
    for (const hit of data.hits) list.append(el("li", null, hit.entry.text));
    if (data.hits.length === 0) list.append(el("li", null, "nothing remembered"));
    block.append(list);
  } else block.append(el("pre", null, result.output));
}

// ---- one task's view ----
function taskView(taskId, text) {
  const user = el("div", "message user", text ?? "");
  const assistant = el("div", "message assistant");
  const thinking = el("div", "thinking");
  const tools = el("div", "tools");
  const answer = el("div", "answer");
  assistant.append(thinking, tools, answer);
  messages.append(user, assistant);
  return { taskId, user, assistant, thinking, tools, answer, toolBlocks: new Map(), calls: new Map(), approvals: new Map(), askedCalls: new Map(), askedAbout: new Map(), denied: null, lastOutput: null, directive: "", iteration: 1, pendingAnswer: null };
}

function followQueuePosition(view) {
  if (view.queueTimer) return;
  view.queueTimer = setInterval(async () => {
    const task = await api(`/tasks/${encodeURIComponent(view.taskId)}`).catch(() => null);
    if (!task || task.queue_position === null || task.queue_position === undefined) return stopFollowingQueue(view);
    if (view.queued?.textContent.startsWith("Waiting")) view.queued.textContent = `Waiting to run: number ${task.queue_position} in line`;
  }, 2000);
}

function stopFollowingQueue(view) {
  if (view.queueTimer) clearInterval(view.queueTimer);
  view.queueTimer = null;
}

/** Renders the answer as Markdown, at most once a frame while it streams. */
function showAnswer(view, text, { now = false } = {}) {
  // A long answer streams as plain text and is rendered once, at its end.
  if (!now && text.length > 20_000) {
    view.answer.textContent = visible(text);
    return;
  }
  view.pendingAnswer = text;
  if (now) {
    view.pendingAnswer = null;
    renderMarkdown(view.answer, text);
    return;
  }
  if (view.answerFrame) return;
  view.answerFrame = requestAnimationFrame(() => {
    view.answerFrame = null;
    if (view.pendingAnswer !== null) renderMarkdown(view.answer, view.pendingAnswer);
  });
}

/** The composer's button stops the task on screen while it runs, and sends otherwise. */
function taskEnded(view, work) {
  // What the task cost the model, under its answer.
  const text = modelWorkText(work);
  if (text) view.answer.after(el("div", "model-work", text));
  stopFollowingQueue(view);
  if (view.answerFrame) cancelAnimationFrame(view.answerFrame);
  view.answerFrame = null;
  if (state.view === view) setRunning(false);
}

function setRunning(running) {
  state.running = running;
  $("stop").hidden = !running;
}

/** The tools whose calls change the workspace: a task that made one can be undone. */
const WORKSPACE_WRITERS = new Set(["shell_exec", "file_write", "code_apply"]);

/** An Undo button under a finished task that changed the workspace: it shows the files first. */
function addUndo(view) {
  if (!view.changedWorkspace || view.undoButton) return;
  const button = el("button", "undo", "Undo changes");
  button.type = "button";
  button.setAttribute("aria-label", "Undo this task's changes to the workspace");
  button.addEventListener("click", () => confirmUndo(view.taskId, button));
  view.undoButton = button;
  (view.assistant.querySelector(".feedback") ?? view.assistant).append(button);
}

async function confirmUndo(taskId, button) {
  const id = encodeURIComponent(taskId);
  let preview;
  try {
    preview = await api(`/tasks/${id}/undo`, { method: "POST", body: JSON.stringify({ dry_run: true }) });
  } catch (error) {
    button.replaceWith(el("span", "error", `Cannot undo: ${error.message}`));
    return;
  }
  const dialog = $("undo-dialog");
  $("undo-summary").textContent = preview.changes.length === 0 ? "Nothing differs from before the task: there is nothing to put back." : `These files go back to how they were before the task (${filesText(preview.changes.length)}):`;
  const files = $("undo-files");
  files.replaceChildren(...preview.changes.slice(0, 100).map((change) => el("li", change.change, `${change.change}: ${change.path}`)));
  if (preview.changes.length > 100) files.append(el("li", null, `… and ${preview.changes.length - 100} more`));
  $("undo-confirm").disabled = preview.changes.length === 0;
  dialog.returnValue = "";
  dialog.showModal();
  dialog.addEventListener(
    "close",
    async () => {
      if (dialog.returnValue !== "undo") return;
      try {
        const done = await api(`/tasks/${id}/undo`, { method: "POST", body: JSON.stringify({}) });
        button.replaceWith(el("span", "undone", `Undone: ${filesText(done.changes.length)} put back`));
      } catch (error) {
        button.replaceWith(el("span", "error", `Undo failed: ${error.message}`));
      }
    },
    { once: true },
  );
}

function addFeedback(view) {
  const bar = el("div", "feedback");
  for (const [rating, label] of [["up", "Good"], ["down", "Bad"]]) {
    const button = el("button", null, label);
    button.type = "button";
    button.setAttribute("aria-label", rating === "up" ? "Good answer" : "Bad answer");
    button.addEventListener("click", () => openFeedback(view.taskId, rating));
    bar.append(button);
  }
  view.assistant.append(bar);
}

function logEvent(event) {
  // Token chunks would flood the panel: consecutive ones share one line with a count.
  const last = eventLog.lastElementChild;
  if (event.type === "model-output-delta" && last?.dataset.delta === event.payload.purpose) {
    last.dataset.count = String(Number(last.dataset.count) + 1);
    last.querySelector(".count").textContent = ` ×${last.dataset.count} (to #${event.seq})`;
    return;
  }
  const item = el("li");
  item.append(el("span", "type", event.type), ` #${event.seq}`);
  if (event.type === "model-output-delta") {
    item.dataset.delta = event.payload.purpose;
    item.dataset.count = "1";
    item.append(el("span", "count", ""));
  } else if (event.type === "model-output-started") {
    item.append(` ${event.payload.role}: ${event.payload.purpose}`);
  }
  eventLog.append(item);
  if (eventLog.children.length > 2000) eventLog.firstChild.remove();
}

function handleEvent(event) {
  if (event.task_id !== state.taskId || event.seq <= state.lastSeq) return;
  state.lastSeq = event.seq;
  const conversation = state.conversation ? `conversation=${encodeURIComponent(state.conversation)}&` : "";
  history.replaceState(null, "", `#${conversation}task=${encodeURIComponent(state.taskId)}&seq=${state.lastSeq}`);
  logEvent(event);
  applyEvent(state.view, event, { live: true });
  messages.scrollTop = messages.scrollHeight;
}

/**
 * One event drawn into a task's view. Live events may open the permission and password dialogs;
 * a stored task of a reopened conversation is only drawn.
 */
function applyEvent(view, event, { live }) {
  const p = event.payload;
  switch (event.type) {
    case "task-received":
      view.user.textContent = visible(p.text);
      view.workspace = p.workspace;
      break;
    case "task-queued": {
      // Too many tasks already run: this one waits its turn, first come first served (again after a restart).
      const text = `Waiting to run: number ${p.position} in line (${p.running} of ${p.limit} tasks running)`;
      if (view.queued) view.queued.textContent = text;
      else view.tools.append((view.queued = el("div", "iteration queued", text)));
      // The line moves as other tasks finish: the place shown follows it.
      if (live) followQueuePosition(view);
      break;
    }
    case "task-dequeued":
      stopFollowingQueue(view);
      if (view.queued) view.queued.textContent = "Waited in line; running now";
      break;
    case "context-summarised":
      view.tools.append(el("div", "iteration", p.section === "history" ? `Summarised ${p.covers.length} earlier turn(s) of the conversation to fit the context` : `Summarised decisions 1 to ${p.through} to fit the context`));
      break;
    case "iteration-started": {
      // Each further decision of the agent loop is a turn of its own under the same question.
      view.iteration = p.iteration;
      view.tools.append(el("div", "iteration", `Decision ${p.iteration}: ${p.reason}`));
      break;
    }
    case "model-output-started":
      view.streamed = false;
      if (p.purpose.startsWith("directive")) view.directive = "";
      // The thinker's and the coder's prose stream into view; JSON for the runtime does not.
      else if (PROSE_ROLES.has(p.role) && view.thinking.textContent) view.thinking.append("\n");
      break;
    case "model-output-delta":
      view.streamed = true;
      if (p.purpose.startsWith("directive")) {
        // A directive that answers streams its answer as the model writes it.
        view.directive += p.text;
        const answer = partialAnswer(view.directive);
        if (answer !== null) {
          view.answer.classList.add("streaming");
          showAnswer(view, answer);
        }
        break;
      }
      if (!PROSE_ROLES.has(p.role)) break;
      view.thinking.append(visible(p.text));
      view.thinking.scrollTop = view.thinking.scrollHeight;
      break;
    case "model-output-completed":
      // An output that came whole, within one gathering interval, has no deltas: its completion holds it.
      if (view.streamed || p.purpose.startsWith("directive") || !PROSE_ROLES.has(p.role)) break;
      view.thinking.append(visible(p.text));
      view.thinking.scrollTop = view.thinking.scrollHeight;
      break;
    case "tool-called": {
      if (WORKSPACE_WRITERS.has(p.call.tool)) view.changedWorkspace = true;
      const block = el("div", "tool");
      const head = el("div", "tool-head");
      const title = el("span", null, toolTitle(p.call, view.workspace));
      // The exact call, for whoever wants it.
      title.title = `${p.call.tool} ${JSON.stringify(p.call.arguments)}`;
      head.append(title);
      block.append(head);
      view.tools.append(block);
      view.toolBlocks.set(`${view.iteration}:${p.step_id}/${p.attempt}`, block);
      view.calls.set(`${view.iteration}:${p.step_id}/${p.attempt}`, p.call);
      break;
    }
    case "tool-result": {
      const key = `${view.iteration}:${p.step_id}/${p.attempt}`;
      let block = view.toolBlocks.get(key);
      if (!block) {
        // No tool-called before it: the call was refused before it ran; its title is the one asked about.
        block = el("div", "tool");
        const asked = view.askedCalls.get(p.step_id);
        const command = asked ? exactCommandOf(asked) : null;
        const head = el("div", "tool-head");
        head.append(el("span", null, command ? `\`${command}\`` : asked ? toolTitle(asked, view.workspace) : p.result.tool));
        block.append(head);
        view.tools.append(block);
      }
      renderToolResult(block, view.calls.get(key) ?? { tool: p.result.tool }, p.result);
      view.lastOutput = p.result.output;
      break;
    }
    case "permission-requested": {
      // Said in the chat too, so a closed dialog or another tab still shows why nothing moves.
      const what = exactCommandOf(p.call) ?? toolTitle(p.call, view.workspace);
      const waiting = el("div", "iteration waiting", `Waiting for your approval: ${what}`);
      view.approvals.set(p.request_id, waiting);
      view.askedCalls.set(p.step_id, p.call);
      view.askedAbout.set(p.request_id, what);
      view.tools.append(waiting);
      if (live) queuePermission(event.task_id, { ...p, workspace: view.workspace });
      // The conversation's line in the sidebar says it waits for you.
      if (live) refreshTasks();
      break;
    }
    case "permission-resolved": {
      const waiting = view.approvals.get(p.request_id);
      if (waiting) {
        waiting.classList.remove("waiting");
        waiting.textContent = waiting.textContent.replace("Waiting for your approval", p.decision === "deny" ? "You denied" : "You allowed");
      }
      if (p.decision === "deny") view.denied = view.askedAbout.get(p.request_id) ?? null;
      if (live) refreshTasks();
      break;
    }
    case "secret-requested":
      if (live) queueSecret(event.task_id, p);
      break;
    case "task-completed":
      // A one-tool task's answer is that tool's output, already shown above.
      view.answer.classList.remove("streaming");
      if (p.answer !== view.lastOutput) showAnswer(view, p.answer, { now: true });
      else view.answer.replaceChildren();
      addFeedback(view);
      taskEnded(view, p.model_work);
      addUndo(view);
      if (live) refreshTasks();
      break;
    case "task-failed":
      // A half-written answer whose directive then failed is not an answer.
      if (view.answer.classList.contains("streaming")) view.answer.textContent = "";
      view.answer.classList.remove("streaming");
      view.answer.append(
        el("span", "error", p.code === "DUCK_ERR_PERMISSION_DENIED" ? (view.denied ? `Stopped: you did not allow ${view.denied}` : "Stopped: a permission was refused") : `Failed (${p.code}): ${p.message}`),
      );
      taskEnded(view, p.model_work);
      addUndo(view);
      if (live) refreshTasks();
      break;
    case "task-cancelled":
      if (view.queued?.textContent.startsWith("Waiting")) view.queued.textContent = "Left the line";
      view.answer.classList.remove("streaming");
      view.answer.append(el("span", "error", `Cancelled: ${p.reason}`));
      taskEnded(view, p.model_work);
      addUndo(view);
      if (live) refreshTasks();
      break;
    case "workspace-restored":
      view.assistant.append(el("div", "restored", p.redo ? `Workspace put back as it was before the undo (${filesText(p.changed)})` : `Workspace put back as it was before step ${p.step_id} (${filesText(p.changed)})`));
      break;
  }
}

function filesText(count) {
  return count === 1 ? "1 file" : `${count} files`;
}

// ---- streaming, with reconnection from the last event seen ----
function connect() {
  if (!state.taskId) return;
  state.socket?.close();
  const protocol = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${protocol}://${location.host}/stream/${encodeURIComponent(state.taskId)}?since=${state.lastSeq + 1}`);
  state.socket = socket;
  socket.addEventListener("open", () => {
    state.retry = 0;
    $("connection").textContent = "live";
    $("connection").className = "connection live";
  });
  socket.addEventListener("message", (message) => {
    const data = JSON.parse(message.data);
    if (data.type === "event") handleEvent(data.event);
  });
  socket.addEventListener("close", () => {
    if (state.socket !== socket) return;
    $("connection").textContent = "reconnecting…";
    $("connection").className = "connection";
    const wait = Math.min(5000, 300 * 2 ** state.retry++);
    setTimeout(() => state.socket === socket && connect(), wait);
  });
}

/** Shows a task and streams it; a new message of the conversation keeps the earlier ones on screen. */
function openTask(taskId, text, { keepMessages = false } = {}) {
  if (!keepMessages) messages.replaceChildren();
  else messages.querySelector(".hint")?.remove();
  eventLog.replaceChildren();
  state.taskId = taskId;
  state.lastSeq = 0;
  state.view = taskView(taskId, text);
  connect();
}

// ---- permission, password and feedback dialogs ----
// What each category means for the person asked.
const CATEGORY_TEXT = {
  unknown: "no rule in permissions.json covers it",
  normal: "allowed by a rule",
  read_only: "reads only",
  no_always: "risky: asked every time, never remembered",
  hard_stop: "refused",
};
/** The exact command a call would run (a shell command, a coder step's test), or null for another tool. */
function exactCommandOf(call) {
  const args = call.arguments || {};
  return typeof args.command === "string" ? args.command : typeof args.test_command === "string" ? args.test_command : null;
}
const permissionQueue = [];
function queuePermission(taskId, request) {
  permissionQueue.push({ taskId, request });
  if (!$("permission-dialog").open) showNextPermission();
}
function showNextPermission() {
  const next = permissionQueue.shift();
  if (!next) return;
  const { request } = next;
  $("permission-reason").textContent = request.reason;
  $("permission-category").textContent = CATEGORY_TEXT[request.category] ?? request.category.replace("_", " ");
  $("permission-network").hidden = !request.network;
  $("permission-workspace").textContent = visible(request.workspace || "");
  $("permission-where").hidden = !request.workspace;
  $("permission-always-covers").textContent =
    request.commands.length > 0 ? "exactly this command, in this folder" : `every later call of the tool ${request.call.tool} in this folder, whatever its arguments`;
  const list = $("permission-commands");
  list.replaceChildren();
  // The command exactly as it would run; the commands found in it below when there is more than that
  // one (their words, as the rules judge them). A tool call is named with all of its arguments.
  const exact = exactCommandOf(request.call);
  const commands = exact !== null ? [exact] : [`${request.call.tool} ${JSON.stringify(request.call.arguments, null, 2)}`];
  // A coder step asks once for its files and its test command together.
  if (request.call.tool === "code_apply" && exact !== null) commands.unshift(`write ${(request.call.arguments.files || []).join(", ")}`);
  for (const command of commands) {
    const item = el("li");
    item.append(el(command.includes("\n") ? "pre" : "code", null, command));
    list.append(item);
  }
  const inside = exact !== null && (request.commands.length > 1 || (request.commands.length === 1 && request.commands[0] !== exact.trim()));
  if (inside) {
    const item = el("li", "runs-inside", "It runs: ");
    request.commands.forEach((command, index) => item.append(...(index > 0 ? [" · "] : []), el("code", null, command)));
    list.append(item);
  }
  $("permission-always").hidden = request.category === "no_always";
  const dialog = $("permission-dialog");
  dialog.returnValue = "";
  dialog.onclose = async () => {
    const decision = dialog.returnValue || "deny";
    try {
      await api("/permissions/resolve", { method: "POST", body: JSON.stringify({ task_id: next.taskId, request_id: request.request_id, decision }) });
    } catch (error) {
      state.view?.answer.append(el("div", "error", String(error.message)));
    }
    showNextPermission();
  };
  dialog.showModal();
}

function queueSecret(taskId, request) {
  const dialog = $("secret-dialog");
  const input = $("secret-input");
  $("secret-prompt").textContent = request.prompt;
  input.value = "";
  dialog.returnValue = "";
  let secret = "";
  // Taken out of the field as the form submits, before the dialog closes: it is never left on the page.
  $("secret-form").onsubmit = () => {
    secret = input.value;
    input.value = "";
  };
  dialog.onclose = async () => {
    input.value = "";
    if (dialog.returnValue !== "send" || !secret) return;
    try {
      await api("/secrets/resolve", { method: "POST", body: JSON.stringify({ task_id: taskId, request_id: request.request_id, secret }) });
    } catch (error) {
      state.view?.answer.append(el("div", "error", String(error.message)));
    }
  };
  dialog.showModal();
  input.focus();
}

function openFeedback(taskId, rating) {
  const dialog = $("feedback-dialog");
  $("feedback-comment").value = "";
  dialog.returnValue = "";
  dialog.onclose = async () => {
    if (dialog.returnValue !== "send") return;
    await api("/critic/feedback", { method: "POST", body: JSON.stringify({ task_id: taskId, rating, comment: $("feedback-comment").value }) }).catch(() => undefined);
  };
  dialog.showModal();
}

// ---- sidebar: conversations ----
async function refreshTasks() {
  try {
    const { conversations } = await api("/conversations?limit=50");
    const list = $("task-list");
    list.replaceChildren();
    for (const conversation of conversations) {
      const button = el("button", conversation.id === state.conversation ? "current" : null);
      button.type = "button";
      button.dataset.id = conversation.id;
      const count = conversation.tasks === 1 ? "1 message" : `${conversation.tasks} messages`;
      button.append(el("span", null, conversation.title.length > 60 ? `${conversation.title.slice(0, 57)}…` : conversation.title), el("span", "state", `${count} · ${conversation.state.replace("_", " ")}`));
      button.addEventListener("click", () => {
        document.body.classList.remove("sidebar-open");
        openConversation(conversation.id);
      });
      const item = el("li");
      item.append(button);
      list.append(item);
    }
  } catch (error) {
    $("connection").textContent = String(error.message);
  }
}

/**
 * Shows a whole conversation: its earlier tasks drawn from their stored events, the latest one
 * streamed (it may still run or wait for an answer). New messages continue it.
 */
async function openConversation(id) {
  const { tasks } = await api(`/conversations/${encodeURIComponent(id)}`);
  state.conversation = id;
  const sessionOf = tasks[0]?.session_id ?? null;
  // A task sent without a conversation starts one when it is continued.
  state.session = sessionOf ?? newSessionId();
  sessionStorage.setItem("ducklm-session", state.session);
  messages.replaceChildren();
  for (const task of tasks.slice(0, -1)) {
    const view = taskView(task.id, task.text);
    try {
      const { events } = await api(`/tasks/${encodeURIComponent(task.id)}/events?since=1&limit=10000`);
      for (const event of events) applyEvent(view, event, { live: false });
    } catch (error) {
      // One turn that cannot be drawn does not hide the rest of the conversation.
      view.answer.append(el("span", "error", `This turn could not be shown: ${error.message}`));
    }
  }
  const latest = tasks.at(-1);
  if (latest) openTask(latest.id, latest.text, { keepMessages: true });
  for (const button of document.querySelectorAll("#task-list button")) button.classList.toggle("current", button.dataset.id === id);
}

// ---- composer ----
async function send() {
  const input = $("input");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  try {
    const { task_id } = await api("/chat", { method: "POST", body: JSON.stringify({ text, session_id: state.session }) });
    state.conversation = state.session;
    openTask(task_id, text, { keepMessages: true });
    setRunning(true);
    refreshTasks();
  } catch (error) {
    // A refused task (a full line) was not recorded: the text stays, to send again.
    if (!input.value) input.value = text;
    messages.append(el("div", "message assistant error", String(error.message)));
  }
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
// The side panels: one open at a time.
const PANELS = { events: "events-panel", memory: "memory-panel", approvals: "approvals-panel" };
function togglePanel(name) {
  for (const [other, id] of Object.entries(PANELS)) {
    const open = other === name && $(id).hidden;
    $(id).hidden = !open;
    $(`toggle-${other}`).setAttribute("aria-pressed", String(open));
  }
  if (!$("memory-panel").hidden) showMemory();
  if (!$("approvals-panel").hidden) showApprovals();
}
for (const name of Object.keys(PANELS)) $(`toggle-${name}`).addEventListener("click", () => togglePanel(name));

// ---- memory and remembered approvals ----
function panelButton(label, onClick, className) {
  const button = el("button", className ?? null, label);
  button.type = "button";
  button.addEventListener("click", onClick);
  return button;
}

async function showMemory() {
  const list = $("memory-list");
  const query = $("memory-query").value.trim();
  try {
    const body = await api(query ? `/memory?query=${encodeURIComponent(query)}&limit=50` : "/memory?limit=50");
    const entries = query ? body.hits.map((hit) => hit.entry) : body.entries;
    list.replaceChildren();
    if (entries.length === 0) list.append(el("li", "note", query ? "Nothing remembered about that." : "Nothing remembered yet."));
    for (const entry of entries) {
      const item = el("li");
      item.dataset.id = String(entry.id);
      item.append(el("div", null, entry.text), el("div", "meta", `#${entry.id} · ${entry.kind} · weight ${Number(entry.weight.toFixed(2))}${entry.pinned ? " · pinned" : ""}`));
      const actions = el("div", "actions");
      actions.append(
        panelButton(entry.pinned ? "Unpin" : "Pin", async () => {
          await api(`/memory/${entry.id}/pin`, { method: "POST", body: JSON.stringify({ pinned: !entry.pinned }) });
          showMemory();
        }),
        panelButton("Forget", async () => {
          await api(`/memory/${entry.id}`, { method: "DELETE" });
          showMemory();
        }, "danger"),
      );
      item.append(actions);
      list.append(item);
    }
  } catch (error) {
    list.replaceChildren(el("li", "error", String(error.message)));
  }
}

async function showApprovals() {
  const list = $("approvals-list");
  try {
    const { approvals } = await api("/approvals");
    const active = approvals.filter((approval) => !approval.revoked_at);
    list.replaceChildren();
    if (active.length === 0) list.append(el("li", "note", "No remembered approvals: every command no rule allows is asked."));
    for (const approval of active) {
      const item = el("li");
      item.dataset.id = approval.id;
      const command = el("code", null, approval.command);
      item.append(command, el("div", "meta", `in ${approval.cwd} · ${approval.category.replace("_", " ")} · ${approval.expires_at ? `until ${new Date(approval.expires_at).toLocaleString()}` : "until revoked"}`));
      const actions = el("div", "actions");
      actions.append(panelButton("Revoke", async () => {
        await api(`/approvals/${encodeURIComponent(approval.id)}`, { method: "DELETE" });
        showApprovals();
      }, "danger"));
      item.append(actions);
      list.append(item);
    }
  } catch (error) {
    list.replaceChildren(el("li", "error", String(error.message)));
  }
}

$("memory-search").addEventListener("submit", (event) => {
  event.preventDefault();
  showMemory();
});
$("toggle-sidebar").addEventListener("click", (event) => {
  event.stopPropagation();
  document.body.classList.toggle("sidebar-open");
});
// On a phone the task list is a drawer: Esc or a tap beside it closes it.
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") document.body.classList.remove("sidebar-open");
});
document.addEventListener("click", (event) => {
  if (document.body.classList.contains("sidebar-open") && !$("sidebar").contains(event.target)) document.body.classList.remove("sidebar-open");
});
$("stop").addEventListener("click", async () => {
  if (!state.taskId) return;
  $("stop").disabled = true;
  try {
    await api(`/tasks/${encodeURIComponent(state.taskId)}/cancel`, { method: "POST", body: JSON.stringify({ reason: "stopped in the web chat" }) });
  } catch (error) {
    state.view?.answer.append(el("div", "error", String(error.message)));
  } finally {
    $("stop").disabled = false;
  }
});
$("new-chat").addEventListener("click", () => {
  sessionStorage.removeItem("ducklm-session");
  state.session = sessionId();
  state.taskId = null;
  state.conversation = null;
  state.socket?.close();
  state.socket = null;
  messages.replaceChildren(el("p", "hint", "New conversation."));
  history.replaceState(null, "", "#");
});

// Nothing works without a session, which only a one-time login link gives: say how to get one.
async function loggedIn() {
  const { authenticated } = await api("/session").catch(() => ({ authenticated: false }));
  if (authenticated) return true;
  $("login-notice").hidden = false;
  $("input").disabled = true;
  $("send").disabled = true;
  $("connection").textContent = "not logged in";
  return false;
}

// After a reload, pick up the task that was open: stored events first, then live, no duplicates.
const opened = new URLSearchParams(location.hash.slice(1));
if (await loggedIn()) {
  refreshTasks();
  if (opened.get("conversation")) openConversation(opened.get("conversation")).catch((error) => messages.append(el("div", "message assistant error", String(error.message))));
  else if (opened.get("task")) openTask(opened.get("task"));
}
