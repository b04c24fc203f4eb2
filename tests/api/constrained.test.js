// Constrained decoding through the official clients, beyond chat response_format (openai.test.js):
// Responses text.format, Anthropic tool_choice any/tool and output_config/output_format, strict
// tools under tool_choice auto (a grammar that starts at <tool_call>), XML-form tool calls (a model
// folder with a Qwen3-Coder-style template), and 400s with the error position in every API. The
// models have random weights, so unconstrained output is noise: whatever parses and validates here
// does so because of the grammar.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, referenceChats, modelName, binary, chatToolCalls } from './server.js';
import { assertValid } from './schema_check.js';

const TOOL_CALL_TOKEN = 151657;  // <tool_call> in the Qwen3 vocabulary

// Nested objects, enum, pattern, array, integer range.
const itemSchema = {
  type: 'object',
  properties: {
    id: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' },
    kind: { enum: ['fruit', 'veg'] },
    count: { type: 'integer', minimum: 1, maximum: 12 },
    where: { type: 'object', properties: { shelf: { type: 'integer', minimum: 0, maximum: 9 }, cold: { type: 'boolean' } },
      required: ['shelf', 'cold'], additionalProperties: false },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
  },
  required: ['id', 'kind', 'count', 'where'],
  additionalProperties: false,
};

const weatherParams = { type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'], additionalProperties: false };
const timeParams = { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'],
  additionalProperties: false };

let server;
let openai;
let anthropic;
before(async () => {
  server = await startServer();
  openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused' });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused' });
});
after(async () => server?.stop());

const messages = referenceChats[1].messages;
const userOnly = messages.filter((m) => m.role !== 'system');

test('Responses text.format json_schema: output_text parses and validates (streaming too)', async () => {
  for (let seed = 0; seed < 2; seed++) {
    const req = { model: modelName, input: userOnly, max_output_tokens: 400, temperature: 1.0, seed,
      text: { format: { type: 'json_schema', name: 'item', strict: true, schema: itemSchema } } };
    const r = await openai.responses.create(req);
    assert.equal(r.status, 'completed');
    assert.equal(r.text.format.type, 'json_schema');
    assertValid(assert, itemSchema, JSON.parse(r.output_text));
    const s = await openai.responses.create({ ...req, stream: true });
    let text = '';
    for await (const e of s) if (e.type === 'response.output_text.delta') text += e.delta;
    assertValid(assert, itemSchema, JSON.parse(text));
  }
  // json_object: any JSON value; noise may write one string forever, so a cut-off output is allowed
  // (reported as incomplete) but must still start as a JSON document (no text before it).
  for (let seed = 0; seed < 4; seed++) {
    const j = await openai.responses.create({ model: modelName, input: 'Say something.', max_output_tokens: 100,
      temperature: 1.0, seed, text: { format: { type: 'json_object' } } });
    if (j.status === 'completed') {
      assert.doesNotThrow(() => JSON.parse(j.output_text), j.output_text);
    } else {
      assert.equal(j.incomplete_details.reason, 'max_output_tokens');
      assert.match(j.output_text, /^[[{"0-9tfn-]/);
    }
  }
});

test('Anthropic output_config.format and the beta output_format: the text parses and validates', async () => {
  for (const shape of [{ output_config: { format: { type: 'json_schema', schema: itemSchema } } },
    { output_format: { type: 'json_schema', schema: itemSchema } }]) {
    const r = await anthropic.messages.create({ model: modelName, max_tokens: 400, temperature: 1.0, messages: userOnly,
      ...shape });
    assert.equal(r.stop_reason, 'end_turn');
    assert.equal(r.content.length, 1);
    assertValid(assert, itemSchema, JSON.parse(r.content[0].text));
  }
});

test('Anthropic tool_choice any and tool: tool_use input validates against input_schema', async () => {
  const tools = [{ name: 'get_weather', input_schema: weatherParams }, { name: 'get_time', input_schema: timeParams }];
  for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_time' }]) {
    for (const stream of [false, true]) {
      const req = { model: modelName, max_tokens: 100, temperature: 1.0, messages: userOnly, tools, tool_choice };
      let blocks;
      let stop;
      if (!stream) {
        const r = await anthropic.messages.create(req);
        blocks = r.content.filter((b) => b.type === 'tool_use');
        stop = r.stop_reason;
      } else {
        const final = await anthropic.messages.stream(req).finalMessage();
        blocks = final.content.filter((b) => b.type === 'tool_use');
        stop = final.stop_reason;
      }
      assert.equal(stop, 'tool_use');
      assert.equal(blocks.length, 1);
      if (tool_choice.type === 'tool') assert.equal(blocks[0].name, 'get_time');
      assertValid(assert, blocks[0].name === 'get_time' ? timeParams : weatherParams, blocks[0].input);
    }
  }
});

test('strict tools under tool_choice auto: a call the model opens is constrained to the end', async () => {
  // logit_bias makes the model open calls; the grammar (after logit_bias) writes them.
  const tools = [{ type: 'function', function: { name: 'get_weather', strict: true, parameters: weatherParams } },
    { type: 'function', function: { name: 'get_time', parameters: timeParams } }];
  for (let seed = 0; seed < 2; seed++) {
    const r = await openai.chat.completions.create({ model: modelName, messages, tools, tool_choice: 'auto',
      max_tokens: 60, temperature: 1.0, seed, logit_bias: { [TOOL_CALL_TOKEN]: 100 } });
    const calls = r.choices[0].message.tool_calls ?? [];
    assert.ok(calls.length >= 1, JSON.stringify(r.choices[0].message));
    for (const c of calls) {
      const args = JSON.parse(c.function.arguments);
      assert.ok(['get_weather', 'get_time'].includes(c.function.name), c.function.name);
      assertValid(assert, c.function.name === 'get_time' ? timeParams : weatherParams, args);
    }
  }
  // A forced call wins over response_format: the turn is a valid call.
  const both = await openai.chat.completions.create({ model: modelName, messages, tools, tool_choice: 'required',
    max_tokens: 60, temperature: 1.0, seed: 0, response_format: { type: 'json_object' } });
  assert.equal(both.choices[0].finish_reason, 'tool_calls');
  assert.equal(both.choices[0].message.tool_calls.length, 1);
  // strict: null is "not given" (not an error).
  const nullStrict = await openai.chat.completions.create({ model: modelName, messages, max_tokens: 2,
    tools: [{ type: 'function', function: { name: 'get_time', strict: null, parameters: timeParams } }] });
  assert.equal(nullStrict.choices.length, 1);
  // Without strict the same request is noise: no call parses.
  const loose = tools.map((t) => ({ ...t, function: { ...t.function, strict: false } }));
  const r = await openai.chat.completions.create({ model: modelName, messages, tools: loose, tool_choice: 'auto',
    max_tokens: 60, temperature: 1.0, seed: 0, logit_bias: { [TOOL_CALL_TOKEN]: 100 } });
  assert.equal((r.choices[0].message.tool_calls ?? []).length, 0);
});

test('Responses function tools: strict when left out if the schema allows, never a 400 for it', async () => {
  const bad = { type: 'object', properties: { host: { type: 'string', format: 'hostname' } } };
  // Left out: strict when compatible (the call grammar is armed), falling back for a schema it cannot enforce.
  for (const parameters of [timeParams, bad]) {
    const r = await openai.responses.create({ model: modelName, input: 'x', max_output_tokens: 4,
      tools: [{ type: 'function', name: 'f', parameters }] });
    assert.equal(r.object, 'response');
    assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  }
  // An explicit strict: true with a schema that cannot be enforced is the client's error.
  await assert.rejects(openai.responses.create({ model: modelName, input: 'x', max_output_tokens: 4,
    tools: [{ type: 'function', name: 'f', strict: true, parameters: bad }] }),
  (e) => e.status === 400 && e.param === 'tools' && /tools\[0\] \(f\).*\/properties\/host\/format/.test(e.message));
});

test('malformed schemas are 400s with the JSON pointer, in every API', async () => {
  const bad = { type: 'object', properties: { a: { type: 'string', format: 'hostname' } } };
  await assert.rejects(openai.responses.create({ model: modelName, input: 'x',
    text: { format: { type: 'json_schema', name: 'x', schema: bad } } }),
  (e) => e.status === 400 && e.param === 'text.format.schema' && /\/properties\/a\/format/.test(e.message));
  await assert.rejects(anthropic.messages.create({ model: modelName, max_tokens: 4, messages: userOnly,
    output_config: { format: { type: 'json_schema', schema: bad } } }),
  (e) => e.status === 400 && /output_config\.format\.schema.*\/properties\/a\/format/.test(e.error.error.message));
  await assert.rejects(openai.chat.completions.create({ model: modelName, messages, tool_choice: 'auto',
    tools: [{ type: 'function', function: { name: 'f', strict: true, parameters: bad } }] }),
  (e) => e.status === 400 && e.param === 'tools' && /tools\[0\] \(f\).*\/properties\/a\/format/.test(e.message));
  await assert.rejects(anthropic.messages.create({ model: modelName, max_tokens: 4, messages: userOnly,
    tools: [{ name: 'f', strict: true, input_schema: bad }], tool_choice: { type: 'any' } }),
  (e) => e.status === 400 && /\/properties\/a\/format/.test(e.error.error.message));
  await assert.rejects(openai.completions.create({ model: modelName, prompt: 'x', grammar: 'root ::= "a" (' }),
    (e) => e.status === 400 && e.param === 'grammar' && /line 1, column \d+/.test(e.message));
});

// A Qwen3-Coder-style template: tool calls as <function=...><parameter=...> blocks.
const coderTemplate = `{%- if tools %}<|im_start|>system
# Tools
{% for t in tools %}{{ (t.function if t.function is defined else t).name }}
{% endfor %}To call a function: <tool_call>
<function=NAME>
<parameter=NAME>
VALUE
</parameter>
</function>
</tool_call><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|im_start|>assistant
{{ message.content if message.content is string else '' }}
{%- for call in message.tool_calls | default([]) %}{%- set call = call.function if call.function is defined else call %}
<tool_call>
<function={{ call.name }}>
{% for arg, value in call.arguments | items %}<parameter={{ arg }}>
{{ value if value is string else value | tojson }}
</parameter>
{% endfor %}</function>
</tool_call>{% endfor %}<|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

test('XML-form tool calls (Qwen3-Coder/Qwen3.5 templates): required, named and strict auto', async () => {
  const fixture = path.resolve(path.dirname(binary), '..', 'fixtures', 'models', 'qwen3-e2e');
  const dir = mkdtempSync(path.join(tmpdir(), 'infernix-coder-'));
  const folder = path.join(dir, 'qwen3-coder-e2e');
  mkdirSync(folder);
  for (const f of ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
    symlinkSync(path.join(fixture, f), path.join(folder, f));
  writeFileSync(path.join(folder, 'chat_template.jinja'), coderTemplate);
  const coder = await startServer(['--model', folder]);
  try {
    const client = new OpenAI({ baseURL: coder.baseURL, apiKey: 'unused' });
    const alarmParams = { type: 'object', properties: {
      label: { type: 'string', maxLength: 10 },
      hour: { type: 'integer', minimum: 0, maximum: 23 },
      days: { type: 'array', items: { enum: ['mon', 'tue'] }, maxItems: 2 },
      loud: { type: 'boolean' },
      mode: { enum: ['beep', 'ring'] } },
    required: ['label', 'hour', 'loud'], additionalProperties: false };
    const tools = [{ type: 'function', function: { name: 'set_alarm', strict: true, parameters: alarmParams } },
      { type: 'function', function: { name: 'get_time', parameters: timeParams } }];
    const model = 'qwen3-coder-e2e';
    for (const [seed, tool_choice] of ['required', { type: 'function', function: { name: 'set_alarm' } }].entries()) {
      for (const stream of [false, true]) {
        const req = { model, messages, tools, tool_choice, max_tokens: 150, temperature: 1.0, seed };
        const { calls, finish } = await chatToolCalls(client, req, stream);
        assert.equal(finish, 'tool_calls');
        assert.equal(calls.length, 1);
        const { name, arguments: text } = calls[0].function;
        if (typeof tool_choice === 'object') assert.equal(name, 'set_alarm');
        assertValid(assert, name === 'set_alarm' ? alarmParams : timeParams, JSON.parse(text));
      }
    }
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 80,
      temperature: 1.0, seed: 3, logit_bias: { [TOOL_CALL_TOKEN]: 100 } });
    const calls = r.choices[0].message.tool_calls ?? [];
    assert.ok(calls.length >= 1, JSON.stringify(r.choices[0].message));
    for (const c of calls) assertValid(assert, c.function.name === 'set_alarm' ? alarmParams : timeParams,
      JSON.parse(c.function.arguments));
  } finally {
    await coder.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
