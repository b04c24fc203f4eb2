// The OpenAI endpoints through the official `openai` client, against the embedded default model
// (qwen3-next-e2e): at temperature 0 the output equals transformers' greedy reference.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, referenceChats, modelName, greedy, chatToolCalls } from './server.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused' });
});
after(async () => server?.stop());

const noThinking = { chat_template_kwargs: { enable_thinking: false } };

test('models and health', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [modelName]);
  const health = await (await fetch(`${server.url}/health`)).json();
  assert.equal(health.status, 'ok');
});

for (const [i, chat] of referenceChats.entries()) {
  test(`chat ${i}: non-streaming reproduces the reference ids`, async () => {
    const r = await client.chat.completions.create({
      model: modelName, messages: chat.messages, ...greedy, ...noThinking, return_token_ids: true,
    });
    const choice = r.choices[0];
    assert.deepEqual(choice.token_ids, chat.new_ids);
    assert.equal(choice.message.content, chat.new_text);
    assert.equal(choice.finish_reason, 'length');
    assert.equal(r.usage.prompt_tokens, chat.prompt_ids.length);
    assert.equal(r.usage.completion_tokens, 16);
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
  });

  test(`chat ${i}: streaming reproduces the reference ids and text`, async () => {
    const stream = await client.chat.completions.create({
      model: modelName, messages: chat.messages, ...greedy, ...noThinking, stream: true,
      stream_options: { include_usage: true }, return_token_ids: true,
    });
    let text = '';
    const ids = [];
    let finish = null;
    let usage = null;
    let first = true;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices.length === 0) continue;
      const c = chunk.choices[0];
      if (first) assert.equal(c.delta.role, 'assistant');
      first = false;
      text += c.delta.content ?? '';
      ids.push(...(c.token_ids ?? []));
      if (c.finish_reason) finish = c.finish_reason;
    }
    assert.deepEqual(ids, chat.new_ids);
    assert.equal(text, chat.new_text);
    assert.equal(finish, 'length');
    assert.equal(usage.prompt_tokens, chat.prompt_ids.length);
    assert.equal(usage.completion_tokens, 16);
  });
}

test('completions with token ids reproduce the reference', async () => {
  const chat = referenceChats[0];
  const r = await client.completions.create({ model: modelName, prompt: chat.prompt_ids, max_tokens: 16, temperature: 0 });
  assert.equal(r.choices[0].text, chat.new_text);
  assert.equal(r.usage.prompt_tokens, chat.prompt_ids.length);
  const stream = await client.completions.create({
    model: modelName, prompt: chat.prompt_ids, max_tokens: 16, temperature: 0, stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, chat.new_text);
});

test('responses API: text and streaming events', async () => {
  const chat = referenceChats[1];
  const system = chat.messages.find((m) => m.role === 'system').content;
  const user = chat.messages.find((m) => m.role === 'user').content;
  const r = await client.responses.create({
    model: modelName, instructions: system, input: user, temperature: 0, max_output_tokens: 16, ...noThinking,
  });
  assert.equal(r.object, 'response');
  assert.equal(r.output_text, chat.new_text);
  assert.equal(r.usage.input_tokens, chat.prompt_ids.length);
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');

  const stream = await client.responses.create({
    model: modelName, instructions: system, input: [{ role: 'user', content: user }], temperature: 0,
    max_output_tokens: 16, stream: true, ...noThinking,
  });
  const types = [];
  let text = '';
  let lastSequence = -1;
  for await (const event of stream) {
    types.push(event.type);
    assert.ok(event.sequence_number > lastSequence);
    lastSequence = event.sequence_number;
    if (event.type === 'response.output_text.delta') text += event.delta;
  }
  assert.equal(text, chat.new_text);
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_item.added'));
  assert.ok(types.includes('response.output_text.done'));
  assert.equal(types.at(-1), 'response.incomplete');
});

test('seeded sampling is reproducible', async () => {
  const chat = referenceChats[0];
  const req = { model: modelName, messages: chat.messages, temperature: 1.0, top_p: 0.9, seed: 1234, max_tokens: 12, return_token_ids: true };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.deepEqual(a.choices[0].token_ids, b.choices[0].token_ids);
});

test('stop strings end the output and never leak', async () => {
  const chat = referenceChats[0];
  const stopAt = chat.new_text.indexOf(' Contribution');
  assert.ok(stopAt > 0);
  const r = await client.chat.completions.create({
    model: modelName, messages: chat.messages, ...greedy, ...noThinking, stop: [' Contribution'],
  });
  assert.equal(r.choices[0].message.content, chat.new_text.slice(0, stopAt));
  assert.equal(r.choices[0].finish_reason, 'stop');
  const stream = await client.chat.completions.create({
    model: modelName, messages: chat.messages, ...greedy, ...noThinking, stop: ['Contrib'], stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, chat.new_text.slice(0, chat.new_text.indexOf('Contrib')));
});

test('logprobs and top_logprobs', async () => {
  const chat = referenceChats[0];
  const r = await client.chat.completions.create({
    model: modelName, messages: chat.messages, ...greedy, ...noThinking, max_tokens: 4, logprobs: true, top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const entry of content) {
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-5);
  }
});

test('logit_bias bans the greedy token', async () => {
  const chat = referenceChats[0];
  const banned = chat.new_ids[0];
  const r = await client.chat.completions.create({
    model: modelName, messages: chat.messages, ...noThinking, temperature: 0, max_tokens: 1,
    logit_bias: { [banned]: -100 }, return_token_ids: true,
  });
  assert.notEqual(r.choices[0].token_ids[0], banned);
});

test('tools are rendered into the prompt and tool results are accepted', async () => {
  const chat = referenceChats[0];
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const plain = await client.chat.completions.create({ model: modelName, messages: chat.messages, max_tokens: 1 });
  const withTools = await client.chat.completions.create({ model: modelName, messages: chat.messages, tools, max_tokens: 1 });
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 20);
  const followUp = await client.chat.completions.create({
    model: modelName, tools, max_tokens: 2,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
    ],
  });
  assert.equal(followUp.choices.length, 1);
  const none = await client.chat.completions.create({ model: modelName, messages: chat.messages, tools, tool_choice: 'none', max_tokens: 1 });
  assert.equal(none.usage.prompt_tokens, plain.usage.prompt_tokens);
});

test('constrained decoding: choice, regex and GBNF grammars', async () => {
  const chat = referenceChats[0];
  const base = { model: modelName, messages: chat.messages, max_tokens: 40, temperature: 1.0, seed: 7 };
  for (let i = 0; i < 3; i++) {
    const r = await client.chat.completions.create({ ...base, seed: i, choice: ['red', 'green', 'blue'] });
    assert.ok(['red', 'green', 'blue'].includes(r.choices[0].message.content), r.choices[0].message.content);
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
  const re = await client.chat.completions.create({ ...base, regex: '[0-9]{3}-[a-z]{2}' });
  assert.match(re.choices[0].message.content, /^[0-9]{3}-[a-z]{2}$/);
  const grammar = 'root ::= "{\\"n\\": " [0-9]{1,3} ", \\"ok\\": " ("true" | "false") "}"';
  const stream = await client.chat.completions.create({ ...base, grammar, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  const parsed = JSON.parse(text);
  assert.equal(typeof parsed.n, 'number');
  assert.equal(typeof parsed.ok, 'boolean');
  const completion = await client.completions.create({ model: modelName, prompt: 'Answer:', max_tokens: 10, choice: ['yes', 'no'] });
  assert.ok(['yes', 'no'].includes(completion.choices[0].text));
});

test('malformed grammars are 400s with the position', async () => {
  const chat = referenceChats[0];
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: chat.messages, grammar: 'root ::= "a" bogus' }),
    (e) => e.status === 400 && e.param === 'grammar' && /line 1, column \d+/.test(e.message) && /bogus/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: chat.messages, regex: '[a-' }),
    (e) => e.status === 400 && e.param === 'regex');
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: chat.messages, regex: 'a', choice: ['b'] }),
    (e) => e.status === 400 && /cannot be combined/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: chat.messages,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', not: {} } } } }),
    (e) => e.status === 400 && e.param === 'response_format.json_schema.schema' && /\/not/.test(e.message));
});

test('response_format json_schema: the output parses and validates', async () => {
  const chat = referenceChats[1];
  const schema = {
    type: 'object',
    properties: {
      answer: { type: 'integer', minimum: 0, maximum: 99 },
      sure: { type: 'boolean' },
      unit: { enum: ['apples', 'pears'] },
      tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 },
    },
    required: ['answer', 'sure', 'unit'],
    additionalProperties: false,
  };
  for (let seed = 0; seed < 3; seed++) {
    const r = await client.chat.completions.create({
      model: modelName, messages: chat.messages, max_tokens: 120, temperature: 1.0, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema } },
    });
    const out = JSON.parse(r.choices[0].message.content);
    assert.ok(Number.isInteger(out.answer) && out.answer >= 0 && out.answer <= 99, JSON.stringify(out));
    assert.equal(typeof out.sure, 'boolean');
    assert.ok(['apples', 'pears'].includes(out.unit));
    for (const key of Object.keys(out)) assert.ok(key in schema.properties, key);
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
});

test('tool_choice required and named produce valid calls to the tools', async () => {
  const chat = referenceChats[0];
  const tools = [
    { type: 'function', function: { name: 'get_weather', strict: true, parameters: { type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'], additionalProperties: false } } },
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object',
      properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
  ];
  for (const [i, tool_choice] of ['required', { type: 'function', function: { name: 'get_time' } }].entries()) {
    for (const stream of [false, true]) {
      const req = { model: modelName, messages: chat.messages, tools, tool_choice, max_tokens: 80, temperature: 1.0, seed: i };
      const { calls, finish } = await chatToolCalls(client, req, stream);
      assert.equal(finish, 'tool_calls');
      assert.equal(calls.length, 1);
      const { name, arguments: text } = calls[0].function;
      const args = JSON.parse(text);
      if (typeof tool_choice === 'object') assert.equal(name, 'get_time');
      if (name === 'get_weather') {
        assert.equal(typeof args.city, 'string');
        assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7);
      } else {
        assert.equal(name, 'get_time');
        assert.ok(['UTC', 'CET'].includes(args.zone));
      }
    }
  }
});
