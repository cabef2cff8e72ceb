import type { Runtime } from "../runtime/create-runtime.js";

/** `ducklm permissions list`: remembered approvals, active and past. */
export function permissionsListCommand(runtime: Runtime, options: { json?: boolean }): number {
  const approvals = runtime.approvals.list();
  if (options.json) {
    for (const approval of approvals) console.log(JSON.stringify(approval));
    return 0;
  }
  if (approvals.length === 0) {
    console.log("no remembered approvals");
    return 0;
  }
  const now = new Date().toISOString();
  for (const approval of approvals) {
    const state = approval.revoked_at ? `revoked ${approval.revoked_at}` : approval.expires_at && approval.expires_at <= now ? `expired ${approval.expires_at}` : approval.expires_at ? `until ${approval.expires_at}` : "active";
    console.log(`${approval.id}  ${state.padEnd(32)}  in ${approval.cwd}:  ${approval.command}`);
  }
  return 0;
}

/** `ducklm permissions revoke ID`. */
export function permissionsRevokeCommand(runtime: Runtime, id: string): number {
  runtime.loop.revokeApproval(id, "cli");
  console.log(`revoked ${id}`);
  return 0;
}

/** `ducklm feedback --task ID [--step S] up|down [comment]`. */
export function feedbackCommand(runtime: Runtime, rating: string, comment: string[], options: { task: string; step?: string }): number {
  if (rating !== "up" && rating !== "down") {
    console.error("error DUCK_ERR_INVALID_INPUT: the rating is `up` or `down`");
    return 2;
  }
  runtime.loop.recordFeedback(
    options.task,
    { target: options.step ? "step" : "answer", step_id: options.step ?? null, rating, comment: comment.join(" ") },
    "cli",
  );
  console.log(`feedback recorded on task ${options.task}${options.step ? `, step ${options.step}` : ""}`);
  return 0;
}
