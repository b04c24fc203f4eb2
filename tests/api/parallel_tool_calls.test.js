// parallel_tool_calls: false (Chat Completions, Responses) and Anthropic's disable_parallel_tool_use:
// the turn ends with its first complete tool call: generation stops there and one call is returned.
// The model has random weights, so calls are made to happen: a `grammar` that writes two calls, or
// strict tools (a call the model opens is constrained) with logit_bias on <tool_call> so that it opens
// one after another.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, referenceChats, modelName, chatToolCalls } from './server.js';

const TOOL_CALL_TOKEN = 151657;  // <tool_call> in the Qwen3 vocabulary

const timeParams = { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'],
  additionalProperties: false };
const messages = referenceChats[1].messages;

let server;
let openai;
let anthropic;
before(async () => {
  server = await startServer();
  openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
});
after(async () => server?.stop());

// Two calls in the Qwen3 (JSON) form, written by a grammar: the calls themselves are not constrained
// (the tool is not strict), only the text is forced.
const call = (zone) => `"<tool_call>\\n{\\"name\\": \\"get_time\\", \\"arguments\\": {\\"zone\\": \\"${zone}\\"}}\\n</tool_call>"`;
const twoCalls = `root ::= ${call('UTC')} "\\n" ${call('CET')}`;

test('chat: parallel_tool_calls false returns the first call and stops generating there', async () => {
  const tools = [{ type: 'function', function: { name: 'get_time', parameters: timeParams } }];
  for (const stream of [false, true]) {
    const base = { model: modelName, messages, tools, max_tokens: 200, temperature: 1.0, seed: 1, grammar: twoCalls };
    const both = await chatToolCalls(openai, base, stream);
    assert.deepEqual(both.calls.map((c) => JSON.parse(c.function.arguments).zone), ['UTC', 'CET']);
    const one = await chatToolCalls(openai, { ...base, parallel_tool_calls: false }, stream);
    assert.equal(one.finish, 'tool_calls');
    assert.equal(one.calls.length, 1);
    assert.equal(one.calls[0].function.name, 'get_time');
    assert.deepEqual(JSON.parse(one.calls[0].function.arguments), { zone: 'UTC' });
  }
  // Greedy, the same tokens up to the end of the first call, and none after it.
  const base = { model: modelName, messages, tools, max_tokens: 200, temperature: 0, grammar: twoCalls,
    return_token_ids: true };
  const both = (await openai.chat.completions.create(base)).choices[0];
  const one = await openai.chat.completions.create({ ...base, parallel_tool_calls: false });
  const ids = one.choices[0].token_ids;
  assert.deepEqual(ids, both.token_ids.slice(0, ids.length));
  assert.ok(ids.length < both.token_ids.length / 2 + 2, `${ids.length} of ${both.token_ids.length} tokens`);
  assert.equal(one.usage.completion_tokens, ids.length);
  assert.equal(one.choices[0].message.content, null);
});

test('chat: strict tools under auto (the lazy call grammar) end after one call too', async () => {
  const tools = [{ type: 'function', function: { name: 'get_time', strict: true, parameters: timeParams } }];
  for (const stream of [false, true]) {
    const base = { model: modelName, messages, tools, tool_choice: 'auto', max_tokens: 150, temperature: 1.0, seed: 2,
      logit_bias: { [TOOL_CALL_TOKEN]: 100 } };
    const many = await chatToolCalls(openai, base, stream);
    assert.ok(many.calls.length >= 2, `${many.calls.length} calls`);
    const one = await chatToolCalls(openai, { ...base, parallel_tool_calls: false }, stream);
    assert.equal(one.finish, 'tool_calls');
    assert.equal(one.calls.length, 1);
    assert.ok(['UTC', 'CET'].includes(JSON.parse(one.calls[0].function.arguments).zone));
  }
});

test('responses: parallel_tool_calls false gives one function_call item and is echoed', async () => {
  // strict left out: strict when the schema allows (the lazy call grammar), as OpenAI documents.
  const tools = [{ type: 'function', name: 'get_time', parameters: timeParams }];
  const base = { model: modelName, input: messages.filter((m) => m.role !== 'system'), tools, max_output_tokens: 150,
    temperature: 1.0, seed: 3, logit_bias: { [TOOL_CALL_TOKEN]: 100 } };
  const many = await openai.responses.create(base);
  assert.equal(many.parallel_tool_calls, true);
  assert.ok(many.output.filter((o) => o.type === 'function_call').length >= 2);
  const one = await openai.responses.create({ ...base, parallel_tool_calls: false });
  assert.equal(one.parallel_tool_calls, false);
  assert.equal(one.status, 'completed');
  const calls = one.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.ok(['UTC', 'CET'].includes(JSON.parse(calls[0].arguments).zone));
  // Streaming: one function_call item, and the final object says so.
  const events = [];
  for await (const e of await openai.responses.create({ ...base, parallel_tool_calls: false, stream: true })) events.push(e);
  assert.equal(events.filter((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call').length, 1);
  const done = events.at(-1);
  assert.equal(done.type, 'response.completed');
  assert.equal(done.response.parallel_tool_calls, false);
  assert.equal(done.response.output.filter((o) => o.type === 'function_call').length, 1);
});

test('anthropic: disable_parallel_tool_use is accepted, enforced and type-checked', async () => {
  const tools = [{ name: 'get_time', input_schema: timeParams }];
  for (const stream of [false, true]) {
    const req = { model: modelName, max_tokens: 100, temperature: 1.0, messages: messages.filter((m) => m.role !== 'system'),
      tools, tool_choice: { type: 'any', disable_parallel_tool_use: true } };
    const r = stream ? await anthropic.messages.stream(req).finalMessage() : await anthropic.messages.create(req);
    assert.equal(r.stop_reason, 'tool_use');
    assert.equal(r.content.filter((b) => b.type === 'tool_use').length, 1);
  }
  await assert.rejects(anthropic.messages.create({ model: modelName, max_tokens: 4, messages: [{ role: 'user', content: 'x' }],
    tools, tool_choice: { type: 'auto', disable_parallel_tool_use: 'yes' } }),
  (e) => e.status === 400 && /disable_parallel_tool_use/.test(e.error.error.message));
  await assert.rejects(openai.chat.completions.create({ model: modelName, messages, parallel_tool_calls: 'no' }),
    (e) => e.status === 400 && e.param === 'parallel_tool_calls');
});
