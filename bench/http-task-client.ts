// The HTTP client of bench/http-task, in a process of its own, so that the server's process spends
// its time on serving alone. Started with IPC by the bench; for each `{ url, body, tasks, token }` it
// is sent, it posts `body` `tasks` times, one after another on one kept-alive connection, and answers
// `{ wallUs }`: microseconds per request, from its first byte sent to the last of the last answer.
//
//   (spawned by bench/http-task.ts)
import { Agent, request } from "node:http";

interface Job {
  url: string;
  body: string;
  tasks: number;
  token: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function post(job: Job): Promise<void> {
  return new Promise((resolve, reject) => {
    const sent = request(job.url, { method: "POST", agent, headers: { authorization: `Bearer ${job.token}`, "content-type": "application/json", "content-length": Buffer.byteLength(job.body) } }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        if (response.statusCode !== 200 || !text.includes(`"state":"completed"`)) reject(new Error(`${response.statusCode}: ${text.slice(0, 300)}`));
        else resolve();
      });
    });
    sent.on("error", reject);
    sent.end(job.body);
  });
}

process.on("message", (job: Job) => {
  void (async () => {
    const started = performance.now();
    for (let i = 0; i < job.tasks; i += 1) await post(job);
    process.send!({ wallUs: ((performance.now() - started) * 1000) / job.tasks });
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
});
process.send!({ ready: true });
