// The Anthropic endpoints through the official `@anthropic-ai/sdk` client.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, referenceChats, modelName } from './server.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Anthropic({ baseURL: server.url, apiKey: 'unused' });
});
after(async () => server?.stop());

function anthropicRequest(chat) {
  const system = chat.messages.find((m) => m.role === 'system')?.content;
  const messages = chat.messages.filter((m) => m.role !== 'system');
  return {
    model: modelName, max_tokens: 16, temperature: 0, messages, thinking: { type: 'disabled' },
    ...(system ? { system } : {}),
  };
}

for (const [i, chat] of referenceChats.entries()) {
  test(`messages ${i}: non-streaming reproduces the reference`, async () => {
    const r = await client.messages.create(anthropicRequest(chat));
    assert.equal(r.type, 'message');
    assert.equal(r.role, 'assistant');
    assert.match(r.id, /^msg_/);
    assert.equal(r.content.length, 1);
    assert.equal(r.content[0].type, 'text');
    assert.equal(r.content[0].text, chat.new_text);
    assert.equal(r.stop_reason, 'max_tokens');
    assert.equal(r.usage.input_tokens, chat.prompt_ids.length);
    assert.equal(r.usage.output_tokens, 16);
  });

  test(`messages ${i}: streaming events and text`, async () => {
    const stream = client.messages.stream(anthropicRequest(chat));
    const types = [];
    let text = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    }
    const final = await stream.finalMessage();
    assert.equal(text, chat.new_text);
    assert.equal(final.content[0].text, chat.new_text);
    assert.equal(final.stop_reason, 'max_tokens');
    assert.equal(types[0], 'message_start');
    assert.equal(types.at(-1), 'message_stop');
    assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'));
    assert.ok(types.includes('message_delta'));
  });
}

test('count_tokens matches the prompt of the reference', async () => {
  for (const chat of referenceChats) {
    const req = anthropicRequest(chat);
    delete req.max_tokens;
    delete req.temperature;
    const r = await client.messages.countTokens(req);
    assert.equal(r.input_tokens, chat.prompt_ids.length);
  }
});

test('stop_sequences give stop_reason stop_sequence', async () => {
  const chat = referenceChats[0];
  const r = await client.messages.create({ ...anthropicRequest(chat), stop_sequences: [' Contribution'] });
  assert.equal(r.stop_reason, 'stop_sequence');
  assert.equal(r.stop_sequence, ' Contribution');
  assert.equal(r.content[0].text, chat.new_text.slice(0, chat.new_text.indexOf(' Contribution')));
});

test('tool_use and tool_result blocks are accepted', async () => {
  const r = await client.messages.create({
    model: modelName, max_tokens: 2,
    tools: [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '21 C' }] },
    ],
  });
  assert.equal(r.type, 'message');
});

test('errors in Anthropic shape', async () => {
  await assert.rejects(client.messages.create({ model: 'claude-nonexistent', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 404 && e.error?.type === 'error' && e.error?.error?.type === 'not_found_error');
  await assert.rejects(client.messages.create({ model: modelName, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 400 && e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.error.error.message));
  await assert.rejects(client.messages.create({ model: modelName, max_tokens: 4, messages: [{ role: 'robot', content: 'x' }] }),
    (e) => e.status === 400 && /messages\[0\]\.role/.test(e.error.error.message));
});
