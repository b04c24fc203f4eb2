// Starts `infernix serve` on a free port for a test file and stops it afterwards.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const binary = process.env.INFERNIX_BINARY ?? path.join(repoRoot, 'build', 'ci', 'bin', 'infernix');
export const modelName = 'qwen3-next-e2e';
// The greedy reference of the embedded default model (transformers), see tests/fixtures/README.md.
export const referenceChats = JSON.parse(
  readFileSync(path.join(repoRoot, 'tests', 'fixtures', 'models', 'qwen3-next-e2e-reference-chat.json'), 'utf8'));

export async function startServer(extraArgs = []) {
  const child = spawn(binary, ['serve', '--port', '0', '--threads', '2', ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60000);
    const onData = (chunk) => {
      output += chunk.toString();
      const m = output.match(/ on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c) => { output += c.toString(); });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
  return {
    url,
    baseURL: `${url}/v1`,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
    alive: () => child.exitCode === null,
  };
}

export async function metrics(server) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^(\w+) ([\d.eE+-]+)$/);
    if (m) values[m[1]] = Number(m[2]);
  }
  return values;
}

export async function waitFor(predicate, timeoutMs = 20000) {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (await predicate()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

// Greedy, no EOS stop within 16 tokens, thinking off: reproduces the reference chat.
export const greedy = { temperature: 0, max_tokens: 16 };

// The tool calls and finish reason of one chat completion, whole or streamed (the streamed deltas
// joined per call index).
export async function chatToolCalls(client, req, stream) {
  if (!stream) {
    const r = await client.chat.completions.create(req);
    return { calls: r.choices[0].message.tool_calls ?? [], finish: r.choices[0].finish_reason };
  }
  const byIndex = {};
  let finish;
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.finish_reason) finish = c.finish_reason;
    for (const d of c.delta.tool_calls ?? []) {
      byIndex[d.index] ??= { function: { name: '', arguments: '' } };
      if (d.function?.name) byIndex[d.index].function.name = d.function.name;
      byIndex[d.index].function.arguments += d.function?.arguments ?? '';
    }
  }
  return { calls: Object.values(byIndex), finish };
}
