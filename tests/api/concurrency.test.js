// Continuous batching: concurrent streams equal the same requests run one at a time; cancellation
// (of a stream, or of a non-streaming request whose client hangs up) frees capacity at once; a full
// queue answers 429.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, referenceChats, modelName, metrics, waitFor } from './server.js';

const servers = [];
after(async () => Promise.all(servers.map((s) => s.stop())));

async function streamText(client, req) {
  const stream = await client.chat.completions.create({ ...req, stream: true });
  let text = '';
  const ids = [];
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    ids.push(...(chunk.choices[0]?.token_ids ?? []));
  }
  return { text, ids };
}

test('8 concurrent streams equal sequential runs', async () => {
  const server = await startServer(['--max-concurrency', '8']);
  servers.push(server);
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused' });
  const requests = [];
  for (let i = 0; i < 8; i++) {
    const chat = referenceChats[i % 2];
    requests.push({ model: modelName, messages: chat.messages, temperature: 0, max_tokens: 10 + 3 * i,
      chat_template_kwargs: { enable_thinking: i % 3 === 0 }, return_token_ids: true });
  }
  const sequential = [];
  for (const req of requests) sequential.push(await streamText(client, req));
  const concurrent = await Promise.all(requests.map((req) => streamText(client, req)));
  assert.deepEqual(concurrent, sequential);
  for (const [i, r] of sequential.entries()) assert.equal(r.ids.length, requests[i].max_tokens);
  const m = await metrics(server);
  assert.equal(m.infernix_requests_finished_total, 16);
  assert.equal(m.infernix_running_requests, 0);
});

test('cancellation frees the slot; a full queue gets 429', async () => {
  const server = await startServer(['--max-concurrency', '1', '--max-queue', '1']);
  servers.push(server);
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  const chat = referenceChats[0];
  const long = { model: modelName, messages: chat.messages, temperature: 0, max_tokens: 20000 };

  // A occupies the only slot.
  const controllerA = new AbortController();
  const streamA = await client.chat.completions.create({ ...long, stream: true }, { signal: controllerA.signal });
  const iterA = streamA[Symbol.asyncIterator]();
  await iterA.next();  // the role chunk
  await iterA.next();  // a generated token: A holds the slot
  assert.ok(await waitFor(async () => (await metrics(server)).infernix_running_requests === 1));
  // B waits in the queue.
  const controllerB = new AbortController();
  const pendingB = client.chat.completions.create({ ...long, max_tokens: 5, stream: true }, { signal: controllerB.signal });
  assert.ok(await waitFor(async () => (await metrics(server)).infernix_queue_length === 1));
  // C finds the queue full.
  await assert.rejects(client.chat.completions.create({ ...long, max_tokens: 5 }), (e) => e.status === 429);
  // Cancelling A lets B run to completion.
  controllerA.abort();
  const streamB = await pendingB;
  let chunks = 0;
  for await (const chunk of streamB) chunks += chunk.choices.length;
  assert.ok(chunks > 0);
  assert.ok(await waitFor(async () => (await metrics(server)).infernix_requests_cancelled_total === 1));
  const m = await metrics(server);
  assert.equal(m.infernix_running_requests, 0);
  assert.equal(m.infernix_requests_rejected_total, 1);
});

test('a non-streaming request whose client hangs up is cancelled', async () => {
  const server = await startServer(['--max-concurrency', '1']);
  servers.push(server);
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  const chat = referenceChats[0];
  const controller = new AbortController();
  const pending = client.chat.completions.create({ model: modelName, messages: chat.messages, temperature: 0,
    max_tokens: 20000 }, { signal: controller.signal });
  assert.ok(await waitFor(async () => (await metrics(server)).infernix_generation_tokens_total > 0));
  controller.abort();
  await assert.rejects(pending);
  assert.ok(await waitFor(async () => (await metrics(server)).infernix_requests_cancelled_total === 1));
  // The slot is free: the next request runs.
  const r = await client.chat.completions.create({ model: modelName, messages: chat.messages, max_tokens: 2 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok((await metrics(server)).infernix_generation_tokens_total < 20000);
});
