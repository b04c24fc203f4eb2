// Bad requests get the right status and the API's own error shape, and the server keeps serving.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, modelName } from './server.js';

let server;
before(async () => {
  server = await startServer(['--api-key', 'sekret', '--ctx-size', '256', '--max-body-bytes', '20000']);
});
after(async () => server?.stop());

async function post(path, body, headers = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sekret', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const hello = [{ role: 'user', content: 'hello' }];

test('OpenAI error shapes', async () => {
  let r = await post('/v1/chat/completions', '{"model": "x", "messages": [');
  assert.equal(r.status, 400);
  assert.equal(r.body.error.type, 'invalid_request_error');
  assert.match(r.body.error.message, /malformed JSON/);

  r = await post('/v1/chat/completions', { model: modelName, messages: hello, temperature: 'hot' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, 'temperature');

  r = await post('/v1/chat/completions', { model: modelName });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, 'messages');

  r = await post('/v1/chat/completions', { model: modelName, messages: [{ role: 'user', content: 5 }] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, 'messages[0].content');

  r = await post('/v1/chat/completions', { model: 'gpt-7', messages: hello });
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, 'model_not_found');

  r = await post('/v1/chat/completions', { model: modelName, messages: hello, max_tokens: 1000 });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /context is 256 tokens/);

  r = await post('/v1/chat/completions', { model: modelName, messages: [{ role: 'user', content: 'x'.repeat(30000) }] });
  assert.equal(r.status, 413);
  assert.equal(r.body.error.code, 'request_too_large');

  r = await post('/v1/chat/completions', { model: modelName, messages: hello }, { authorization: 'Bearer wrong' });
  assert.equal(r.status, 401);
  assert.equal(r.body.error.type, 'authentication_error');

  r = await post('/v1/chat/completions', { model: modelName, messages: hello, tools: [{ type: 'function', function: { name: 'f' } }],
    tool_choice: { type: 'function', function: { name: 'g' } } });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /'g'/);

  r = await post('/v1/nope', {});
  assert.equal(r.status, 404);
});

test('bodies that used to bring the server down are 400s', async () => {
  const plain = await startServer();  // no body-size limit in the way
  const send = async (path, body) => {
    const res = await fetch(`${plain.url}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: res.status, body: await res.json() };
  };
  try {
    // Nesting deep enough to overflow a worker's stack where request JSON is walked recursively (a
    // Responses echo of metadata is written back out).
    const n = 100000;
    let r = await send('/v1/responses', `{"model": "${modelName}", "input": "x", "max_output_tokens": 1, "metadata": {"a": ${'['.repeat(n)}${']'.repeat(n)}}}`);
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /deeper than 512 levels/);
    // A token id of the model's padded vocabulary, which the tokenizer has no text for.
    r = await send('/v1/chat/completions', { model: modelName, messages: hello, max_tokens: 2, logit_bias: { 151900: 100 } });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.param, 'logit_bias.151900');
    r = await send('/v1/chat/completions', { model: modelName, messages: hello, max_tokens: 2 });
    assert.equal(r.status, 200);
    assert.ok(plain.alive());
  } finally {
    await plain.stop();
  }
});

test('Anthropic error shapes', async () => {
  let r = await post('/v1/messages', '{oops');
  assert.equal(r.status, 400);
  assert.equal(r.body.type, 'error');
  assert.equal(r.body.error.type, 'invalid_request_error');
  r = await post('/v1/messages', { model: modelName, max_tokens: 4, messages: hello }, { authorization: '', 'x-api-key': 'bad' });
  assert.equal(r.status, 401);
  assert.equal(r.body.error.type, 'authentication_error');
  r = await post('/v1/messages', { model: modelName, max_tokens: 4, messages: hello }, { authorization: '', 'x-api-key': 'sekret' });
  assert.equal(r.status, 200);
});

test('the official client surfaces errors, and the server still serves', async () => {
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'sekret', maxRetries: 0 });
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: hello, top_p: 7 }),
    (e) => e.status === 400 && e.param === 'top_p');
  const ok = await client.chat.completions.create({ model: modelName, messages: hello, max_tokens: 3 });
  assert.equal(ok.choices[0].finish_reason, 'length');
  assert.ok(server.alive());
});

test('schemas nested too deep or too large are 400s naming the field, fast, and the server still serves', async () => {
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'sekret', maxRetries: 0 });
  const nested = (levels) => {
    let s = { type: 'string' };
    for (let i = 1; i < levels; i++) s = { type: 'object', properties: { a: s }, required: ['a'] };
    return s;
  };
  const deep = nested(65);  // one past the limit of 64
  const started = Date.now();
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: hello, max_tokens: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'deep', schema: deep } } }),
  (e) => e.status === 400 && e.param === 'response_format.json_schema.schema' &&
    /response_format\.json_schema\.schema: JSON schema \/properties\/a.*nested deeper than 64 levels/.test(e.message));
  await assert.rejects(client.responses.create({ model: modelName, input: 'hello', max_output_tokens: 2,
    text: { format: { type: 'json_schema', name: 'deep', schema: deep } } }),
  (e) => e.status === 400 && e.param === 'text.format.schema' && /nested deeper than 64 levels/.test(e.message));
  const tool = { type: 'function', function: { name: 'f', strict: true, parameters: deep } };
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: hello, max_tokens: 2,
    tools: [tool], tool_choice: 'required' }),
  (e) => e.status === 400 && e.param === 'tools' && /tools\[0\] \(f\): JSON schema .*nested deeper than 64 levels/.test(e.message));
  let r = await post('/v1/messages', { model: modelName, max_tokens: 2, messages: hello,
    output_format: { type: 'json_schema', schema: deep } }, { authorization: '', 'x-api-key': 'sekret' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.type, 'invalid_request_error');
  assert.match(r.body.error.message, /^output_format\.schema: .*nested deeper than 64 levels/);
  // Too many subschemas (the body limit here is 20,000 bytes: enum values count too, 2 bytes each).
  r = await post('/v1/chat/completions', { model: modelName, messages: hello, max_tokens: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'big', schema: { enum: Array(9000).fill(0) } } } });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, 'response_format.json_schema.schema');
  assert.match(r.body.error.message, /more than 8192 subschemas and enum values/);
  assert.ok(Date.now() - started < 10000, `refusals took ${Date.now() - started} ms`);
  // At the limit: accepted.
  const ok = await client.chat.completions.create({ model: modelName, messages: hello, max_tokens: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'deep', schema: nested(64) } } });
  assert.equal(ok.choices[0].finish_reason, 'length');
  assert.ok(server.alive());
});
